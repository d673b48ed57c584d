"""The store tests on both backends: SQLite (a file per test) and PostgreSQL (a real server).

PostgreSQL runs at 127.0.0.1:5432 (trust auth, database `test`) on the machines this project is
built and tested on; `MYCLAW_TEST_DATABASE_URL` points the tests elsewhere. Each test run creates
its own uniquely named schema, migrates it once, empties it before every test, and drops it at
the end (schemas left behind by a killed run are dropped by a later run once they are old).

No server reachable: the PostgreSQL tests skip with a reason saying how to run them, except
under `CI=true`, where they fail: CI must never pass on SQLite alone.

A test module runs its store tests on both backends with `backend_name = on_both_backends()`;
elsewhere the `store` fixture is SQLite.
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

BACKENDS = ("sqlite", "postgresql")
DEFAULT_TEST_URL = "postgresql://postgres@127.0.0.1:5432/test"
TEST_URL_ENV = "MYCLAW_TEST_DATABASE_URL"
HOW_TO_RUN = (f"start PostgreSQL on 127.0.0.1:5432 with trust authentication and a database "
              f"'test' (or point {TEST_URL_ENV} at a server where the tests may create schemas), "
              f"and install the driver: pip install -e '.[dev]'")
SCHEMA_PREFIX = "myclaw_test_"
STALE_AFTER_S = 6 * 3600
_STALE = re.compile(rf"^{SCHEMA_PREFIX}(\d+)_[0-9a-f]+$")


def database_url_for_tests(env: Mapping[str, str] | None = None) -> str:
    return (os.environ if env is None else env).get(TEST_URL_ENV) or DEFAULT_TEST_URL


def on_both_backends() -> Any:
    """A `backend_name` fixture for a module: `backend_name = on_both_backends()`."""
    @pytest.fixture(params=BACKENDS)
    def backend_name(request: pytest.FixtureRequest) -> str:
        return request.param
    return backend_name


# --- is there a server? ----------------------------------------------------------------------

def unreachable_reason(url: str, timeout: float = 3.0) -> str | None:
    """None when a PostgreSQL server answers at `url`, else why not (one line, no password)."""
    from bot.store.pg_dialect import redact_url
    try:
        import asyncpg
    except ImportError:
        return "the PostgreSQL driver asyncpg is not installed"

    async def probe() -> None:
        conn = await asyncpg.connect(url, timeout=timeout)
        await conn.close()

    try:
        asyncio.run(probe())
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        return f"no PostgreSQL server reachable at {redact_url(url)} ({type(exc).__name__}: {exc})"
    return None


def require_postgres(reason: str | None, env: Mapping[str, str]) -> None:
    """Nothing when the server is there; else skip, or fail under CI=true."""
    if reason is None:
        return
    if env.get("CI", "").strip().lower() == "true":
        pytest.fail(f"{reason}; under CI=true the PostgreSQL store tests must run, not skip. "
                    f"To run them: {HOW_TO_RUN}", pytrace=False)
    pytest.skip(f"{reason}. To run the PostgreSQL store tests: {HOW_TO_RUN}")


# --- one schema per test run -----------------------------------------------------------------

@dataclass
class PgTestSchema:
    url: str
    name: str = field(default_factory=lambda: f"{SCHEMA_PREFIX}{int(time.time())}_{secrets.token_hex(4)}")

    @property
    def store_url(self) -> str:
        """A URL that selects this schema (for configs and child processes)."""
        separator = "&" if "?" in self.url else "?"
        return f"{self.url}{separator}search_path={self.name}"

    def store(self) -> Any:
        from bot.store.postgres import PostgresStore
        return PostgresStore(self.url, schema=self.name)

    async def create(self, *, migrate: bool = True) -> None:
        import asyncpg
        conn = await asyncpg.connect(self.url)
        try:
            await _drop_stale(conn)
            await conn.execute(f'CREATE SCHEMA "{self.name}"')
        finally:
            await conn.close()
        if migrate:
            async with self.store():  # opening migrates
                pass

    async def drop(self) -> None:
        import asyncpg
        conn = await asyncpg.connect(self.url)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{self.name}" CASCADE')
        finally:
            await conn.close()

    async def empty(self) -> None:
        """Every table emptied (but `migrations`, of which only rows this myclaw does not know are
        removed) and ids restarted, as in a new database. DELETE,
        not TRUNCATE: on tables this small it takes a millisecond, TRUNCATE half a second."""
        import asyncpg

        from bot.store.migrations import latest
        conn = await asyncpg.connect(self.url)
        try:
            tables = await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = $1"
                                      " AND tablename <> 'migrations'", self.name)
            sequences = await conn.fetch("SELECT sequencename FROM pg_sequences"
                                         " WHERE schemaname = $1", self.name)
            references = await conn.fetch(
                "SELECT c.conrelid::regclass::text AS child, c.confrelid::regclass::text AS parent"
                " FROM pg_constraint AS c JOIN pg_namespace AS n ON n.oid = c.connamespace"
                " WHERE c.contype = 'f' AND n.nspname = $1", self.name)
            statements = [f'DELETE FROM "{self.name}"."{t}"'
                          for t in _children_first([t["tablename"] for t in tables], references)]
            statements += [f"SELECT setval('\"{self.name}\".\"{s['sequencename']}\"', 1, false)"
                           for s in sequences]
            # A migration from the future (a test of refusing newer stores) is not left behind.
            statements.append(f'DELETE FROM "{self.name}".migrations WHERE number > {latest()}')
            if statements:
                await conn.execute("; ".join(statements))
        finally:
            await conn.close()


def _children_first(tables: list[str], references: list[Any]) -> list[str]:
    """Tables ordered so that one referencing another (a foreign key) is emptied before it."""
    parents = {t: {r["parent"].split(".")[-1].strip('"') for r in references
                   if r["child"].split(".")[-1].strip('"') == t} for t in tables}
    ordered: list[str] = []
    while len(ordered) < len(tables):
        ready = [t for t in tables if t not in ordered and not any(
            t in parents[other] for other in tables if other not in ordered and other != t)]
        if not ready:  # a cycle: DELETE will name it
            return ordered + [t for t in tables if t not in ordered]
        ordered += ready
    return ordered


async def _drop_stale(conn: Any) -> None:
    """Schemas of earlier runs that were killed before their teardown."""
    for row in await conn.fetch("SELECT nspname FROM pg_namespace WHERE nspname LIKE $1",
                                SCHEMA_PREFIX + "%"):
        match = _STALE.match(row["nspname"])
        if match and int(match.group(1)) < time.time() - STALE_AFTER_S:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{row["nspname"]}" CASCADE')


@dataclass(frozen=True)
class Backend:
    """The store a test runs on: `open()` gives a new, unopened store on the same database (as a
    second connection or a restarted process would see it); `location` names it for
    `myclaw store copy` and child processes (bot.ops.cli.store_admin.open_location); `env` selects it
    for an App."""

    name: str
    open: Callable[[], Any]
    location: str
    env: Mapping[str, str]
