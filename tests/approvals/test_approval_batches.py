"""A batch of requests (several asks of one model step) in the store, on SQLite and PostgreSQL:
each request answered once, "all" answers only what is still pending, exactly one answer
completes the batch however many race, and a batch that lapses or is superseded closes whole."""

from __future__ import annotations

import asyncio

import pytest

from bot.approvals.service import Approvals
from bot.store.sqlite import Store
from tests.approvals.test_approvals import APPROVER, OWNER, STRANGER, Clock
from tests.support.pg_support import on_both_backends

backend_name = on_both_backends()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def approvals(store: Store, clock: Clock) -> Approvals:
    return Approvals(store, timeout_seconds=300, approvers=[APPROVER], clock=clock)


async def ask_batch(approvals: Approvals, size: int = 3, session: str = "s1") -> list:
    batch = approvals.new_batch()
    return [await approvals.create(
        session_id=session, sender=OWNER, chat="100", channel="telegram", tool="fs_write",
        tool_use_id=f"toolu_{n}", args={"path": f"{n}.txt"}, risk="medium",
        summary=f"Write {n}.txt", batch=batch, position=n) for n in range(size)]


async def statuses(approvals: Approvals, batch: str) -> list[str]:
    return [r.status for r in await approvals.batch_members(batch)]


async def test_the_answer_that_decides_the_last_call_completes_the_batch(approvals):
    first, second, third = await ask_batch(approvals)
    assert not (await approvals.resolve(first.id, OWNER, "approve")).batch_done
    assert not (await approvals.resolve(third.id, APPROVER, "deny")).batch_done
    last = await approvals.resolve(second.id, OWNER, "approve")
    assert last.ok and last.batch_done
    assert await statuses(approvals, first.batch) == ["approved", "approved", "denied"]


async def test_approve_all_decides_only_the_calls_still_pending(approvals):
    first, second, third = await ask_batch(approvals)
    await approvals.resolve(second.id, OWNER, "deny")
    every = await approvals.resolve_batch(first.batch, APPROVER, "approve")
    assert every.ok and every.batch_done and [r.id for r in every.decided] == [first.id, third.id]
    assert await statuses(approvals, first.batch) == ["approved", "denied", "approved"]
    again = await approvals.resolve_batch(first.batch, OWNER, "deny")
    assert not again.ok and "already answered" in again.reason


async def test_twenty_racing_answers_give_one_outcome_per_call_and_one_completion(approvals):
    requests = await ask_batch(approvals)
    batch = requests[0].batch
    taps = []
    for n in range(20):
        if n % 4 == 0:
            taps.append(approvals.resolve_batch(batch, OWNER, ("approve", "deny")[n % 8 // 4]))
        else:
            taps.append(approvals.resolve(requests[n % 3].id, APPROVER, ("approve", "deny")[n % 2]))
    outcomes = await asyncio.gather(*taps)
    assert sum(o.batch_done for o in outcomes) == 1
    decided = [r.id for o in outcomes if o.ok for r in o.decided]
    assert sorted(decided) == sorted(r.id for r in requests)   # each call decided exactly once
    assert "pending" not in await statuses(approvals, batch)


async def test_only_the_requester_or_an_approver_may_answer_all_and_forged_ids_change_nothing(
        approvals):
    requests = await ask_batch(approvals)
    refused = await approvals.resolve_batch(requests[0].batch, STRANGER, "approve")
    assert not refused.ok and refused.reason.startswith(f"Only {OWNER}")
    for forged in ("AAAAAAAAAAAAAAAA", "'; DROP TABLE approvals; --", requests[0].batch + "x"):
        assert not (await approvals.resolve_batch(forged, OWNER, "approve")).ok
    assert not (await approvals.resolve_batch(requests[0].batch, OWNER, "always")).ok
    assert set(await statuses(approvals, requests[0].batch)) == {"pending"}


async def test_a_lapsed_batch_closes_whole_and_its_approved_calls_never_run(approvals, clock):
    first, second, _ = await ask_batch(approvals)
    await approvals.resolve(first.id, OWNER, "approve")
    await approvals.resolve(second.id, OWNER, "deny")
    clock.now += 301
    lapsed = await approvals.expire_lapsed()
    assert [r.position for r in lapsed] == [0, 2]
    assert await statuses(approvals, first.batch) == ["expired", "denied", "expired"]
    assert await approvals.expire_lapsed() == []


async def test_a_tap_on_a_lapsed_batch_closes_every_call_of_it_at_once(approvals, clock):
    first, second, third = await ask_batch(approvals)
    await approvals.resolve(first.id, OWNER, "approve")
    clock.now += 301
    late = await approvals.resolve(third.id, OWNER, "approve")
    assert not late.ok and late.lapsed_now and "expired" in late.reason
    assert {r.id for r in late.lapsed} == {first.id, second.id, third.id}
    assert set(await statuses(approvals, first.batch)) == {"expired"}


async def test_a_new_message_supersedes_a_waiting_batch_with_its_approved_calls(approvals, store):
    first, _, _ = await ask_batch(approvals)
    done = await ask_batch(approvals)          # a finished batch of the same session stays
    await approvals.resolve_batch(done[0].batch, OWNER, "approve")
    await approvals.resolve(first.id, OWNER, "approve")
    async with store.transaction() as tx:
        closed = await approvals.supersede_session(tx, "s1")
    assert {r.id for r in closed} == {r.id for r in await approvals.batch_members(first.batch)}
    assert set(await statuses(approvals, done[0].batch)) == {"approved"}
