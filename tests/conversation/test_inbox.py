"""The durable inbox (bot/conversation/inbox.py) on SQLite and PostgreSQL: stored once per update id, claimed
by compare-and-set in order per conversation (also by two Store objects on one database, as two
processes would), leases taken over after they lapse, rows of a killed run given back at
start-up, done rows pruned."""

from __future__ import annotations

import asyncio

import pytest

from bot.conversation.inbox import Claim, Entry, Inbox, InboxSettings, replica_name
from tests.support.pg_support import on_both_backends

backend_name = on_both_backends()

SETTINGS = InboxSettings(lease_seconds=30, keep_done_seconds=3600, retry_seconds=0.01)


class Clock:
    def __init__(self, now: float = 1_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def entry(update: int, chat: str = "7", text: str = "hi") -> Entry:
    return Entry(str(update), chat, f'{{"text": "{text}"}}')


async def state_of(store, row_id: int) -> str | None:
    row = await store.fetchone("SELECT state FROM inbox WHERE id = ?", (row_id,))
    return row["state"] if row else None


async def test_an_update_stored_twice_is_one_row(store, clock):
    inbox = Inbox(store, settings=SETTINGS, clock=clock)
    (first,) = await inbox.put("telegram", [entry(1)])
    assert await inbox.put("telegram", [entry(1), entry(2)]) != []
    again = await inbox.put("telegram", [entry(1)])
    assert again == []
    assert first.conversation == "telegram:7"
    other_channel = await inbox.put("discord", [entry(1)])
    assert len(other_channel) == 1   # the key is (channel, update id)
    assert (await store.fetchone("SELECT count(*) AS n FROM inbox"))["n"] == 3


async def test_rows_keep_arrival_order_within_a_batch_and_across_batches(store, clock):
    inbox = Inbox(store, settings=SETTINGS, clock=clock)
    rows = await inbox.put("telegram", [entry(5), entry(3)])
    rows += await inbox.put("telegram", [entry(9)])
    assert [r.update_key for r in sorted(rows, key=lambda r: r.id)] == ["5", "3", "9"]


async def test_a_newer_row_of_a_conversation_waits_for_the_older_one(store, clock):
    inbox = Inbox(store, settings=SETTINGS, clock=clock)
    older, newer = await inbox.put("telegram", [entry(1), entry(2)])
    (other_chat,) = await inbox.put("telegram", [entry(3, chat="8")])
    assert await inbox.claim(newer) is Claim.BUSY
    assert await inbox.claim(other_chat) is Claim.CLAIMED   # chats do not wait for each other
    assert await inbox.claim(older) is Claim.CLAIMED
    assert await inbox.claim(newer) is Claim.BUSY           # older is claimed, not done
    await inbox.finish(older)
    assert await inbox.claim(newer) is Claim.CLAIMED
    await inbox.finish(newer)
    assert await inbox.claim(newer) is Claim.DONE


async def test_a_row_stored_to_run_now_is_claimed_as_it_is_stored_unless_its_chat_is_busy(store, clock):
    inbox = Inbox(store, settings=SETTINGS, clock=clock)
    first, second = await inbox.put("telegram", [entry(1), entry(2)], claim=True)
    (other,) = await inbox.put("telegram", [entry(3, chat="8")], claim=True)
    assert (first.claimed, second.claimed, other.claimed) == (True, False, True)
    assert [await state_of(store, r.id) for r in (first, second, other)] == [
        "claimed", "pending", "claimed"]
    ran = []

    def work(row):
        async def run() -> None:
            ran.append(row.update_key)
        return run

    # The second waits for the first even when it asks first.
    await asyncio.wait_for(asyncio.gather(*(inbox.run(r, work(r)) for r in (second, first, other))),
                           10)
    assert ran.index("1") < ran.index("2") and sorted(ran) == ["1", "2", "3"]


async def test_rows_without_a_conversation_skip_the_order(store, clock):
    inbox = Inbox(store, settings=SETTINGS, clock=clock)
    (turn,) = await inbox.put("telegram", [entry(1)])
    (tap,) = await inbox.put("telegram", [Entry("2", "", "{}")])
    assert await inbox.claim(turn) is Claim.CLAIMED
    assert await inbox.claim(tap) is Claim.CLAIMED


async def test_two_stores_on_one_database_claim_a_row_once(store_backend, clock):
    """Two processes (two Store objects, two Inboxes) race for the same rows: each row is
    claimed by exactly one of them, and a conversation's second row by nobody meanwhile."""
    async with store_backend.open() as first_store, store_backend.open() as second_store:
        first = Inbox(first_store, "replica-a", SETTINGS, clock)
        second = Inbox(second_store, "replica-b", SETTINGS, clock)
        rows = await first.put("telegram", [entry(i, chat=str(i % 3)) for i in range(30)])
        heads = {}
        for row in rows:
            heads.setdefault(row.conversation, row)
        outcomes = await asyncio.gather(*(inbox.claim(row) for row in rows
                                          for inbox in (first, second)))
        claimed = [o for o in outcomes if o is Claim.CLAIMED]
        assert len(claimed) == 3   # the oldest row of each of the 3 conversations, once
        owners = await first_store.fetchall(
            "SELECT id, claimed_by FROM inbox WHERE state = 'claimed' ORDER BY id")
        assert [r["id"] for r in owners] == sorted(r.id for r in heads.values())
        assert {r["claimed_by"] for r in owners} <= {first.owner, second.owner}


async def test_a_lapsed_lease_is_taken_over_by_another_process(store_backend, clock):
    async with store_backend.open() as first_store, store_backend.open() as second_store:
        first = Inbox(first_store, "replica-a", SETTINGS, clock)
        second = Inbox(second_store, "replica-b", SETTINGS, clock)
        row, later = await first.put("telegram", [entry(1), entry(2)])
        assert await first.claim(row) is Claim.CLAIMED
        clock.now += 20
        assert await first.renew(row)
        clock.now += 20   # renewed: still held
        assert await second.claim(row) is Claim.BUSY
        clock.now += 11   # the first process went silent (killed): its lease lapsed
        assert await second.claim(row) is Claim.CLAIMED
        assert not await first.renew(row)
        await first.finish(row)   # too late: the row is not the first process's any more
        assert await state_of(first_store, row.id) == "claimed"
        await second.finish(row)
        assert await second.claim(later) is Claim.CLAIMED


async def test_a_restarted_replica_gets_its_earlier_claims_back_at_once_in_order(store_backend, clock):
    async with store_backend.open() as before:
        killed = Inbox(before, "local", SETTINGS, clock)
        rows = await killed.put("telegram", [entry(1), entry(2, chat="8"), entry(3)])
        assert await killed.claim(rows[0]) is Claim.CLAIMED   # running when SIGKILL came
        await killed.put("discord", [entry(1)])
    async with store_backend.open() as after:
        restarted = Inbox(after, "local", SETTINGS, clock)
        recovered = await restarted.recover("telegram")
        assert [r.update_key for r in recovered] == ["1", "2", "3"]
        assert recovered[0].attempts == 1   # it had been claimed once: an interrupted turn
        others = Inbox(after, "elsewhere", SETTINGS, clock)
        assert [r.update_key for r in await others.recover("telegram")] == ["1", "2", "3"]


async def test_another_replicas_live_claim_is_not_recovered(store_backend, clock):
    async with store_backend.open() as first_store, store_backend.open() as second_store:
        first = Inbox(first_store, "replica-a", SETTINGS, clock)
        rows = await first.put("telegram", [entry(1), entry(2, chat="8")])
        assert await first.claim(rows[0]) is Claim.CLAIMED
        second = Inbox(second_store, "replica-b", SETTINGS, clock)
        assert [r.update_key for r in await second.recover("telegram")] == ["2"]
        clock.now += 31
        assert [r.update_key for r in await second.recover("telegram")] == ["1", "2"]


async def test_run_finishes_the_row_and_drops_its_payload(store, clock):
    inbox = Inbox(store, settings=SETTINGS, clock=clock)
    (row,) = await inbox.put("telegram", [entry(1)])
    seen = []

    async def work() -> None:
        seen.append(await state_of(store, row.id))

    assert await inbox.run(row, work)
    assert seen == ["claimed"]
    done = await store.fetchone("SELECT state, payload FROM inbox WHERE id = ?", (row.id,))
    assert (done["state"], done["payload"]) == ("done", "")
    assert not await inbox.run(row, work)   # already done: not run again
    assert seen == ["claimed"]


async def test_a_failed_turn_finishes_its_row_and_a_cancelled_one_keeps_its_claim(store, clock):
    inbox = Inbox(store, settings=SETTINGS, clock=clock)
    failing, cancelled = await inbox.put("telegram", [entry(1), entry(2, chat="8")])

    async def boom() -> None:
        raise RuntimeError("handler failed")

    with pytest.raises(RuntimeError):
        await inbox.run(failing, boom)
    assert await state_of(store, failing.id) == "done"
    started = asyncio.Event()

    async def hang() -> None:
        started.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(inbox.run(cancelled, hang))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await state_of(store, cancelled.id) == "claimed"


async def test_runs_of_one_conversation_go_one_at_a_time_in_order(store, clock):
    inbox = Inbox(store, settings=SETTINGS, clock=clock)
    rows = await inbox.put("telegram", [entry(i, chat=str(i % 2)) for i in range(8)])
    order: list[str] = []
    running: dict[str, int] = {}

    def work(row):
        async def run() -> None:
            running[row.conversation] = running.get(row.conversation, 0) + 1
            assert running[row.conversation] == 1
            await asyncio.sleep(0)
            order.append(row.update_key)
            running[row.conversation] -= 1
        return run

    await asyncio.gather(*(inbox.run(row, work(row)) for row in reversed(rows)))
    evens = [k for k in order if int(k) % 2 == 0]
    odds = [k for k in order if int(k) % 2 == 1]
    assert evens == ["0", "2", "4", "6"] and odds == ["1", "3", "5", "7"]


async def test_done_rows_are_pruned_after_the_retention(store, clock):
    inbox = Inbox(store, settings=SETTINGS, clock=clock)
    old, recent = await inbox.put("telegram", [entry(1), entry(2, chat="8")])
    for row in (old, recent):
        assert await inbox.claim(row) is Claim.CLAIMED
    await inbox.finish(old)
    clock.now += 3000
    await inbox.finish(recent)
    await inbox.put("telegram", [entry(3)])   # pending: never pruned
    clock.now += 1000
    assert await inbox.prune() == 1
    left = await store.fetchall("SELECT update_key FROM inbox ORDER BY id")
    assert [r["update_key"] for r in left] == ["2", "3"]
    clock.now += 3000
    await inbox.recover("telegram")   # at start-up too
    left = await store.fetchall("SELECT update_key FROM inbox ORDER BY id")
    assert [r["update_key"] for r in left] == ["3"]


def test_the_replica_name_defaults_to_one_local_name_on_sqlite_and_this_process_on_postgresql():
    assert replica_name("", "sqlite", {}) == "local"
    assert replica_name("", "postgresql", {}).endswith(f":{__import__('os').getpid()}")
    assert replica_name("configured", "postgresql", {}) == "configured"
    assert replica_name("configured", "sqlite", {"MYCLAW_REPLICA": "from-env"}) == "from-env"
