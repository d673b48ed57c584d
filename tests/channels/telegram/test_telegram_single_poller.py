"""One getUpdates consumer per bot token (Telegram allows one): a second `myclaw run` polling
with the same token on the same PostgreSQL store refuses to start, in one line; and a conflict
Telegram reports (409, a poller elsewhere) stops this one's polling with the same line. Real
Apps, python-telegram-bot against the fake Bot API."""

from __future__ import annotations

import asyncio
import logging

import pytest

from bot.core.errors import ChannelError
from channels.telegram.channel import ANOTHER_POLLER
from tests.channels.telegram.test_telegram_startup import free_port
from tests.fakes.telegram_server import channel_overrides

CONFLICT = "Conflict: terminated by other getUpdates request; make sure that only one bot " \
           "instance is running"


@pytest.fixture
def backend_name() -> str:
    return "postgresql"


@pytest.fixture
async def poller(app_factory, tg):
    """`await poller()`: an App on the shared store with its Telegram channel polling."""
    started = []

    async def start(**telegram):
        app = await app_factory(channel_overrides(tg, **telegram),
                                env={"TELEGRAM_BOT_TOKEN": tg.token})
        started.append(app)
        await app.start_channels(["telegram"])
        return app

    yield start
    for app in reversed(started):
        await app.stop_channels()


async def test_a_second_poller_with_the_same_token_refuses_to_start_in_one_line(
        poller, tg, caplog):
    caplog.set_level(logging.DEBUG, logger="bot")
    caplog.set_level(logging.DEBUG, logger="channels")
    await poller()
    with pytest.raises(ChannelError) as refused:
        await poller()
    assert str(refused.value) == ANOTHER_POLLER
    assert "\n" not in str(refused.value)
    assert len(tg.of("deleteWebhook")) == 1               # the second never touched Telegram
    ours = [r.getMessage() for r in caplog.records if r.name.startswith(("bot", "channels"))]
    assert ours and not any(tg.token.split(":")[1] in line for line in ours)
    assert tg.token.split(":")[1] not in str(refused.value)


async def test_the_poller_lock_is_free_again_once_the_first_poller_has_stopped(poller, tg):
    first = await poller()
    await first.stop_channels()
    await first.services.store.close()                    # the process ended
    second = await poller()
    assert second.channels["telegram"].connected


async def test_replicas_in_webhook_mode_take_no_poller_lock(app_factory, tg):
    apps = [await app_factory(channel_overrides(tg, mode="webhook", webhook_url="https://x/t",
                                                port=free_port()),
                              env={"TELEGRAM_BOT_TOKEN": tg.token,
                                   "TELEGRAM_WEBHOOK_SECRET": "s3cret_webhook-token"})
            for _ in range(2)]
    for app in apps:
        await app.start_channels(["telegram"])
    try:
        assert all(app.channels["telegram"].connected for app in apps)
    finally:
        for app in apps:
            await app.stop_channels()


async def test_a_conflict_from_telegram_stops_polling_with_the_same_clear_line(
        poller, tg, caplog):
    said = asyncio.Event()
    handler = logging.Handler()
    handler.emit = lambda record: said.set() if ANOTHER_POLLER in record.getMessage() else None
    logging.getLogger("channels.telegram.channel").addHandler(handler)
    try:
        tg.fail("getUpdates", status=409, description=CONFLICT, times=1000)   # polled elsewhere
        app = await poller()
        channel = app.channels["telegram"]
        await asyncio.wait_for(said.wait(), 10)
    finally:
        logging.getLogger("channels.telegram.channel").removeHandler(handler)
    assert not channel.connected
    conflicts = [r for r in caplog.records if ANOTHER_POLLER in r.getMessage()]
    assert len(conflicts) == 1 and conflicts[0].levelno == logging.ERROR
