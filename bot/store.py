"""The SQLite store (aiosqlite): WAL, busy timeout, numbered migrations.

Reads and the domain modules' writes go through one aiosqlite connection; writes go through
`transaction()`, which serialises them on an asyncio lock and opens `BEGIN IMMEDIATE`, so many
sessions writing at once never see "database is locked" (other processes wait up to the busy
timeout). The per-step writes of a turn (`run`) use a second, synchronous connection on the
event loop itself: a WAL commit without fsync takes microseconds, less than the hand-off to
aiosqlite's thread it replaces; if another process holds the write lock for more than 50 ms
that write falls back to the aiosqlite thread. WAL checkpoints (the fsyncs) stay on that thread.

Domain modules (approvals, pairing, memory, ...) use `fetchone`/`fetchall`/`transaction`; the
history and session helpers live here because the runtime needs them on every turn.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from bot.errors import StoreError
from bot.migrations import MIGRATIONS

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 10_000
INLINE_BUSY_S = 0.05     # the inline writer waits this long for another process, then hops
CHECKPOINT_EVERY = 200   # inline commits between two WAL checkpoints on the aiosqlite thread
T = TypeVar("T")


class Store:
    def __init__(self, path: Path | str):
        self.path = Path(path)
        self._db: aiosqlite.Connection | None = None
        self._inline: sqlite3.Connection | None = None
        self._inline_commits = 0
        self._checkpoints: set[asyncio.Future] = set()
        self._write_lock = asyncio.Lock()

    # --- lifecycle -----------------------------------------------------------------------

    async def open(self) -> Store:
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._db = await aiosqlite.connect(self.path, isolation_level=None)
            self._db.row_factory = aiosqlite.Row
            await self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            await self._db.execute("PRAGMA journal_mode = WAL")
            await self._db.execute("PRAGMA synchronous = NORMAL")
            await self._db.execute("PRAGMA foreign_keys = ON")
            await self._migrate()
            # Used by one task at a time (under the write lock), on the loop or, for checkpoints,
            # on a worker thread: hence check_same_thread=False.
            self._inline = sqlite3.connect(self.path, isolation_level=None, timeout=INLINE_BUSY_S,
                                           check_same_thread=False)
            # Checkpoints (the only fsyncs in WAL mode) run on aiosqlite's thread, never here.
            # Each PRAGMA is read to the end: a statement left open would pin the log.
            for pragma in ("synchronous = NORMAL", "wal_autocheckpoint = 0", "foreign_keys = ON"):
                self._inline.execute(f"PRAGMA {pragma}").fetchall()
        except (sqlite3.Error, OSError) as exc:
            await self.close()
            raise StoreError(f"cannot open the store at {self.path}: {exc}") from exc
        try:
            os.chmod(self.path, 0o600)
        except OSError:
            pass
        return self

    async def _checkpoint(self) -> None:
        """Copy the log into the database (fsync) off the event loop, on the writer's own
        connection (then the next write starts the log over), while no write can interleave."""
        inline = self._inline
        if inline is None:
            return
        try:
            async with self._write_lock:
                await asyncio.to_thread(
                    lambda: inline.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall())
        except sqlite3.Error:
            log.warning("WAL checkpoint failed; SQLite retries at the next one", exc_info=True)

    async def close(self) -> None:
        if self._checkpoints:
            await asyncio.gather(*self._checkpoints, return_exceptions=True)
        if self._inline is not None:
            self._inline.close()
            self._inline = None
        if self._db is not None:
            db, self._db = self._db, None
            await db.close()

    async def __aenter__(self) -> Store:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def db(self) -> aiosqlite.Connection:
        if self._db is None:
            raise StoreError("the store is not open")
        return self._db

    async def _migrate(self) -> None:
        (version,) = await (await self.db.execute("PRAGMA user_version")).fetchone()
        for number, description, script in MIGRATIONS:
            if number <= version:
                continue
            await self.db.execute("BEGIN IMMEDIATE")
            try:
                # executescript would commit implicitly; run statement by statement instead.
                for statement in _split_sql(script):
                    await self.db.execute(statement)
                await self.db.execute(
                    "INSERT INTO migrations(number, description, applied_at) VALUES (?, ?, ?)",
                    (number, description, time.time()),
                )
                await self.db.execute(f"PRAGMA user_version = {number}")
                await self.db.execute("COMMIT")
            except BaseException:
                await self.db.execute("ROLLBACK")
                raise

    async def schema_version(self) -> int:
        (version,) = await (await self.db.execute("PRAGMA user_version")).fetchone()
        return int(version)

    # --- generic access --------------------------------------------------------------------

    # Each aiosqlite call is one hop to the connection's thread; execute_fetchall does the
    # statement and the fetch in a single hop, which matters on the per-turn path.
    async def fetchone(self, sql: str, params: tuple | dict = ()) -> aiosqlite.Row | None:
        rows = await self.db.execute_fetchall(sql, params)
        return next(iter(rows), None)

    async def fetchall(self, sql: str, params: tuple | dict = ()) -> list[aiosqlite.Row]:
        return list(await self.db.execute_fetchall(sql, params))

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """One write transaction; statements inside are committed together or not at all."""
        async with self._write_lock:
            await self.db.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
            except BaseException:
                await self.db.execute("ROLLBACK")
                raise
            await self.db.execute("COMMIT")

    async def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run `work(conn)` as one write transaction: the per-step writes of a turn (history,
        audit, receipts, usage), inline on the event loop (see the module docstring), else in
        one hop to aiosqlite's thread. `work` must be quick, synchronous, and touch only `conn`.
        """
        def in_transaction(conn: sqlite3.Connection) -> T:
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = work(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return result

        async with self._write_lock:
            if self._inline is not None:
                try:
                    result = in_transaction(self._inline)
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) and "busy" not in str(exc):
                        raise
                else:
                    self._inline_commits += 1
                    if self._inline_commits % CHECKPOINT_EVERY == 0:
                        self._checkpoints.add(task := asyncio.ensure_future(self._checkpoint()))
                        task.add_done_callback(self._checkpoints.discard)
                    return result
            # aiosqlite's documented methods are thin wrappers over _execute(fn); calling it
            # directly is the one way to batch several statements into one thread hop.
            return await self.db._execute(in_transaction, self.db._conn)

    async def execute(self, sql: str, params: tuple | dict = ()) -> int:
        """A single write; returns the number of rows changed."""
        async with self.transaction() as db:
            cursor = await db.execute(sql, params)
            return cursor.rowcount

    async def ping(self) -> bool:
        try:
            await self.fetchone("SELECT 1")
        except (sqlite3.Error, StoreError):
            return False
        return True

    # --- sessions and history ------------------------------------------------------------

    async def active_session(self, sender: str, chat: str, channel: str) -> str:
        row = await self.fetchone(
            "SELECT id FROM sessions WHERE sender = ? AND chat = ? AND active = 1",
            (sender, chat),
        )
        if row is not None:
            return row["id"]
        return await self.new_session(sender, chat, channel)

    async def new_session(self, sender: str, chat: str, channel: str) -> str:
        session_id = secrets.token_hex(8)
        now = time.time()
        async with self.transaction() as db:
            await db.execute("UPDATE sessions SET active = 0 WHERE sender = ? AND chat = ?",
                             (sender, chat))
            await db.execute(
                "INSERT INTO sessions(id, sender, chat, channel, active, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, 1, ?, ?)",
                (session_id, sender, chat, channel, now, now),
            )
        return session_id

    async def session_info(self, session_id: str) -> dict[str, Any] | None:
        row = await self.fetchone("SELECT * FROM sessions WHERE id = ?", (session_id,))
        return dict(row) if row else None

    async def load_history(self, session_id: str) -> list[dict[str, Any]]:
        return (await self.load_history_sized(session_id))[0]

    async def load_history_sized(self, session_id: str) -> tuple[list[dict[str, Any]], int]:
        """The history and the length of its stored JSON (a cheap size for the token budget)."""
        rows = await self.fetchall(
            "SELECT role, content FROM messages WHERE session_id = ? ORDER BY id", (session_id,)
        )
        size = sum(len(r["content"]) for r in rows)
        return [{"role": r["role"], "content": json.loads(r["content"])} for r in rows], size

    async def append_messages(self, session_id: str, messages: list[dict[str, Any]],
                              db: aiosqlite.Connection | None = None) -> None:
        """Append messages in one transaction (or inside the caller's transaction `db`)."""
        if not messages:
            return
        if db is not None:
            await db.executemany(APPEND_SQL, _message_rows(session_id, messages))
            return
        await self.run(lambda conn: append_rows(conn, session_id, messages))

    async def replace_history(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        """Rewrite a session's history (after repair or compaction) atomically."""
        async with self.transaction() as db:
            await db.execute("DELETE FROM messages WHERE session_id = ?", (session_id,))
            await self.append_messages(session_id, messages, db=db)

    async def record_audit(self, *, sender: str, decision: str, outcome: str,
                           session_id: str | None = None, tool: str | None = None,
                           args_hash: str | None = None, detail: str = "",
                           db: aiosqlite.Connection | None = None) -> None:
        params = (time.time(), session_id, sender, tool, args_hash, decision, outcome, detail)
        if db is not None:
            await db.execute(AUDIT_SQL, params)
        else:
            await self.execute(AUDIT_SQL, params)


APPEND_SQL = "INSERT INTO messages(session_id, role, content, created_at) VALUES (?, ?, ?, ?)"


def encode_contents(messages: list[dict[str, Any]]) -> list[str]:
    """Each message's content as stored (JSON text); its length is the cache's size unit."""
    return [json.dumps(m["content"], ensure_ascii=False) for m in messages]


def _message_rows(session_id: str, messages: list[dict[str, Any]],
                  encoded: list[str] | None = None) -> list[tuple]:
    now = time.time()
    texts = encoded if encoded is not None else encode_contents(messages)
    return [(session_id, m["role"], text, now) for m, text in zip(messages, texts, strict=True)]


def append_rows(conn: sqlite3.Connection, session_id: str, messages: list[dict[str, Any]],
                encoded: list[str] | None = None) -> None:
    """Synchronous append, for use inside `Store.run` (`encoded`: contents already encoded)."""
    if messages:
        conn.executemany(APPEND_SQL, _message_rows(session_id, messages, encoded))


AUDIT_SQL = ("INSERT INTO audit(ts, session_id, sender, tool, args_hash, decision, outcome, detail)"
             " VALUES (?, ?, ?, ?, ?, ?, ?, ?)")


def audit_row(conn: sqlite3.Connection, *, sender: str, decision: str, outcome: str,
              session_id: str | None = None, tool: str | None = None,
              args_hash: str | None = None, detail: str = "") -> None:
    """Synchronous audit insert, for use inside `Store.run`."""
    conn.execute(AUDIT_SQL, (time.time(), session_id, sender, tool, args_hash, decision, outcome,
                             detail))


def _split_sql(script: str) -> list[str]:
    """Split a migration script into statements, keeping trigger bodies whole."""
    statements, buffer = [], []
    for line in script.splitlines():
        buffer.append(line)
        joined = "\n".join(buffer).strip()
        if joined and sqlite3.complete_statement(joined):
            statements.append(joined)
            buffer = []
    rest = "\n".join(buffer).strip()
    if rest:
        statements.append(rest)
    return statements
