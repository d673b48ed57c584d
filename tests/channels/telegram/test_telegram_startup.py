"""Starting the Telegram channel: token problems as one clear line, `check_token` for doctor, and
webhook mode (our aiohttp endpoint, the secret-token header checked on every request)."""

from __future__ import annotations

import socket

import aiohttp
import pytest

from bot.conversation.inbox import Inbox
from bot.core.errors import ChannelError
from channels.telegram import TelegramChannel, check_token
from channels.telegram.sink import SinkSettings
from tests.conftest import make_config
from tests.fakes.anthropic_server import last_user_text
from tests.fakes.telegram_server import FakeTelegram, channel_overrides
from tests.support.languages import EN

ADA = 4242
SECRET = "s3cret_webhook-token"
FAST = SinkSettings(edit_interval=0.05, group_edit_interval=0.05, typing_delay=0.05)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def telegram_config(tmp_path, tg: FakeTelegram, token: str | None = None, **telegram):
    env = {"TELEGRAM_BOT_TOKEN": token if token is not None else tg.token}
    return make_config(tmp_path, channel_overrides(tg, **telegram), env=env)


class NoAgent:
    """Start-up failures must happen before the agent is ever asked anything."""

    def __init__(self, inbox=None):
        self.inbox = inbox

    async def handle(self, message, sink):
        raise AssertionError("no message should reach the agent")

    async def resolve_approval(self, approval_id, resolver, choice):
        raise AssertionError("no tap should reach the agent")

    async def set_approval_message_ref(self, approval_id, ref, channel=""):
        raise AssertionError("unexpected")

    async def pending_approvals(self, channel):
        return []

    def command_descriptions(self, language=""):
        return [("start", "Start")]

    def translator(self, reader, hint=""):
        return EN


async def start_failure(config) -> str:
    channel = TelegramChannel(config, NoAgent())
    with pytest.raises(ChannelError) as caught:
        await channel.start()
    assert not channel.connected
    message = str(caught.value)
    assert "\n" not in message
    return message


async def test_a_wrong_token_fails_start_up_with_one_clear_line_without_the_token(tmp_path, tg):
    wrong = "123456:WRONG-token-value"
    message = await start_failure(telegram_config(tmp_path, tg, token=wrong))
    assert "rejected TELEGRAM_BOT_TOKEN" in message
    assert wrong not in message and "WRONG" not in message
    assert [c.method for c in tg.calls] == ["getMe"]


async def test_a_missing_or_malformed_token_is_refused_before_any_request(tmp_path, tg):
    assert "is not set" in await start_failure(telegram_config(tmp_path, tg, token=""))
    assert "does not look like a bot token" in await start_failure(
        telegram_config(tmp_path, tg, token="not a token/../x"))
    assert tg.calls == []


async def test_an_unreachable_bot_api_fails_with_one_clear_line(tmp_path, tg):
    closed = f"http://127.0.0.1:{free_port()}/bot"
    message = await start_failure(telegram_config(tmp_path, tg, base_url=closed))
    assert message.startswith(f"cannot reach the Telegram Bot API at {closed}")


async def test_check_token_names_the_bot_or_says_what_is_wrong(tmp_path, tg):
    assert await check_token(telegram_config(tmp_path, tg)) == "@myclaw_test_bot"
    with pytest.raises(ChannelError, match="rejected TELEGRAM_BOT_TOKEN"):
        await check_token(telegram_config(tmp_path, tg, token="123456:WRONG-token-value"))


async def test_the_channel_reports_connected_only_while_running(tmp_path, tg, store):
    channel = TelegramChannel(telegram_config(tmp_path, tg), NoAgent(Inbox(store)))
    assert not channel.connected
    await channel.start()
    assert channel.connected
    await channel.stop()
    assert not channel.connected


async def test_webhook_mode_refuses_to_start_without_its_secret_or_url(tmp_path, tg):
    config = telegram_config(tmp_path, tg, mode="webhook", webhook_url="https://bot.example/telegram")
    assert "TELEGRAM_WEBHOOK_SECRET" in await start_failure(config)
    config.env["TELEGRAM_WEBHOOK_SECRET"] = "has spaces and ; semicolons"
    assert "TELEGRAM_WEBHOOK_SECRET must be" in await start_failure(config)
    no_url = telegram_config(tmp_path, tg, mode="webhook")
    no_url.env["TELEGRAM_WEBHOOK_SECRET"] = SECRET
    assert "webhook_url" in await start_failure(no_url)
    assert tg.calls == []


@pytest.fixture
async def webhook_bot(app_factory, tg):
    port = free_port()
    url = f"http://127.0.0.1:{port}/hook"
    overrides = {"senders": {f"telegram:{ADA}": "supervised"},
                 **channel_overrides(tg, mode="webhook", webhook_url=url, listen="127.0.0.1", port=port,
                                     webhook_path="/hook")}
    env = {"TELEGRAM_BOT_TOKEN": tg.token, "TELEGRAM_WEBHOOK_SECRET": SECRET}
    app = await app_factory(overrides, env=env)
    channel = TelegramChannel(app.config, app.agent, settings=FAST)
    await channel.start()
    yield channel
    await channel.stop()


def private_update(tg: FakeTelegram, text: str) -> dict:
    return {"message": tg.make_message({"id": ADA, "type": "private", "first_name": "Ada"}, ADA, text)}


async def test_webhook_mode_registers_the_url_and_secret_and_does_not_poll(webhook_bot, tg):
    (registered,) = tg.of("setWebhook")
    assert registered.params["url"] == f"http://127.0.0.1:{webhook_bot.webhook_port}/hook"
    assert registered.params["secret_token"] == SECRET
    assert set(registered.params["allowed_updates"]) == {"message", "callback_query"}
    assert tg.of("getUpdates") == [] and tg.of("deleteWebhook") == []


async def test_a_webhook_post_without_the_right_secret_gets_403_and_nothing_is_processed(
        webhook_bot, tg, fake_anthropic):
    assert await tg.deliver_to_webhook(private_update(tg, "forged one"), secret=None) == 403
    assert await tg.deliver_to_webhook(private_update(tg, "forged two"), secret="guess") == 403
    assert await tg.deliver_to_webhook(private_update(tg, "forged three"), secret=SECRET + "x") == 403
    assert await tg.deliver_to_webhook(private_update(tg, "real one")) == 200
    await tg.wait_until(lambda: [m["text"] for m in tg.messages.values()] == ["ok: real one"])
    assert [last_user_text(r.json) for r in fake_anthropic.requests] == ["real one"]


async def test_a_webhook_body_that_is_not_an_update_is_refused(webhook_bot, tg, fake_anthropic):
    url = tg.webhook["url"]
    headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
    async with aiohttp.ClientSession() as session:
        for body in (b"{not json", b"[1, 2]", b'{"message": {}}'):
            async with session.post(url, data=body, headers=headers) as response:
                assert response.status == 400
        async with session.get(url, headers=headers) as response:
            assert response.status == 405
    assert fake_anthropic.requests == [] and tg.of("sendMessage") == []
