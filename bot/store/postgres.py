"""The PostgreSQL store (asyncpg): the same interface as the SQLite one, for several processes.

`PostgresStore` and its `PgTx` (bot/store/pg_tx.py) implement what bot/store/sqlite.py describes:
`open()`, `close()`, `dialect`, `fetchone`/`fetchall`, `transaction()` yielding a Tx with
`execute`, `defer`, `executemany`, `fetchone`/`fetchall`, `on_commit`/`on_rollback`, and
`schema_version()`.
The codebase's qmark SQL is translated to `$n` by bot/store/pg_dialect.py.

How it runs: a pool of connections (asyncpg, chosen by bench/pg_driver.py). Reads take a pooled
connection for one statement and run concurrently. Write transactions hold one connection and
a transaction-level advisory lock, so they run one at a time across all processes, the
guarantee SQLite gives and the domain code's check-then-write transactions rely on (see
`transaction`). Hot-path transactions that need no such guarantee opt out (`serial=False`):
they hold that lock shared, so they run together but never beside a serial one. Migrations
run under another advisory lock: replicas starting together apply each migration once. The
schema version is the highest number in the `migrations` table.

The connection URL may carry a password: it is never logged or put into an error message
(`redact_url`).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
import time
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

import asyncpg

from bot.core.errors import StoreError
from bot.store.migrations import refuse_newer
from bot.store.pg_dialect import numbered, pg_migrations, redact_url
from bot.store.pg_invalidation import Callback, PgInvalidations, Subscribers
from bot.store.pg_tx import Params, PgTx, _params

log = logging.getLogger(__name__)

Row = asyncpg.Record
POOL_MIN = 1
# Half of it may run concurrent writes (below); 20 per replica keeps four replicas within
# PostgreSQL's default 100 connections.
POOL_MAX = 20
CONNECT_TIMEOUT_S = 10.0
MIGRATION_LOCK = 0x6D79636C6177  # "myclaw": the advisory lock replicas take to migrate
WRITE_LOCK = MIGRATION_LOCK + 1  # held by every write transaction until it ends
# What fails when the server is unreachable or a connection breaks (as opposed to bad SQL).
CONNECTION_ERRORS = (OSError, asyncio.TimeoutError, asyncpg.PostgresConnectionError,
                     asyncpg.InterfaceError, asyncpg.CannotConnectNowError)


def _numeric(text: str) -> int | float:
    """NUMERIC (what SUM and AVG of integers return) as int or float, as SQLite gives them."""
    return int(text) if text.lstrip("-").isdigit() else float(text)


def _encode_bool(value: object) -> str:
    """A boolean parameter from True/False or, as SQLite code writes them, 1/0 (`CASE WHEN ?`);
    anything else is an error, never silently false."""
    if value is True or value is False or (type(value) is int and value in (0, 1)):
        return "t" if value else "f"
    raise ValueError(f"a boolean is required, got {value!r}")


async def _init_connection(conn: asyncpg.Connection) -> None:
    await conn.set_type_codec("numeric", encoder=str, decoder=_numeric, schema="pg_catalog",
                              format="text")
    await conn.set_type_codec("bool", encoder=_encode_bool, decoder=lambda text: text == "t",
                              schema="pg_catalog", format="text")


async def _reset_connection(conn: asyncpg.Connection) -> None:
    """The store leaves no session state on pooled connections, so asyncpg's default reset
    (a round trip on every release) is only needed for one given back inside a transaction."""
    if conn.is_in_transaction():
        await conn.reset()


class PostgresStore:
    dialect = "postgresql"

    def __init__(self, url: str, *, schema: str | None = None, pool_max: int = POOL_MAX,
                 migrate: bool = True):
        self.url = url
        self.schema = schema
        self._apply_migrations = migrate  # False: open as is (`myclaw doctor` only looks)
        self._pool_max = pool_max
        self._pool: asyncpg.Pool | None = None
        self._write_lock = asyncio.Lock()
        # Concurrent transactions hold at most half the pool: reads always find a connection.
        self._concurrent = asyncio.Semaphore(max(1, pool_max // 2))
        self._origin = secrets.token_hex(8)   # this process's notifications, to skip our own
        self._subscribers = Subscribers()
        self._invalidations: PgInvalidations | None = None
        self._held: list[asyncpg.Connection] = []   # connections holding `hold` locks

    def __repr__(self) -> str:
        return f"PostgresStore({redact_url(self.url)!r}, schema={self.schema!r})"

    @property
    def location(self) -> str:
        """Where the store is, safe to print."""
        return redact_url(self.url) + (f" (schema {self.schema})" if self.schema else "")

    # --- lifecycle -----------------------------------------------------------------------

    async def open(self) -> PostgresStore:
        settings = {"search_path": self.schema} if self.schema else {}
        try:
            self._pool = await asyncpg.create_pool(
                self.url, min_size=POOL_MIN, max_size=self._pool_max, timeout=CONNECT_TIMEOUT_S,
                init=_init_connection, reset=_reset_connection, server_settings=settings)
            if self._apply_migrations:
                await self._migrate()
            await self._listen()
        except (*CONNECTION_ERRORS, asyncpg.PostgresError, ValueError) as exc:
            await self.close()
            raise StoreError(f"cannot open the store at {self.location}: "
                             f"{type(exc).__name__}: {_scrub(str(exc), self.url)}") from exc
        except StoreError:
            await self.close()
            raise
        return self

    async def close(self) -> None:
        held, self._held = self._held, []
        for conn in held:
            await conn.close()      # ends the session: its advisory locks go with it
        if self._invalidations is not None:
            invalidations, self._invalidations = self._invalidations, None
            await invalidations.close()
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()

    async def __aenter__(self) -> PostgresStore:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise StoreError("the store is not open")
        return self._pool

    async def _migrate(self) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            # One replica migrates; the others wait here, then find nothing left to do.
            await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
            version = await _version(conn)
            refuse_newer(version, self.location)
            for number, description, statements in pg_migrations():
                if number <= version:
                    continue
                for statement in statements:
                    await conn.execute(statement)
                await conn.execute(
                    "INSERT INTO migrations(number, description, applied_at) VALUES ($1, $2, $3)",
                    number, description, time.time())

    async def _listen(self) -> None:
        schema = self.schema or await self.pool.fetchval("SELECT current_schema()")
        settings = {"search_path": self.schema} if self.schema else {}
        self._invalidations = PgInvalidations(
            lambda: asyncpg.connect(self.url, timeout=CONNECT_TIMEOUT_S, server_settings=settings),
            schema, self._subscribers, self._origin)
        await self._invalidations.start()

    # --- one process at a time --------------------------------------------------------------

    async def hold(self, name: str) -> bool:
        """Hold the lock `name` across every process on this database until the store closes
        (or this process dies: the server ends the session and its locks); False when another
        process holds it. The server sees a 64-bit hash of the name, never the name."""
        key = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)
        conn = await asyncpg.connect(self.url, timeout=CONNECT_TIMEOUT_S)
        try:
            taken = await conn.fetchval("SELECT pg_try_advisory_lock($1)", key)
        except BaseException:
            await conn.close()
            raise
        if not taken:
            await conn.close()
            return False
        self._held.append(conn)
        return True

    # --- caches of other processes' writes (bot.store.pg_invalidation) -------------------------

    def subscribe(self, topic: str, callback: Callback) -> None:
        """Call `callback(key)` when another process commits `tx.invalidate(topic, key)`
        (`key` None: anything under any topic may have changed)."""
        self._subscribers.add(topic, callback)

    async def catch_up(self) -> None:
        """Return once every other process's write committed before now has been applied to
        this process's caches."""
        if self._invalidations is None:
            raise StoreError("the store is not open")
        try:
            await self._invalidations.catch_up()
        except (*CONNECTION_ERRORS, asyncpg.PostgresError) as exc:
            raise StoreError(f"the store at {self.location} is unreachable: "
                             f"{type(exc).__name__}") from exc

    async def schema_version(self) -> int:
        async with self.pool.acquire() as conn:
            return await _version(conn)

    # --- reads -------------------------------------------------------------------------------

    async def fetchone(self, sql: str, params: Params = ()) -> Row | None:
        return next(iter(await self.fetchall(sql, params)), None)

    async def fetchall(self, sql: str, params: Params = ()) -> list[Row]:
        return await self.pool.fetch(numbered(sql), *_params(params))

    async def ping(self) -> bool:
        try:
            await self.pool.fetchval("SELECT 1")
        except (*CONNECTION_ERRORS, asyncpg.PostgresError, StoreError):
            return False
        return True

    async def server_time(self) -> float:
        """The server's clock (seconds since the epoch), for the doctor's clock-skew check."""
        return float(await self.pool.fetchval("SELECT extract(epoch FROM clock_timestamp())"))

    # --- the write path ----------------------------------------------------------------------

    @asynccontextmanager
    async def transaction(self, *, serial: bool = True,
                          lock: Iterable[str] = ()) -> AsyncIterator[PgTx]:
        """One write transaction; statements inside are committed together or not at all.

        Serial write transactions (the default) run one at a time across every process on the
        database, as SQLite's `BEGIN IMMEDIATE` runs them: the domain code checks, then writes,
        inside one transaction (one pairing code per stranger, one undo per change) and relies
        on nobody writing in between. In this process they queue on a lock before taking a
        pooled connection, so waiting writers never starve the reads of connections.

        `serial=False`: the caller's correctness rests only on single-statement compare-and-set,
        unique constraints, row locks or `tx.lock(key)`, not on nobody writing in between. Such
        transactions hold the same advisory lock shared: they run together, while a serial one
        still runs alone (it waits for them, and they wait for it). Each caller says why it is
        safe. `lock`: keys locked as by `tx.lock` before anything else, in the same round trip
        as the BEGIN."""
        gate = self._write_lock if serial else self._concurrent
        gate_lock = "pg_advisory_xact_lock" if serial else "pg_advisory_xact_lock_shared"
        async with gate, self.pool.acquire() as conn:
            channel = self._invalidations.channel if self._invalidations else ""
            tx = PgTx(conn, f"BEGIN; SELECT {gate_lock}({WRITE_LOCK})", channel, self._origin)
            await tx.lock(*lock)
            try:
                yield tx
                await conn.execute(tx._commit_sql())
            except BaseException:
                await _rollback(conn)
                tx._finished(committed=False)
                raise
            # Before anything else runs here: a serial transaction that starts next (say, one
            # loading totals that the callbacks then add to) sees the callbacks' effect.
            tx._finished(committed=True)


async def _rollback(conn: asyncpg.Connection) -> None:
    try:
        if conn.is_in_transaction():  # a failed COMMIT has already ended it
            await asyncio.shield(conn.execute("ROLLBACK"))
    except (*CONNECTION_ERRORS, asyncpg.PostgresError):
        log.warning("rollback failed; the connection is reset before reuse", exc_info=True)


async def _version(conn: asyncpg.Connection) -> int:
    if await conn.fetchval("SELECT to_regclass('migrations')") is None:
        return 0
    return int(await conn.fetchval("SELECT coalesce(max(number), 0) FROM migrations"))


def _scrub(text: str, url: str) -> str:
    """`text` with the URL's password removed, wherever a driver message might echo it."""
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    return text.replace(password, "***") if password else text
