"""One PostgreSQL write transaction (`PgTx`), as bot/store/postgres.py's `transaction()` yields it.

What needs no answer waits in the transaction (the BEGIN with its locks, `lock`, `defer`,
`insert_announced`) and goes with its next statement that is answered, or with the COMMIT: as
one text of several statements, one round trip. Nothing of the transaction reaches the server
before its BEGIN, so its locks are taken, in the same order, before any of its statements runs.
A waiting statement that fails raises where the text is sent and rolls the transaction back.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

import asyncpg

from bot.core.errors import StoreError
from bot.store.pg_dialect import dollar_quoted, inlined, numbered
from bot.store.pg_invalidation import MAX_PAYLOAD, payloads
from bot.store.protocol import TxHooks, valid_params

Params = Sequence[Any]
Row = asyncpg.Record
KEY_LOCKS = 0x6D79  # the first half of `PgTx.lock`'s two-part advisory keys


def _params(params: Params | dict[str, Any]) -> Sequence[Any]:
    if isinstance(params, dict):
        raise StoreError("named SQL parameters are not portable; use ? placeholders")
    return valid_params(params)


class PgTx(TxHooks):
    """One transaction on one pooled connection; the only way to write. `opening`: its BEGIN
    and write-gate lock; `channel`, `origin`: where its notifications go and whose they are
    ("" channel: nobody listens)."""

    def __init__(self, conn: asyncpg.Connection, opening: str, channel: str = "",
                 origin: str = ""):
        self._conn = conn
        super().__init__()
        self._changes: list[tuple[str, str]] = []
        self._unsent = [opening]
        self._channel, self._origin = channel, origin

    async def _send_unsent(self) -> None:
        if self._unsent:
            text, self._unsent = "; ".join(self._unsent), []
            await self._conn.execute(text)

    async def execute(self, sql: str, params: Params = ()) -> int:
        """Run one statement; the number of rows it changed."""
        await self._send_unsent()
        status = await self._conn.execute(numbered(sql), *_params(params))
        return _rowcount(status)

    async def defer(self, sql: str, params: Params = ()) -> None:
        """Run one statement whose outcome nobody reads, in its place among the transaction's
        statements but sent with the next one that is answered (see the module docstring)."""
        text = inlined(sql, _params(params))
        if text is None:   # a value with no literal form (bot.store.pg_dialect.literal)
            await self.execute(sql, params)
        else:
            self._unsent.append(text)

    async def insert_announced(self, sql: str, params: Params, topic: str,
                               key_after_id: str) -> None:
        """Insert one row (`sql` an INSERT into a table with an `id`, no RETURNING) and, once
        this commits, tell other processes `topic` with the key `<its id><key_after_id>`: the
        notification is built by the server from the row's id, so nothing waits for it here."""
        head = json.dumps([topic, ""])[:-2]   # '["topic", "': the key's text follows
        prefix = f"{self._origin}\n{head}"
        suffix = json.dumps([topic, key_after_id])[len(head):]
        text = inlined(sql + " RETURNING id", _params(params))
        if text is None or not self._channel or len(prefix) + len(suffix) + 20 > MAX_PAYLOAD:
            row = await self.fetchone(sql + " RETURNING id", params)
            self.invalidate(topic, f"{row['id']}{key_after_id}")
            return
        self._unsent.append(
            f"WITH inserted AS ({text}) SELECT pg_notify({dollar_quoted(self._channel)},"
            f" {dollar_quoted(prefix)} || inserted.id::text || {dollar_quoted(suffix)})"
            " FROM inserted")

    async def executemany(self, sql: str, seq: Iterable[Params]) -> None:
        rows = [tuple(_params(p)) for p in seq]
        if rows:
            await self._send_unsent()
            await self._conn.executemany(numbered(sql), rows)

    async def fetchall(self, sql: str, params: Params = ()) -> list[Row]:
        await self._send_unsent()
        return await self._conn.fetch(numbered(sql), *_params(params))

    async def lock(self, *keys: str) -> None:
        """Hold a lock on each of `keys` until this transaction ends: transactions locking a
        common key run one after the other, across processes. Taken in one order (deadlock-free
        among callers that lock before anything else); keys are hashed to 32 bits, so two keys
        may rarely share a lock, which only makes their transactions wait for each other.
        Taken before the transaction's next statement runs, in the same round trip."""
        if keys:
            self._unsent.append(_key_locks_sql(keys))

    def invalidate(self, topic: str, key: str) -> None:
        """Other processes drop their cached copy of `key` under `topic` once this commits."""
        self._changes.append((topic, key))

    def _commit_sql(self) -> str:
        """What is still unsent, this transaction's notifications and the COMMIT: one text."""
        notices = [f"SELECT pg_notify({dollar_quoted(self._channel)}, {dollar_quoted(p)})"
                   for p in payloads(self._origin, self._changes)] if self._channel else []
        return "; ".join([*self._unsent, *notices, "COMMIT"])


def _key_hash(key: str) -> int:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big", signed=True)


def _key_locks_sql(keys: Iterable[str]) -> str:
    """The statements taking each key's lock, in one order; one round trip for all of them
    (the keys are hashed to integers here, so nothing from outside reaches the SQL text)."""
    return "; ".join(f"SELECT pg_advisory_xact_lock({KEY_LOCKS}, {key})"
                     for key in sorted({_key_hash(k) for k in keys}))


def _rowcount(status: str) -> int:
    """The row count from a command tag ('UPDATE 3', 'INSERT 0 1', 'DELETE 0'); 0 for DDL."""
    last = status.rsplit(" ", 1)[-1]
    return int(last) if last.isdigit() else 0
