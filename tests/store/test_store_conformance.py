"""Every store backend is the `Store` of bot/store/protocol.py: the same members with the same
parameters, and the same behaviour, checked by one suite run on SQLite and PostgreSQL."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from bot.conversation.journal import Journal
from bot.store import protocol
from bot.store.migrations import MIGRATIONS
from bot.store.postgres import PgTx, PostgresStore
from bot.store.sqlite import Store as SqliteStore
from bot.store.sqlite import Tx as SqliteTx
from tests.support.pg_support import on_both_backends
from tests.support.store_support import append

backend_name = on_both_backends()

IMPLEMENTATIONS = [(SqliteStore, protocol.Store), (PostgresStore, protocol.Store),
                   (SqliteTx, protocol.Transaction), (PgTx, protocol.Transaction)]


def protocol_members(proto: type) -> list[str]:
    return sorted(name for name in vars(proto)
                  if not name.startswith("_") or name in ("__aenter__", "__aexit__"))


def departures(implementation: type, proto: type) -> list[str]:
    """How `implementation` departs from `proto`: members missing, or taking other parameters."""
    found = []
    for name in protocol_members(proto):
        if name in getattr(proto, "__annotations__", {}):
            if name not in vars(implementation) and not hasattr(implementation, name):
                found.append(f"{name}: missing")
            continue
        wanted, actual = getattr(proto, name, None), getattr(implementation, name, None)
        if not callable(wanted):
            continue
        if actual is None:
            found.append(f"{name}: missing")
            continue
        if inspect.iscoroutinefunction(wanted) != inspect.iscoroutinefunction(actual):
            found.append(f"{name}: async differs")
        want = list(inspect.signature(wanted).parameters)
        have = list(inspect.signature(actual).parameters)
        if want != have:
            found.append(f"{name}: parameters {have} instead of {want}")
    return found


@pytest.mark.parametrize(("implementation", "proto"), IMPLEMENTATIONS,
                         ids=lambda value: value.__name__)
def test_each_backend_has_every_member_of_the_protocol_with_the_same_parameters(
        implementation, proto):
    assert departures(implementation, proto) == []


def test_the_check_finds_a_backend_missing_a_member_or_taking_other_parameters():
    class Partial:
        dialect = "partial"

        async def fetchall(self, query: str) -> list[Any]:
            return []

        def ping(self) -> bool:
            return True

    found = departures(Partial, protocol.Store)
    assert "close: missing" in found and "transaction: missing" in found
    assert "ping: async differs" in found
    assert any(line.startswith("fetchall: parameters ['self', 'query']") for line in found)


async def test_an_open_store_is_the_protocols_store_at_the_latest_schema(store, backend_name):
    assert isinstance(store, protocol.Store)
    assert store.dialect == backend_name
    assert await store.schema_version() == MIGRATIONS[-1][0]
    assert await store.ping() is True
    async with store.transaction() as tx:
        assert isinstance(tx, protocol.Transaction)


async def test_rows_are_read_by_column_name_and_counts_are_plain_integers(store):
    async with store.transaction() as tx:
        await tx.executemany("INSERT INTO memories(sender, text, created_at) VALUES (?, ?, 0)",
                             [("cli:local", "one"), ("cli:local", "two")])
    row = await store.fetchone("SELECT count(*) AS n, max(text) AS last FROM memories")
    assert isinstance(row, protocol.Row)
    assert (row["n"], row["last"], list(row.keys())) == (2, "two", ["n", "last"])
    assert type(row["n"]) is int
    assert await store.fetchone("SELECT id FROM memories WHERE text = ?", ("three",)) is None


async def test_a_failed_transaction_leaves_nothing_behind_and_runs_only_its_rollback_hooks(store):
    journal = Journal(store)
    session = await journal.new_session("cli:local", "local", "cli")
    seen: list[str] = []
    with pytest.raises(RuntimeError, match="crash in the middle"):
        async with store.transaction() as tx:
            tx.on_commit(lambda: seen.append("commit"))
            tx.on_rollback(lambda: seen.append("rollback"))
            await tx.execute("INSERT INTO messages(session_id, role, content, created_at)"
                             " VALUES (?, 'user', '[]', 0)", (session,))
            raise RuntimeError("crash in the middle")
    assert seen == ["rollback"]
    assert await journal.stored(session) == ([], 0)
    await append(store, session, [{"role": "user", "content": [{"type": "text", "text": "ok"}]}])
    assert len((await journal.stored(session))[0]) == 1


async def test_a_transaction_reads_its_own_writes_returns_row_counts_and_runs_commit_hooks(store):
    seen: list[str] = []
    async with store.transaction(serial=False, lock=["memories:cli:local"]) as tx:
        await tx.lock("memories:cli:local")
        tx.on_commit(lambda: seen.append("commit"))
        tx.on_rollback(lambda: seen.append("rollback"))
        tx.invalidate("memories", "cli:local")
        row = await tx.fetchone("INSERT INTO memories(sender, text, created_at)"
                                " VALUES (?, ?, 0) RETURNING id", ("cli:local", "one"))
        await tx.executemany("INSERT INTO memories(sender, text, created_at) VALUES (?, ?, 0)",
                             [("cli:local", "two"), ("cli:local", "three")])
        assert len(await tx.fetchall("SELECT id FROM memories")) == 3
        assert seen == []  # nothing runs before the commit
        changed = await tx.execute("UPDATE memories SET text = 'x' WHERE id > ?", (row["id"],))
    assert (row["id"], changed, seen) == (1, 2, ["commit"])


TRICKY_TEXTS = ("it's", "$n$", "$n$x$n", "a -- b /* c", "?", "é 😀", "\\ \\' $$", "")
TRICKY_FLOATS = (1796347505.5944664, -0.1, 1e-07, 0.1 + 0.2, 1e300, -2.5e-300, 0.0, -1.0)
# (text, ts, input_tokens, output_tokens, cost) per row
ROWS = [(text, ts, number, -(2 ** 40), None if number % 2 else ts)
        for number, (text, ts) in enumerate(zip(TRICKY_TEXTS, TRICKY_FLOATS, strict=True), 1)]


async def test_deferred_writes_run_in_order_and_store_exactly_what_was_given(store):
    async with store.transaction(serial=False) as tx:
        for text, ts, tokens, negative, cost in ROWS:
            await tx.defer("INSERT INTO usage(ts, session_id, sender, model, input_tokens,"
                           " output_tokens, cache_read_tokens, cache_write_tokens, cost)"
                           " VALUES (?, ?, 's', 'm', ?, ?, 0, 0, ?)",
                           (ts, text, tokens, negative, cost))
        await tx.defer("UPDATE usage SET model = ? WHERE input_tokens = ?", ("edited", 2))
        seen = await tx.fetchall("SELECT session_id FROM usage ORDER BY id")  # sees them
        assert [row["session_id"] for row in seen] == list(TRICKY_TEXTS)
        await tx.defer("UPDATE usage SET model = ? WHERE input_tokens = ?", ("later", 3))
    rows = await store.fetchall("SELECT * FROM usage ORDER BY id")
    assert [(r["session_id"], r["ts"], r["input_tokens"], r["output_tokens"], r["cost"])
            for r in rows] == ROWS
    assert [r["model"] for r in rows][:4] == ["m", "edited", "later", "m"]


async def test_a_deferred_write_that_fails_rolls_back_the_whole_transaction(store):
    journal = Journal(store)
    session = await journal.new_session("cli:local", "local", "cli")
    seen: list[str] = []
    with pytest.raises(Exception, match=r"(?i)foreign key|violates"):
        async with store.transaction() as tx:
            tx.on_commit(lambda: seen.append("commit"))
            tx.on_rollback(lambda: seen.append("rollback"))
            await tx.defer("INSERT INTO messages(session_id, role, content, created_at)"
                           " VALUES (?, 'user', '[]', 0)", (session,))
            await tx.defer("INSERT INTO messages(session_id, role, content, created_at)"
                           " VALUES (?, 'user', '[]', 0)", ("no such session",))
    assert seen == ["rollback"]
    assert await journal.stored(session) == ([], 0)


async def test_a_held_name_is_granted_to_its_holder_and_subscribers_can_catch_up(store):
    heard: list[str | None] = []
    assert await store.hold("conformance-poller") is True
    store.subscribe("conformance", heard.append)
    await store.catch_up()
    assert heard in ([], [None])  # SQLite has nothing to tell; PostgreSQL may say "reload all"


async def test_a_closed_store_answers_ping_with_false_not_an_exception(store_backend):
    opened = await store_backend.open().open()
    await opened.close()
    assert await opened.ping() is False
