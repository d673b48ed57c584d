"""The crash tests' view of the bot's store, from outside the bot: read a few rows, and hold the
store's write lock (SQLite's `BEGIN IMMEDIATE`, PostgreSQL's write advisory lock, the one every
write transaction of the bot takes) so that the bot can fetch but cannot store."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

DUMPS = ("SELECT chat, status, substr(args, 1, 60), message_ref FROM approvals ORDER BY created_at",
         "SELECT chat, state, inbox_id FROM turns ORDER BY created_at",
         "SELECT id, outcome, tool, call_id FROM audit WHERE outcome <> 'allow' ORDER BY id",
         "SELECT id, conversation, state, claimed_by FROM inbox WHERE state <> 'done' ORDER BY id",
         "SELECT name, chat, status, next_run, retry_at FROM jobs ORDER BY created_at",
         "SELECT job_id, status, attempts, claimed_by, detail FROM job_runs ORDER BY id")
STUCK_APPROVALS = "SELECT id, tool, status FROM approvals WHERE status = 'approved'"


class StoreProbe:
    def __init__(self, backend: Any, sqlite_path: Path):
        self._backend = backend
        self._path = sqlite_path

    async def rows(self, sql: str) -> list[tuple[Any, ...]]:
        if self._backend.name == "sqlite":
            return await asyncio.to_thread(self._sqlite_rows, sql)
        conn = await self._pg_connect()
        try:
            return [tuple(r) for r in await conn.fetch(sql)]
        finally:
            await conn.close()

    def _sqlite_rows(self, sql: str) -> list[tuple[Any, ...]]:
        with contextlib.closing(sqlite3.connect(f"file:{self._path}?mode=ro", uri=True,
                                                timeout=30)) as db:
            return db.execute(sql).fetchall()

    async def dump(self) -> str:
        """The rows a failure report needs to say where a conversation got stuck (tables that
        do not exist are left out)."""
        lines = []
        for sql in DUMPS:
            try:
                rows = await self.rows(sql)
            except Exception as exc:   # a table some version of the schema does not have
                lines.append(f"{sql}: {type(exc).__name__}")
                continue
            lines.append(sql)
            lines += [f"  {row}" for row in rows]
        return "\n".join(lines)

    async def stuck_approvals(self) -> list[tuple[Any, ...]]:
        return await self.rows(STUCK_APPROVALS)

    async def approval_status(self, tool_use_token: str) -> str | None:
        rows = await self.rows("SELECT status, args FROM approvals")
        return next((status for status, args in rows if f"echo {tool_use_token} " in args), None)

    @contextlib.asynccontextmanager
    async def write_lock(self) -> AsyncIterator[None]:
        """No write transaction of the bot can commit while this is held."""
        if self._backend.name == "sqlite":
            db = sqlite3.connect(self._path, isolation_level=None, timeout=30,
                                 check_same_thread=False)
            try:
                await asyncio.to_thread(db.execute, "BEGIN IMMEDIATE")
                yield
                db.execute("ROLLBACK")
            finally:
                db.close()
            return
        from bot.store.postgres import WRITE_LOCK
        conn = await self._pg_connect()
        try:
            await conn.execute(f"BEGIN; SELECT pg_advisory_xact_lock({WRITE_LOCK})")
            yield
            await conn.execute("ROLLBACK")
        finally:
            await conn.close()

    async def _pg_connect(self) -> Any:
        import asyncpg
        return await asyncpg.connect(self._backend.pg_url,
                                     server_settings={"search_path": self._backend.pg_schema})
