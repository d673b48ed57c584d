"""How `Inbox.run` orders work inside one process, on SQLite and PostgreSQL: each conversation
one row at a time in arrival order, conversations side by side, rows without a conversation
(taps, /stop) never waiting, a limit on running rows that a waiting row does not hold, and an
older row adopted from a dead process going before a newer one already waiting."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from bot.conversation.inbox import Claim, Entry, Inbox, InboxRow, InboxSettings
from tests.support.pg_support import on_both_backends

backend_name = on_both_backends()

SETTINGS = InboxSettings(lease_seconds=30, keep_done_seconds=3600, retry_seconds=0.01)


@pytest.fixture
def inbox(store) -> Inbox:
    return Inbox(store, settings=SETTINGS)


async def stored(inbox: Inbox, *conversations: str) -> list[InboxRow]:
    rows = await inbox.put("telegram", [Entry(f"u{i}", c, "{}") for i, c in enumerate(conversations)])
    return sorted(rows, key=lambda r: r.id)


class WatchedLimit(asyncio.BoundedSemaphore):
    """A real semaphore that also tells how many rows wait for it."""

    def __init__(self, value: int):
        super().__init__(value)
        self.waiting = 0
        self.changed = asyncio.Condition()

    async def acquire(self) -> bool:
        if self.locked():
            async with self.changed:
                self.waiting += 1
                self.changed.notify_all()
        return await super().acquire()


async def test_two_conversations_run_at_the_same_time(inbox):
    first, second = await stored(inbox, "1", "2")
    first_running, second_done = asyncio.Event(), asyncio.Event()

    async def one() -> None:
        first_running.set()
        await second_done.wait()   # only finishes if the other conversation is not behind it

    async def two() -> None:
        await first_running.wait()
        second_done.set()

    await asyncio.wait_for(asyncio.gather(inbox.run(first, one), inbox.run(second, two)), 10)
    assert inbox.active_conversations == 0


async def test_a_conversation_runs_in_arrival_order_even_when_the_first_is_slow(inbox):
    rows = await stored(inbox, "7", "7", "7")
    order: list[str] = []
    release, first_started = asyncio.Event(), asyncio.Event()

    def work(label: str) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            order.append(f"start {label}")
            if label == "1":
                first_started.set()
                await release.wait()
            order.append(f"end {label}")
        return run

    tasks = [asyncio.create_task(inbox.run(row, work(str(i + 1)))) for i, row in enumerate(rows)]
    await first_started.wait()
    assert order == ["start 1"] and inbox.active_conversations == 1
    release.set()
    await asyncio.wait_for(asyncio.gather(*tasks), 10)
    assert order == ["start 1", "end 1", "start 2", "end 2", "start 3", "end 3"]


async def test_no_conversation_is_remembered_after_traffic_from_many(inbox):
    rows = await stored(inbox, *(str(i % 25) for i in range(100)))
    seen: list[int] = []

    def work(row: InboxRow) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            seen.append(row.id)
        return run

    await asyncio.wait_for(asyncio.gather(*(inbox.run(row, work(row)) for row in rows)), 30)
    assert len(seen) == 100 and inbox.active_conversations == 0


async def test_a_failing_or_cancelled_row_frees_its_conversation(inbox):
    failing, hanging, after = await stored(inbox, "3", "4", "3")
    hung = asyncio.Event()

    async def boom() -> None:
        raise RuntimeError("handler failed")

    async def stuck() -> None:
        hung.set()
        await asyncio.Event().wait()

    async def fine() -> None:
        pass

    with pytest.raises(RuntimeError):
        await inbox.run(failing, boom)
    task = asyncio.create_task(inbox.run(hanging, stuck))
    await asyncio.wait_for(hung.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.wait_for(inbox.run(after, fine), 10)   # the failed row did not block it
    assert inbox.active_conversations == 0


async def test_a_row_without_a_conversation_runs_while_its_chats_turn_is_running(inbox):
    (turn,) = await stored(inbox, "9")
    (stop,) = await inbox.put("telegram", [Entry("stop", "", "{}")])
    release, turn_running, stop_seen = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def long_turn() -> None:
        turn_running.set()
        await release.wait()

    async def stop_it() -> None:
        stop_seen.set()
        release.set()

    task = asyncio.create_task(inbox.run(turn, long_turn))
    await turn_running.wait()
    await asyncio.wait_for(inbox.run(stop, stop_it), 10)
    assert stop_seen.is_set()
    await asyncio.wait_for(task, 10)


async def test_a_backlog_in_one_conversation_leaves_room_for_other_conversations_and_taps(inbox):
    limit = asyncio.BoundedSemaphore(4)
    backlog = await stored(inbox, *(["1"] * 10))
    (other,) = await inbox.put("telegram", [Entry("other", "2", "{}")])
    (tap,) = await inbox.put("telegram", [Entry("tap", "", "{}")])
    release, first_running = asyncio.Event(), asyncio.Event()

    async def slow_turn() -> None:
        first_running.set()
        await release.wait()

    async def quick() -> None:
        pass

    flood = [asyncio.create_task(inbox.run(row, slow_turn, limit)) for row in backlog]
    await first_running.wait()
    try:
        assert await asyncio.wait_for(inbox.run(other, quick, limit), 10)
        assert await asyncio.wait_for(inbox.run(tap, quick), 10)
    finally:
        release.set()
        await asyncio.wait_for(asyncio.gather(*flood), 30)


async def test_running_rows_are_limited(inbox):
    limit = WatchedLimit(2)
    rows = await stored(inbox, "0", "1", "2", "3", "4")
    release = asyncio.Event()
    running: list[str] = []

    def turn(row: InboxRow) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            running.append(row.conversation)
            await release.wait()
        return run

    tasks = [asyncio.create_task(inbox.run(row, turn(row), limit)) for row in rows]
    async with limit.changed:
        await asyncio.wait_for(limit.changed.wait_for(lambda: limit.waiting == 3), 10)
    assert len(running) == 2
    release.set()
    await asyncio.wait_for(asyncio.gather(*tasks), 10)
    assert sorted(running) == [f"telegram:{i}" for i in range(5)]


async def test_an_older_row_adopted_from_a_dead_process_goes_before_a_newer_one_waiting_here(store):
    now = [1_000_000.0]
    dead = Inbox(store, "dead-replica", SETTINGS, clock=lambda: now[0])
    here = Inbox(store, "live-replica", SETTINGS, clock=lambda: now[0])
    older, newer = await stored(dead, "5", "5")
    assert await dead.claim(older) is Claim.CLAIMED   # then its process was killed
    order: list[str] = []

    def work(label: str) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            order.append(label)
        return run

    waiting = asyncio.create_task(here.run(newer, work("newer")))   # refused: the older is held
    now[0] += 31                                                   # the dead claim lapses
    (adopted,) = [r for r in await here.adoptable("telegram") if r.id == older.id]
    assert await asyncio.wait_for(here.run(adopted, work("older")), 10)
    assert await asyncio.wait_for(waiting, 10)
    assert order == ["older", "newer"]


async def test_puts_of_one_conversation_started_together_are_numbered_in_the_order_called(inbox):
    # As discord.py and the webhook servers do: one task per update, started in arrival order.
    puts = [asyncio.ensure_future(inbox.put("discord", [Entry(f"m{n}", "dm", "{}")], claim=True))
            for n in range(12)]
    rows = sorted((row for rows in await asyncio.gather(*puts) for row in rows),
                  key=lambda r: r.id)
    assert [r.update_key for r in rows] == [f"m{n}" for n in range(12)]
    assert [r.claimed for r in rows] == [True] + [False] * 11   # the first may run at once
