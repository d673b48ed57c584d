"""Work due while the bot was down, end to end: a real `myclaw run` against the fake Telegram,
stopped (gracefully, or with SIGKILL) while a reminder comes due, started again on the same
store — the reminder reaches its chat once, after the channel is up, on both backends."""

from __future__ import annotations

import time
from typing import Any

import pytest

from bot.jobs.jobs import Job, Jobs
from bot.jobs.schedule import parse_at
from bot.store.factory import postgres_store
from bot.store.sqlite import Store
from tests.support.crashkit import Backend, Kit, backend_of, crash_kit
from tests.support.pg_support import on_both_backends
from tests.support.waiting import eventually

backend_name = on_both_backends()
pytestmark = pytest.mark.timeout(180)


@pytest.fixture
async def backend(_pg_schema_if_needed) -> Backend:
    return await backend_of(_pg_schema_if_needed)


def open_store(kit: Kit) -> Any:
    if kit.backend.name == "sqlite":
        return Store(kit.tmp / "data" / "myclaw.db")
    return postgres_store(kit.backend.pg_url, schema=kit.backend.pg_schema)


async def remind_while_down(kit: Kit, chat: int, words: str) -> None:
    """A reminder, created before the stop, that came due a few seconds before the start."""
    created = time.time() - 60
    async with open_store(kit) as store:
        await Jobs(store, clock=lambda: created).create(Job(
            id="", owner=f"telegram:{chat}", channel="telegram", chat=str(chat), name="due",
            schedule=parse_at("in 55 seconds", now=created, timezone="UTC"), level="full",
            message=words))


def reminders(kit: Kit, chat: int, words: str) -> list[int]:
    return [mid for (c, mid), m in kit.tg.messages.items()
            if c == chat and words in m.get("text", "")]


@pytest.mark.parametrize("stop", ["graceful", "kill -9"])
async def test_a_reminder_due_while_the_bot_was_down_is_sent_once_at_start_up(
        tmp_path, backend, stop):
    async with crash_kit(tmp_path, backend) as kit:
        chat = kit.chats[0]
        await kit.start()
        await (kit.bot.stop() if stop == "graceful" else kit.kill())
        await remind_while_down(kit, chat, "water the plants")
        await kit.start()
        await eventually(lambda: reminders(kit, chat, "water the plants"),
                         "the reminder due while the bot was down")
        await kit.bot.stop()
        assert len(reminders(kit, chat, "water the plants")) == 1
        rows = await kit.store.rows("SELECT status FROM jobs")
        assert rows == [("done",)]
