"""Concurrent writers on both backends, and the SQLite store's own: migrations, WAL, no "database
is locked" (the contract both keep: test_store_conformance; PostgreSQL's own: test_store_pg)."""

from __future__ import annotations

import asyncio

from bot.conversation.journal import Journal
from bot.store.migrations import MIGRATIONS
from bot.store.sqlite import Store
from tests.support.pg_support import on_both_backends
from tests.support.store_support import append, execute

backend_name = on_both_backends()


async def test_migrations_are_numbered_applied_once_and_recorded(tmp_path):
    path = tmp_path / "db" / "myclaw.db"
    async with Store(path) as store:
        assert await store.schema_version() == MIGRATIONS[-1][0]
        rows = await store.fetchall("SELECT number FROM migrations ORDER BY number")
        assert [r["number"] for r in rows] == [m[0] for m in MIGRATIONS]
        (mode,) = await store.fetchone("PRAGMA journal_mode")
        assert mode == "wal"
    async with Store(path) as again:  # reopening applies nothing twice
        rows = await again.fetchall("SELECT number FROM migrations")
        assert len(rows) == len(MIGRATIONS)
    assert oct(path.stat().st_mode & 0o777) == "0o600"


async def test_many_sessions_and_two_processes_write_at_once_without_locking_errors(store_backend):
    async with store_backend.open() as first, store_backend.open() as second:
        journals = {first: Journal(first), second: Journal(second)}
        sessions = [await journals[first].new_session(f"telegram:{i}", str(i), "telegram")
                    for i in range(20)]

        async def chat(store: Store, session: str, n: int) -> None:
            for k in range(n):
                await append(store, session, [
                    {"role": "user", "content": [{"type": "text", "text": f"q{k}"}]},
                    {"role": "assistant", "content": [{"type": "text", "text": f"a{k}"}]}])

        await asyncio.gather(*(chat(first if i % 2 else second, s, 10)
                               for i, s in enumerate(sessions)))
        (count,) = await first.fetchone("SELECT count(*) FROM messages")
        assert count == 20 * 10 * 2
        history, _ = await journals[second].stored(sessions[3])
        assert [m["content"][0]["text"] for m in history[:4]] == ["q0", "a0", "q1", "a1"]


async def test_full_text_search_is_available(tmp_path):
    async with Store(tmp_path / "myclaw.db") as store:
        await execute(store, "INSERT INTO memories(sender, text, created_at) VALUES (?, ?, 0)",
                            ("cli:local", "the blue bicycle is in the garage"))
        rows = await store.fetchall(
            "SELECT m.text FROM memories_fts f JOIN memories m ON m.id = f.rowid"
            " WHERE memories_fts MATCH ?", ("bicycle",))
        assert [r["text"] for r in rows] == ["the blue bicycle is in the garage"]


async def test_a_step_write_waits_for_another_process_holding_the_lock_and_still_lands(tmp_path):
    import sqlite3

    path = tmp_path / "myclaw.db"
    async with Store(path) as store:
        journal = Journal(store)
        session = await journal.new_session("cli:local", "local", "cli")
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process is writing
        asyncio.get_running_loop().call_later(0.3, other.execute, "COMMIT")
        await append(store, session, [{"role": "user", "content": [{"type": "text", "text": "late"}]}])
        other.close()
        assert [m["content"][0]["text"] for m in (await journal.stored(session))[0]] == ["late"]


async def test_the_write_ahead_log_is_checkpointed_so_it_does_not_grow_without_bound(tmp_path,
                                                                                     monkeypatch):
    from bot.store import sqlite as store_mod

    monkeypatch.setattr(store_mod, "CHECKPOINT_EVERY", 20)
    path = tmp_path / "myclaw.db"
    async with Store(path) as store:
        session = await Journal(store).new_session("cli:local", "local", "cli")
        block = [{"role": "user", "content": [{"type": "text", "text": "x" * 8000}]}]
        for i in range(600):
            await append(store, session, block)
            if i % 20 == 19:  # a read between bursts, as turns have: queued after the checkpoint
                await store.fetchone("SELECT 1")
        wal = path.with_name(path.name + "-wal")
        # 600 writes of ~8 KB would leave a WAL of about 5 MB without checkpoints.
        assert wal.stat().st_size < 2_000_000
