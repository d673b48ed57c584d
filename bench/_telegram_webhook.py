"""The Telegram side of the channel benchmarks (bench/whatsapp.py, bench/slack.py): a fresh App
with the Telegram channel in webhook mode against the fake Bot API, every update POSTed to the
bot's webhook with the secret header as Telegram does. Import it before a script drops bench/
from sys.path (bench/telegram.py would shadow python-telegram-bot's `telegram` package)."""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable
from typing import Any

from _common import make_config

TG_SECRET = "bench-telegram-secret"
# Every benchmark sender may do everything, as often as it likes (the limits are not measured).
UNLIMITED = {"senders": {"unknown": "full"}, "rate_limits": {"messages_per_minute": 100_000},
             "budgets": {"sender_daily": 0, "sender_monthly": 0, "global_daily": 0}}

Send = Callable[[int, str], Awaitable[int]]
Answered = Callable[[int, str], bool]


def free_port() -> int:
    with socket.socket() as probe:   # Telegram's port must be named (its schema says ≥ 1)
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def telegram_webhook_bot(model_url: str) -> tuple[Any, Any, Send, Answered]:
    """(app, fake Telegram, send(user, words) -> HTTP status, answered(user, words))."""
    from bot.app import App
    from tests.fakes.telegram_server import FakeTelegram, channel_overrides

    tg = await FakeTelegram().__aenter__()
    port = free_port()
    overrides = {**UNLIMITED, **channel_overrides(
        tg, mode="webhook", webhook_url=f"http://127.0.0.1:{port}/telegram", listen="127.0.0.1",
        port=port, webhook_path="/telegram")}
    app = await App.open(make_config(model_url, overrides, env={
        "TELEGRAM_BOT_TOKEN": tg.token, "TELEGRAM_WEBHOOK_SECRET": TG_SECRET}))
    await app.start_channels(["telegram"])

    async def send(user: int, words: str) -> int:
        chat = {"id": user, "type": "private", "first_name": "Ada"}
        return await tg.deliver_to_webhook({"message": tg.make_message(chat, user, words)})

    def answered(user: int, words: str) -> bool:
        return any(c.params.get("text") == f"ok: {words}" and int(c.params["chat_id"]) == user
                   for c in tg.calls if c.method in ("sendMessage", "editMessageText"))
    return app, tg, send, answered
