"""Two processes on one PostgreSQL store: what one writes, the other's caches never serve stale
(histories, active sessions, grants, spend totals), through LISTEN/NOTIFY and `catch_up`.

Each "process" is a whole App (or a store) of its own on the same schema, as two replicas are.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import pytest

from bot.approvals.grants import Grants, Scope
from bot.config.prices import Price, PriceTable
from bot.conversation.inbox import Claim, Entry, Inbox, InboxSettings
from bot.conversation.journal import Journal
from bot.money.spend import SpendLedger
from bot.store import postgres as store_pg
from bot.store.pg_invalidation import MAX_PAYLOAD, Subscribers, payloads
from bot.store.sqlite import Store
from tests.fakes.anthropic_server import reply, text
from tests.runtime.test_runtime import message, say
from tests.store.test_store_concurrency import BOUND_S, blocked_by

SONNET = Price(input=3.0, output=15.0, cache_write=3.75, cache_read=0.30)
USER = [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]
ANSWER = [{"role": "assistant", "content": [{"type": "text", "text": "hi"}]}]
AGAIN = [{"role": "user", "content": [{"type": "text", "text": "again"}]}]


@pytest.fixture
def backend_name() -> str:
    return "postgresql"


@pytest.fixture
async def two(store_backend):
    """Two open stores on one schema, as two replicas hold them."""
    async with store_backend.open() as a, store_backend.open() as b:
        yield a, b


async def append(journal: Journal, session_id: str, messages: list[dict[str, Any]]) -> None:
    async with journal.store.transaction() as tx:
        await journal.append(tx, session_id, messages)


async def test_a_history_another_process_appended_to_is_read_again_not_served_from_the_cache(two):
    a, b = two
    mine, theirs = Journal(a), Journal(b)
    s1 = await mine.new_session("telegram:1", "1", "telegram")
    await append(mine, s1, USER)
    await mine.history(s1)                                # now cached here
    await append(theirs, s1, ANSWER)
    await a.catch_up()
    messages, _, cached = await mine.history(s1)
    assert cached is False
    assert [m["role"] for m in messages] == ["user", "assistant"]


async def test_a_process_keeps_its_own_writes_cached(two):
    a, _ = two
    mine = Journal(a)
    s1 = await mine.new_session("telegram:1", "1", "telegram")
    await append(mine, s1, USER)
    await mine.history(s1)
    await append(mine, s1, ANSWER)
    await a.catch_up()
    messages, _, cached = await mine.history(s1)
    assert cached is True and len(messages) == 2


async def test_a_fill_that_raced_another_process_s_write_is_not_kept(two):
    a, b = two
    mine, theirs = Journal(a), Journal(b)
    s1 = await mine.new_session("telegram:1", "1", "telegram")
    await append(theirs, s1, USER)
    generation = mine.cache.generation
    stale, size = await mine.stored(s1)
    await append(theirs, s1, ANSWER)                     # lands while "we" were reading
    await a.catch_up()
    mine.cache.put(s1, stale, size, generation)
    assert mine.cache.get(s1) is None


async def test_grants_added_and_revoked_elsewhere_are_seen_after_catching_up(two):
    a, b = two
    here, there = Grants(a), Grants(b)
    assert await here.for_session("s1") == ()
    async with b.transaction() as tx:
        grant = await there.add(tx, session_id="s1", sender="telegram:1", tool="shell_run",
                                scope=Scope("git", "git"), risk="low", by="telegram:1")
    await a.catch_up()
    assert [g.id for g in await here.for_session("s1")] == [grant.id]
    await there.revoke(grant.id, "telegram:1")
    await a.catch_up()
    assert await here.for_session("s1") == ()


async def test_spend_elsewhere_adds_to_loaded_totals_exactly_once(two):
    a, b = two
    prices = PriceTable({"claude-sonnet-5-5": SONNET})
    here, there = SpendLedger(a, prices), SpendLedger(b, prices)

    async def spend(ledger: SpendLedger, sender: str) -> None:   # 100k output tokens: $1.50
        await ledger.record(session_id="s", sender=sender, model="claude-sonnet-5-5",
                            usage={"output_tokens": 100_000})

    await spend(there, "telegram:1")                      # before anything was loaded here
    assert (await here.totals("telegram:1")).day == pytest.approx(1.5)
    await a.catch_up()                                    # its notification: already counted
    await spend(there, "telegram:1")
    await spend(there, "telegram:2")
    await a.catch_up()
    totals = await here.totals("telegram:1")
    assert (totals.day, totals.month, totals.global_day) == pytest.approx((3.0, 3.0, 4.5))


async def test_an_announced_insert_reaches_the_other_process_with_the_rows_id(two):
    a, b = two
    heard: list[str | None] = []
    a.subscribe("announced", heard.append)
    key = "\x1f1.5\x1f'it''s' $n$ \" é\\"
    async with b.transaction(serial=False) as tx:
        await tx.insert_announced("INSERT INTO memories(sender, text, created_at)"
                                  " VALUES (?, ?, 0)", ("s", "t"), "announced", key)
    await a.catch_up()
    (row,) = await a.fetchall("SELECT id FROM memories")
    assert heard == [f"{row['id']}{key}"]


async def test_totals_read_while_another_process_writes_a_row_of_that_sender_count_it_once(
        two, monkeypatch):
    a, b = two
    monkeypatch.setattr(store_pg, "WRITE_LOCK", secrets.randbits(62))   # see test_store_concurrency
    prices = PriceTable({"claude-sonnet-5-5": SONNET})
    here, there = SpendLedger(a, prices), SpendLedger(b, prices)
    await here.totals("telegram:2")       # the global total is loaded: later loads run concurrently
    written, release = asyncio.Event(), asyncio.Event()
    writer_pid = 0

    async def write_and_hold() -> None:   # 100k output tokens: $1.50
        nonlocal writer_pid
        async with b.transaction(serial=False) as tx:
            await there.add(tx, session_id="s", sender="telegram:1", model="claude-sonnet-5-5",
                            usage={"output_tokens": 100_000})
            writer_pid = (await tx.fetchone("SELECT pg_backend_pid() AS pid"))["pid"]
            written.set()
            await release.wait()

    writer = asyncio.ensure_future(write_and_hold())
    await asyncio.wait_for(written.wait(), BOUND_S)
    loading = asyncio.ensure_future(here.totals("telegram:1"))
    await asyncio.wait_for(blocked_by(a, writer_pid), BOUND_S)   # the sender's lock holds it
    release.set()
    await asyncio.wait_for(writer, BOUND_S)
    assert (await asyncio.wait_for(loading, BOUND_S)).day == pytest.approx(1.5)
    await a.catch_up()                    # the row's notification: already counted
    totals = await here.totals("telegram:1")
    assert (totals.day, totals.global_day) == pytest.approx((1.5, 1.5))


async def test_a_chat_moved_to_a_new_session_on_another_replica_continues_there_on_this_one(
        app_factory, fake_anthropic):
    first, second = await app_factory(), await app_factory()
    fake_anthropic.script(reply(text("one")), reply(text("two")), reply(text("three")))
    await say(first, "hello")
    old = await first.agent.session_id(message("x"))
    await second.agent.new_session(message("/new"), "full")
    await say(first, "after new")
    assert await first.agent.session_id(message("x")) != old
    new_history = await first.agent.journal.stored(await second.agent.session_id(message("x")))
    assert [m["role"] for m in new_history[0]] == ["user", "assistant"]


async def test_turns_alternating_between_two_replicas_see_the_whole_history(
        app_factory, fake_anthropic):
    first, second = await app_factory(), await app_factory()
    fake_anthropic.script(*(reply(text(f"answer {i}")) for i in range(4)))
    for i, app in enumerate([first, second, first, second]):
        await say(app, f"message {i}")
    last = fake_anthropic.requests[-1].json["messages"]
    assert [m["role"] for m in last] == ["user", "assistant"] * 3 + ["user"]


async def test_a_lost_notification_connection_empties_the_caches_and_listens_again(two):
    a, b = two
    mine, theirs = Journal(a), Journal(b)
    s1 = await mine.new_session("telegram:1", "1", "telegram")
    await append(mine, s1, USER)
    await mine.history(s1)
    emptied = asyncio.Event()
    a.subscribe("history", lambda key: emptied.set() if key is None else None)
    pid = a._invalidations._conn.get_server_pid()
    async with b.transaction() as tx:
        await tx.fetchone("SELECT pg_terminate_backend(?)", (pid,))
    await asyncio.wait_for(emptied.wait(), 10)
    assert mine.cache.get(s1) is None
    await a.catch_up()                                    # listens again
    await mine.history(s1)
    await append(theirs, s1, ANSWER)
    await a.catch_up()
    assert (await mine.history(s1))[2] is False


def test_changes_too_many_for_one_notification_are_split_and_each_fits():
    changes = [("history", f"{i:040d}") for i in range(1000)]
    sent = payloads("origin", changes)
    assert len(sent) > 1 and all(len(p.encode()) <= MAX_PAYLOAD for p in sent)
    assert sum(len(p.splitlines()) - 1 for p in sent) == 1000


def test_a_subscriber_that_went_away_is_no_longer_called():
    calls: list[str | None] = []

    class Cache:
        def forget(self, key: str | None) -> None:
            calls.append(key)

    subscribers, cache = Subscribers(), Cache()
    subscribers.add("history", cache.forget)
    subscribers.call("history", "s1")
    del cache
    subscribers.call("history", "s2")
    assert calls == ["s1"]


async def test_on_sqlite_invalidation_is_free_and_catching_up_returns_at_once(tmp_path):
    async with Store(tmp_path / "db.sqlite") as store:
        store.subscribe("history", lambda key: pytest.fail("nothing is ever published"))
        async with store.transaction() as tx:
            tx.invalidate("history", "s1")
        await store.catch_up()


@pytest.mark.parametrize("payload", ["plain", "it's $n$ here", "ends with $n", "$", "\\' \" ;"])
async def test_a_notification_payload_reaches_the_server_unchanged(two, payload):
    from bot.store.pg_dialect import dollar_quoted

    a, _ = two
    assert await a.pool.fetchval(f"SELECT {dollar_quoted(payload)}") == payload


async def test_a_claim_waiting_for_another_process_goes_as_soon_as_that_row_is_finished(two):
    a, b = two
    slow = InboxSettings(lease_seconds=30, retry_seconds=3600)   # only a notification wakes it
    here, there = Inbox(a, "a", slow), Inbox(b, "b", slow)
    first, second = await here.put("telegram", [Entry("1", "7", "{}"), Entry("2", "7", "{}")])
    assert await here.claim(first) is Claim.CLAIMED
    ran = asyncio.Event()

    async def work() -> None:
        ran.set()

    waiting = asyncio.create_task(there.run(second, work))
    await a.catch_up()
    assert not ran.is_set()
    await here.finish(first)
    assert await asyncio.wait_for(waiting, 10) is True and ran.is_set()
