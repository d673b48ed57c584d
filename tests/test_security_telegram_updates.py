"""One chat's backlog must not starve the other chats (channels/telegram/ordering.py).

Every message of a chat waits for the one before it; while waiting it used to hold one of the
processor's concurrency slots, so a single paired user who sent as many messages as there are
slots blocked every other chat, button tap and /stop until their whole backlog was answered.
"""

from __future__ import annotations

import asyncio

from channels.telegram.ordering import ChatOrderedProcessor
from tests.test_telegram_updates import FakeUpdate, by_chat


async def test_a_backlog_in_one_chat_leaves_room_for_other_chats_and_taps():
    processor = ChatOrderedProcessor(by_chat, max_concurrent_updates=4)
    release = asyncio.Event()

    async def slow_turn() -> None:
        await release.wait()

    async def quick() -> None:
        pass

    async with processor:
        flood = [asyncio.create_task(processor.process_update(FakeUpdate(1, f"m{i}"), slow_turn()))
                 for i in range(10)]
        await asyncio.sleep(0)   # one loop turn: every flood task reaches its lock
        try:
            await asyncio.wait_for(processor.process_update(FakeUpdate(2, "other chat"), quick()), 2)
            await asyncio.wait_for(processor.process_update(FakeUpdate(None, "tap"), quick()), 2)
        finally:
            release.set()
            await asyncio.gather(*flood)
    assert processor.active_chats == 0


async def test_running_updates_are_still_limited():
    processor = ChatOrderedProcessor(by_chat, max_concurrent_updates=2)
    release = asyncio.Event()
    running: list[int] = []

    async def turn(chat: int) -> None:
        running.append(chat)
        await release.wait()

    tasks = [asyncio.create_task(processor.process_update(FakeUpdate(chat, "x"), turn(chat)))
             for chat in range(5)]
    for _ in range(5):
        await asyncio.sleep(0)
    assert len(running) == 2
    release.set()
    await asyncio.gather(*tasks)
    assert sorted(running) == [0, 1, 2, 3, 4]
