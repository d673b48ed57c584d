"""WhatsApp end to end next to Telegram's webhook: webhook-to-reply latency and 100 chats at once.

Both channels run the same way, in this process, each on a fresh App (the real store, agent and
channel, started by the App) with its platform's fake on 127.0.0.1 (tests/fakes/), and the fake
Anthropic in its own process, answering at once for the latency runs and after 1.0 s for the
chat runs:

    telegram  [telegram] mode = "webhook"; each update POSTed to the bot's webhook with the
              secret header, as Telegram does
    whatsapp  each message POSTed as a signed Cloud API delivery (X-Hub-Signature-256)

1. latency: N messages from one person, one after the other; latency = from the POST of the
   delivery until the fake receives the message carrying the full answer. Target: WhatsApp's
   p50 within 1.2× of Telegram's.
2. 100 chats: 100 different people send one message at the same moment, every model call
   takes 1.0 s; wall time until all 100 answers arrived. Target: within 1.2× of Telegram's.

All traffic stays on 127.0.0.1; every wait is bounded (--timeout seconds per phase).

    .venv/bin/python bench/whatsapp.py [--messages 50] [--chats 100]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import ROOT, fake_anthropic, make_config, percentile
from _telegram_webhook import UNLIMITED, Send, telegram_webhook_bot

# bench/telegram.py would shadow python-telegram-bot's `telegram` package for this script.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]

from tests.fakes.whatsapp_server import FakeWhatsApp  # noqa: E402

APP_SECRET = "bench-app-secret"
LATENCY_USER = 4242
CHAT_BASE = 390_000_100_000
TARGET_RATIO = 1.2


async def _whatsapp(model_url: str) -> tuple[Any, Any, Send, Callable[[int, str], bool]]:
    from bot.app import App

    wa = await FakeWhatsApp().__aenter__()
    overrides = {**UNLIMITED,
                 "whatsapp": {"base_url": wa.base_url, "phone_number_id": wa.phone_number_id,
                              "listen": "127.0.0.1", "port": 0}}
    app = await App.open(make_config(model_url, overrides, env={
        "WHATSAPP_ACCESS_TOKEN": wa.token, "WHATSAPP_APP_SECRET": APP_SECRET,
        "WHATSAPP_VERIFY_TOKEN": "bench"}))
    await app.start_channels(["whatsapp"])
    driver = wa.driver(f"http://127.0.0.1:{app.channels['whatsapp'].webhook_port}/whatsapp",
                       APP_SECRET)

    async def send(user: int, words: str) -> int:
        return await driver.text(str(user), words)

    def answered(user: int, words: str) -> bool:
        return any(m.to == str(user) and m.text == f"ok: {words}" for m in wa.sent)
    return app, wa, send, answered


async def _wait(fake: Any, condition: Callable[[], bool], timeout: float) -> None:
    await fake.wait_until(condition, timeout=timeout)


async def latency(start: Any, model_url: str, messages: int, timeout: float) -> list[float]:
    app, fake, send, answered = await start(model_url)
    try:
        times = []
        for n in range(messages + 3):                 # three warm-up messages
            words = f"message {n}"
            began = time.perf_counter()
            assert await send(LATENCY_USER, words) == 200
            await _wait(fake, lambda w=words: answered(LATENCY_USER, w), timeout)
            if n >= 3:
                times.append((time.perf_counter() - began) * 1000)
        return times
    finally:
        await app.stop_channels()
        await app.close()
        await fake.__aexit__(None, None, None)


async def chats(start: Any, model_url: str, count: int, timeout: float) -> float:
    app, fake, send, answered = await start(model_url)
    try:
        assert await send(CHAT_BASE - 1, "warm up") == 200
        await _wait(fake, lambda: answered(CHAT_BASE - 1, "warm up"), timeout)
        began = time.perf_counter()
        statuses = await asyncio.gather(*(send(CHAT_BASE + i, "hi") for i in range(count)))
        assert set(statuses) == {200}
        await _wait(fake, lambda: all(answered(CHAT_BASE + i, "hi") for i in range(count)),
                    timeout)
        return time.perf_counter() - began
    finally:
        await app.stop_channels()
        await app.close()
        await fake.__aexit__(None, None, None)


async def main(args: argparse.Namespace) -> int:
    bots = {"telegram": telegram_webhook_bot, "whatsapp": _whatsapp}
    ok = True
    with fake_anthropic(0.0) as quick:
        figures = {name: await latency(start, quick, args.messages, args.timeout)
                   for name, start in bots.items()}
    print(f"1. latency, {args.messages} messages one after another (webhook POST → answer):")
    for name, values in figures.items():
        print(f"   {name:<9} p50 {percentile(values, 50):6.1f} ms   p90 "
              f"{percentile(values, 90):6.1f} ms   mean {statistics.mean(values):6.1f} ms")
    ratio = percentile(figures["whatsapp"], 50) / percentile(figures["telegram"], 50)
    ok &= ratio <= TARGET_RATIO
    print(f"   whatsapp / telegram p50: {ratio:.2f}× (target ≤ {TARGET_RATIO}×)")
    with fake_anthropic(1.0) as slow:
        walls = {name: await chats(start, slow, args.chats, args.timeout)
                 for name, start in bots.items()}
    print(f"2. {args.chats} chats at once, every model call 1.0 s (wall time until all answered):")
    for name, wall in walls.items():
        print(f"   {name:<9} {wall:6.2f} s")
    ratio = walls["whatsapp"] / walls["telegram"]
    ok &= ratio <= TARGET_RATIO
    print(f"   whatsapp / telegram: {ratio:.2f}× (target ≤ {TARGET_RATIO}×)")
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=50)
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=60.0)
    sys.exit(asyncio.run(main(parser.parse_args())))
