"""Arrival order (bot/conversation/arrival.py): places on a key are let through one at a time
in the order they were taken, whichever task gets to run first; other keys do not wait; a
place left while waiting (its task cancelled) keeps the ones after it behind the ones before
it; nothing is remembered once every place is left."""

from __future__ import annotations

import asyncio

import pytest

from bot.conversation.arrival import ArrivalOrder, Place


class Visitor:
    """Goes through a place, says when it is in, and stays until let go."""

    def __init__(self, name: str, place: Place, log: list[str]):
        self.name, self.place, self.log = name, place, log
        self.inside = asyncio.Event()
        self.let_go = asyncio.Event()
        self.task = asyncio.ensure_future(self.visit())

    async def visit(self) -> None:
        async with self.place:
            self.log.append(f"{self.name} in")
            self.inside.set()
            await self.let_go.wait()
            self.log.append(f"{self.name} out")


async def test_a_later_place_waits_for_an_earlier_one_even_when_its_task_runs_first():
    order, log = ArrivalOrder(), []
    first, second = order.place(["chat"]), order.place(["chat"])
    late = Visitor("second", second, log)     # its task is started, and so runs, first
    late.let_go.set()
    early = Visitor("first", first, log)
    await early.inside.wait()
    assert log == ["first in"]
    early.let_go.set()
    await asyncio.gather(early.task, late.task)
    assert log == ["first in", "first out", "second in", "second out"]
    assert len(order) == 0


async def test_places_on_other_keys_do_not_wait():
    order, log = ArrivalOrder(), []
    busy = Visitor("busy", order.place(["chat-1"]), log)
    await busy.inside.wait()
    other = Visitor("other", order.place(["chat-2"]), log)
    other.let_go.set()
    await other.task                 # done while chat-1 is still held
    assert log == ["busy in", "other in", "other out"]
    busy.let_go.set()
    await busy.task
    assert len(order) == 0


async def test_a_place_left_while_waiting_keeps_the_next_behind_the_one_before():
    order, log = ArrivalOrder(), []
    first = Visitor("first", order.place(["chat"]), log)
    gone = Visitor("gone", order.place(["chat"]), log)
    last = Visitor("last", order.place(["chat"]), log)
    last.let_go.set()
    await first.inside.wait()
    gone.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone.task
    elsewhere = Visitor("elsewhere", order.place(["chat-2"]), log)   # the loop turns meanwhile
    elsewhere.let_go.set()
    await elsewhere.task
    assert "last in" not in log
    first.let_go.set()
    await asyncio.gather(first.task, last.task)
    assert log == ["first in", "elsewhere in", "elsewhere out", "first out", "last in", "last out"]
    assert len(order) == 0


async def test_a_place_on_several_keys_waits_for_each_of_them():
    order, log = ArrivalOrder(), []
    one = Visitor("one", order.place(["a"]), log)
    two = Visitor("two", order.place(["b"]), log)
    both = Visitor("both", order.place(["a", "b", "a"]), log)
    both.let_go.set()
    await asyncio.gather(one.inside.wait(), two.inside.wait())
    one.let_go.set()
    await one.task
    assert "both in" not in log
    two.let_go.set()
    await asyncio.gather(two.task, both.task)
    assert log[-2:] == ["both in", "both out"] and len(order) == 0
