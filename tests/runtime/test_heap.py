"""After a burst of turns the C heap's free pages are handed back (bot/ops/heap.py)."""

from __future__ import annotations

import asyncio

from bot.conversation.sessions import SessionQueue
from bot.runtime.heap import HeapTrim
from tests.support.waiting import eventually


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_the_heap_is_trimmed_once_the_queue_has_gone_idle():
    queue, trims = SessionQueue(), []
    heap = HeapTrim(lambda: queue.idle, delay=0.01, trim=trims.append)
    queue.on_idle = heap.soon

    async def turn() -> None:
        await asyncio.sleep(0.01)

    await asyncio.gather(*(queue.run(f"chat{i}", turn) for i in range(5)))
    assert trims == []              # not while the turns were running, nor right away
    await asyncio.sleep(0.05)
    assert trims == [0]


async def test_busy_again_when_the_moment_comes_means_no_trim():
    busy, trims = [False], []
    heap = HeapTrim(lambda: not busy[0], delay=0.01, trim=trims.append)
    heap.soon()
    busy[0] = True
    await asyncio.sleep(0.03)
    assert trims == []


async def test_trims_are_spaced_so_a_turn_after_turn_does_not_pay_each_time():
    clock, trims = Clock(), []
    heap = HeapTrim(lambda: True, delay=0.0, every=10.0, clock=clock, trim=trims.append)
    heap.soon()
    heap.soon()                     # one already scheduled: not twice
    await asyncio.sleep(0.01)
    assert trims == [0]
    heap.soon()                     # 10 s after the last one, not now
    await asyncio.sleep(0.01)
    assert trims == [0]
    heap.cancel()
    assert heap.trims == 1


def test_without_malloc_trim_nothing_is_scheduled():
    heap = HeapTrim(lambda: True, trim=None)
    heap._trim = None
    heap.soon()                     # no running loop needed: nothing to do
    assert heap.trims == 0


async def test_what_start_up_freed_is_trimmed_without_holding_back_the_first_burst():
    clock, trims = Clock(), []
    heap = HeapTrim(lambda: True, delay=0.0, every=10.0, clock=clock, trim=trims.append)
    heap.after_start()
    await eventually(lambda: trims == [0], "the trim after start-up")
    heap.soon()                     # the first burst is over: trimmed at once, not 10 s later
    await eventually(lambda: trims == [0, 0], "the trim after the first burst")
    assert heap.trims == 2
