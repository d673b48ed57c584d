"""The per-chat ordered update processor (channels/telegram/ordering.py), driven through PTB's
own `process_update` entry point."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from channels.telegram.ordering import ChatOrderedProcessor


@dataclass(frozen=True)
class FakeUpdate:
    chat: int | None
    label: str


def by_chat(update: object) -> int | None:
    assert isinstance(update, FakeUpdate)
    return update.chat


async def test_two_chats_run_at_the_same_time():
    processor = ChatOrderedProcessor(by_chat)
    first_running = asyncio.Event()
    second_done = asyncio.Event()

    async def first() -> None:
        first_running.set()
        await second_done.wait()   # only finishes if the other chat is not blocked behind it

    async def second() -> None:
        await first_running.wait()
        second_done.set()

    async with processor:
        await asyncio.wait_for(asyncio.gather(
            processor.process_update(FakeUpdate(1, "a"), first()),
            processor.process_update(FakeUpdate(2, "b"), second())), timeout=2)
    assert processor.active_chats == 0


async def test_one_chat_is_handled_in_arrival_order_even_when_the_first_is_slow():
    processor = ChatOrderedProcessor(by_chat)
    order: list[str] = []
    release = asyncio.Event()

    async def work(label: str, wait: bool) -> None:
        order.append(f"start {label}")
        if wait:
            await release.wait()
        order.append(f"end {label}")

    tasks = [asyncio.create_task(processor.process_update(FakeUpdate(7, label), work(label, label == "1")))
             for label in ("1", "2", "3")]
    await asyncio.sleep(0)   # let every task reach the chat lock (one loop turn, not a timing guess)
    assert order == ["start 1"]
    assert processor.active_chats == 1
    release.set()
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=2)
    assert order == ["start 1", "end 1", "start 2", "end 2", "start 3", "end 3"]


async def test_the_lock_map_is_empty_after_traffic_from_many_chats():
    processor = ChatOrderedProcessor(by_chat)
    seen: list[int] = []

    async def work(chat: int) -> None:
        await asyncio.sleep(0)
        seen.append(chat)

    await asyncio.gather(*(processor.process_update(FakeUpdate(chat % 50, "x"), work(chat))
                           for chat in range(500)))
    assert len(seen) == 500
    assert processor.active_chats == 0


async def test_a_failing_or_cancelled_update_still_releases_its_chat():
    processor = ChatOrderedProcessor(by_chat)
    blocker = asyncio.Event()

    async def boom() -> None:
        raise RuntimeError("handler failed")

    async def stuck() -> None:
        await blocker.wait()

    failed = asyncio.create_task(processor.process_update(FakeUpdate(3, "boom"), boom()))
    hanging = asyncio.create_task(processor.process_update(FakeUpdate(4, "stuck"), stuck()))
    await asyncio.sleep(0)
    hanging.cancel()
    results = await asyncio.gather(failed, hanging, return_exceptions=True)
    assert isinstance(results[0], RuntimeError)
    assert isinstance(results[1], asyncio.CancelledError)
    assert processor.active_chats == 0


async def test_updates_without_a_key_skip_the_chat_queue():
    processor = ChatOrderedProcessor(by_chat)
    release = asyncio.Event()
    stop_seen = asyncio.Event()

    async def long_turn() -> None:
        await release.wait()

    async def stop() -> None:
        stop_seen.set()
        release.set()

    turn = asyncio.create_task(processor.process_update(FakeUpdate(9, "turn"), long_turn()))
    await asyncio.sleep(0)
    # A /stop (key None) must run while the turn of the same chat is still in progress.
    await asyncio.wait_for(processor.process_update(FakeUpdate(None, "/stop"), stop()), timeout=2)
    assert stop_seen.is_set()
    await asyncio.wait_for(turn, timeout=2)
    assert processor.active_chats == 0
