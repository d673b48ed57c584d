"""Model slots shared fairly between senders: the pool alone, then the whole runtime against the
fake Anthropic with one sender flooding it."""

from __future__ import annotations

import asyncio

import pytest

from bot.money.fairshare import FairSlots
from tests.fakes.anthropic_server import last_user_text, text
from tests.runtime.test_runtime import say


async def settle() -> None:
    """One loop step: every task that is ready runs up to its next await (no timing involved)."""
    await asyncio.sleep(0)


async def queue(slots: FairSlots, sender: str, n: int) -> list[asyncio.Task]:
    tasks = [asyncio.create_task(slots.acquire(sender)) for _ in range(n)]
    await settle()
    return tasks


async def test_one_sender_leaves_a_share_of_the_slots_free_and_a_newcomer_takes_it_at_once():
    slots = FairSlots(4, share=0.25)
    flood = await queue(slots, "telegram:1", 10)
    assert slots.held("telegram:1") == 3 and slots.waiting() == 7  # borrowed 2, kept 1 free
    await slots.acquire("telegram:2")  # returns at once
    assert slots.held("telegram:2") == 1 and slots.free == 0
    for task in flood:
        task.cancel()


async def test_a_freed_slot_goes_to_a_waiting_sender_below_its_share_before_the_flood():
    slots = FairSlots(4, share=0.25)
    await queue(slots, "telegram:1", 10)
    await slots.acquire("telegram:2")
    third = await queue(slots, "telegram:3", 1)
    slots.release("telegram:1")
    assert slots.held("telegram:3") == 1 and slots.held("telegram:1") == 2
    await settle()
    assert third[0].done()


async def test_with_a_share_of_one_the_pool_is_a_plain_fifo_queue():
    slots = FairSlots(4, share=1.0)
    await queue(slots, "telegram:1", 10)
    assert slots.held("telegram:1") == 4
    late = await queue(slots, "telegram:2", 1)
    for _ in range(6):
        slots.release("telegram:1")  # six of the flood's queued calls go first
    assert slots.held("telegram:2") == 0 and not late[0].done()
    slots.release("telegram:1")
    assert slots.held("telegram:2") == 1


async def test_a_cancelled_waiter_leaves_the_queue_and_never_holds_a_slot():
    slots = FairSlots(2, share=0.5)
    await slots.acquire("a")
    await slots.acquire("b")
    (waiter,) = await queue(slots, "a", 1)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert slots.waiting() == 0
    slots.release("b")
    assert slots.free == 1 and slots.held("a") == 1


async def test_a_slot_granted_to_a_call_cancelled_at_that_moment_is_handed_on():
    slots = FairSlots(1)
    await slots.acquire("a")
    (first,) = await queue(slots, "b", 1)
    (second,) = await queue(slots, "c", 1)
    slots.release("a")      # granted to b's waiter...
    first.cancel()          # ...which is cancelled before it could run
    with pytest.raises(asyncio.CancelledError):
        await first
    await settle()
    assert second.done() and slots.held("c") == 1 and slots.held("b") == 0


async def test_one_sender_flooding_fifty_turns_does_not_delay_another_senders_turn(
        app_factory, fake_anthropic):
    """4 slots: the flood's model calls are held open by the fake (a gate) while the other
    sender's whole turn runs — it started before any flood call had finished, i.e. within one
    model-call time — and then the flood completes."""
    app = await app_factory({
        "agent": {"max_concurrent_llm_calls": 4},
        "senders": {"telegram:1": "full", "telegram:2": "full"},
        "rate_limits": {"messages_per_minute": 0, "max_share_of_model_slots": 0.25}})
    gate = asyncio.Event()
    finished: list[str] = []

    async def responder(body):
        said = last_user_text(body)
        if said.startswith("flood"):
            await gate.wait()
        finished.append(said)
        return text(f"ok: {said}")

    fake_anthropic.responder = responder
    flood = [asyncio.create_task(say(app, f"flood {i}", sender="telegram:1", chat=f"c{i}"))
             for i in range(50)]
    await fake_anthropic.wait_for_requests(3)
    other = await say(app, "hello", sender="telegram:2", chat="2")
    assert other.text == "ok: hello"
    assert finished == ["hello"] and not gate.is_set()  # no flood call had finished
    slots = app.services.llm.slots
    assert slots.held("telegram:1") == 3 and slots.waiting() > 0  # the flood held and queued
    gate.set()
    sinks = await asyncio.gather(*flood)
    assert sorted(s.text for s in sinks) == sorted(f"ok: flood {i}" for i in range(50))
