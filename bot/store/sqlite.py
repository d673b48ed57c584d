"""The SQLite store: WAL, busy timeout, numbered migrations, and the one write path.

The interface every backend implements (a PostgreSQL one translates the `?` placeholders):

- `Store`: `open()`, `close()`, `dialect`, `fetchone(sql, params)` / `fetchall(sql, params)`
  (rows indexable by column name), `transaction()`, `schema_version()`.
- `Tx`, yielded by `async with store.transaction() as tx:` — the only way to write:
  `execute(sql, params) -> rowcount`, `defer(sql, params)` (a write whose outcome nobody reads:
  it may be sent later, with the transaction's next statement), `executemany(sql, seq)`,
  `fetchone`/`fetchall` (reads and `... RETURNING` inside the transaction), `on_commit(callback)`
  and `on_rollback(callback)` (caches keep themselves in step with what was written), and
  `invalidate(topic, key)`.
- `await store.hold(name) -> bool`: a lock held by one process at a time (one Telegram poller).
- Caches of other processes' writes: `store.subscribe(topic, callback)`, `tx.invalidate(topic,
  key)` and `await store.catch_up()` (bot/store/pg_invalidation.py). An SQLite store belongs to one
  `myclaw run` process, so here they cost nothing and do nothing.

SQL stays portable: qmark parameters, `ON CONFLICT ... DO NOTHING`, dates computed in Python.

How SQLite runs it: reads go through one aiosqlite connection (its own thread). Transactions are
serialised on an asyncio lock and open `BEGIN IMMEDIATE`, so sessions writing at once never see
"database is locked" (other processes wait up to the busy timeout). They run on a second,
synchronous connection on the event loop itself: a WAL commit without fsync takes microseconds,
less than the hand-off to aiosqlite's thread. When another process holds the write lock for more
than 50 ms, that transaction runs on aiosqlite's thread instead (the lock is taken at `BEGIN
IMMEDIATE`, so the choice is made before any statement). WAL checkpoints (the fsyncs) stay on
that thread.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import operator
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from bot.core.errors import StoreError
from bot.store.migrations import MIGRATIONS, refuse_newer
from bot.store.protocol import TxHooks, valid_params

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 10_000
OPEN_FIX = ("set [store] path to a file in a directory this user can create and write, or use "
            "PostgreSQL (MYCLAW_DATABASE_URL)")
INLINE_BUSY_S = 0.05     # the inline writer waits this long for another process, then hops
CHECKPOINT_EVERY = 200   # inline commits between two WAL checkpoints on the aiosqlite thread
Params = Sequence[Any] | dict[str, Any]
Row = sqlite3.Row
T = TypeVar("T")


class Tx(TxHooks):
    """One write transaction: its statements are committed together or not at all.

    Statements run on the inline connection directly, or (`thread` given) in one hop each to
    aiosqlite's thread, on that connection's underlying sqlite3 connection. Deferred writes wait
    for the transaction's next statement or its COMMIT and run just before it, in order, in the
    same hop (repeats of one statement as one `executemany`)."""

    def __init__(self, conn: sqlite3.Connection, thread: aiosqlite.Connection | None = None):
        self._conn = conn
        self._thread = thread
        self._deferred: list[tuple[str, Params]] = []
        super().__init__()

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        deferred, self._deferred = self._deferred, []

        def after_the_deferred(conn: sqlite3.Connection) -> T:
            _run_in_order(conn, deferred)
            return work(conn)
        if self._thread is None:
            return after_the_deferred(self._conn)
        # aiosqlite's documented methods are thin wrappers over _execute(fn); calling it
        # directly runs a statement and its fetch in one thread hop.
        return await self._thread._execute(after_the_deferred, self._conn)

    async def execute(self, sql: str, params: Params = ()) -> int:
        """Run one statement; the number of rows it changed."""
        params = valid_params(params)
        return await self._run(lambda conn: conn.execute(sql, params).rowcount)

    async def defer(self, sql: str, params: Params = ()) -> None:
        """A statement whose outcome nobody reads: it runs with the transaction's next
        statement or its COMMIT (where a failure rolls the whole transaction back)."""
        self._deferred.append((sql, valid_params(params)))

    async def insert_announced(self, sql: str, params: Params, topic: str,
                               key_after_id: str) -> None:
        """An insert like `defer`; no other process serves from this store to tell."""
        await self.defer(sql, params)

    async def executemany(self, sql: str, seq: Iterable[Params]) -> None:
        rows = [valid_params(params) for params in seq]
        await self._run(lambda conn: conn.executemany(sql, rows))

    async def fetchall(self, sql: str, params: Params = ()) -> list[Row]:
        params = valid_params(params)
        return await self._run(lambda conn: conn.execute(sql, params).fetchall())

    async def commit(self) -> None:
        await self._run(lambda conn: conn.execute("COMMIT"))

    async def rollback(self) -> None:
        """Roll back, the deferred writes not run (a failed COMMIT may already have ended it)."""
        self._deferred.clear()
        if self._conn.in_transaction:
            await self._run(lambda conn: conn.execute("ROLLBACK"))

    async def lock(self, *keys: str) -> None:
        """Nothing to take: a transaction here already runs alone (`BEGIN IMMEDIATE`)."""

    def invalidate(self, topic: str, key: str) -> None:
        """Nothing to tell: no other process serves from this store."""


def _run_in_order(conn: sqlite3.Connection, statements: list[tuple[str, Params]]) -> None:
    for sql, group in itertools.groupby(statements, key=operator.itemgetter(0)):
        rows = [params for _, params in group]
        if len(rows) == 1:
            conn.execute(sql, rows[0])
        else:
            conn.executemany(sql, rows)


def _busy(exc: sqlite3.OperationalError) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


class Store:
    dialect = "sqlite"

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
            self._inline.row_factory = sqlite3.Row
            # Checkpoints (the only fsyncs in WAL mode) run on aiosqlite's thread, never here.
            # Each PRAGMA is read to the end: a statement left open would pin the log.
            for pragma in ("synchronous = NORMAL", "wal_autocheckpoint = 0", "foreign_keys = ON"):
                self._inline.execute(f"PRAGMA {pragma}").fetchall()
        except (sqlite3.Error, OSError) as exc:
            await self.close()
            raise StoreError(f"cannot open the store at {self.path}: {exc}; {OPEN_FIX}") from exc
        except StoreError:
            await self.close()
            raise
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
        refuse_newer(int(version), str(self.path))
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

    # --- one process at a time --------------------------------------------------------------

    async def hold(self, name: str) -> bool:
        """Always granted: an SQLite store serves one `myclaw run` process (a second one polling
        the same bot is caught by Telegram's own conflict answer)."""
        return True

    # --- caches of other processes' writes: none on SQLite -------------------------------

    def subscribe(self, topic: str, callback: Callable[[str | None], None]) -> None:
        """Nothing to subscribe to: this process is the store's only writer that serves turns."""

    async def catch_up(self) -> None:
        """Nothing to catch up with (see `subscribe`)."""

    # --- reads -------------------------------------------------------------------------------

    # Each aiosqlite call is one hop to the connection's thread; execute_fetchall does the
    # statement and the fetch in a single hop, which matters on the per-turn path.
    async def fetchone(self, sql: str, params: Params = ()) -> Row | None:
        rows = await self.db.execute_fetchall(sql, valid_params(params))
        return next(iter(rows), None)

    async def fetchall(self, sql: str, params: Params = ()) -> list[Row]:
        return list(await self.db.execute_fetchall(sql, valid_params(params)))

    async def ping(self) -> bool:
        try:
            await self.fetchone("SELECT 1")
        except (sqlite3.Error, StoreError):
            return False
        return True

    # --- the write path ----------------------------------------------------------------------

    @asynccontextmanager
    async def transaction(self, *, serial: bool = True,
                          lock: Iterable[str] = ()) -> AsyncIterator[Tx]:
        """One write transaction; statements inside are committed together or not at all.
        Every one runs alone here, whatever `serial` and `lock` say (on PostgreSQL, `serial=False`
        lets transactions that need no more than row-level guarantees run together, and `lock`
        orders those sharing a key)."""
        async with self._write_lock:
            tx = await self._begin()
            try:
                yield tx
                await tx.commit()
            except BaseException:
                await self._rollback(tx)
                tx._finished(committed=False)
                raise
            if tx._thread is None:
                self._inline_committed()
        tx._finished(committed=True)

    async def _begin(self) -> Tx:
        if self._inline is not None:
            try:
                self._inline.execute("BEGIN IMMEDIATE")
                return Tx(self._inline)
            except sqlite3.OperationalError as exc:
                if not _busy(exc):
                    raise
        db = self.db
        await db.execute("BEGIN IMMEDIATE")  # waits up to the busy timeout, off the loop
        return Tx(db._conn, db)

    async def _rollback(self, tx: Tx) -> None:
        try:
            await asyncio.shield(tx.rollback())
        except sqlite3.Error:
            log.warning("rollback failed", exc_info=True)

    def _inline_committed(self) -> None:
        self._inline_commits += 1
        if self._inline_commits % CHECKPOINT_EVERY == 0:
            self._checkpoints.add(task := asyncio.ensure_future(self._checkpoint()))
            task.add_done_callback(self._checkpoints.discard)


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
