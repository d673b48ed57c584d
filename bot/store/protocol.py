"""The `Store` every backend implements, as a `typing.Protocol`: what the owners of tables may
rely on and nothing more.

Both `bot.store.sqlite.Store` and `bot.store.postgres.PostgresStore` satisfy it (checked
statically by the owners' annotations and at run time by tests/store/test_store_conformance.py,
which runs the same behaviours on both). Code outside `bot/store/` names these types, never a
backend's class, so a third backend is one new module and one line in `bot/store/factory.py`.

`TxHooks` is the backend-neutral half of a transaction both backends build on: commit and
rollback callbacks (a cache that mirrors stored rows updates itself from `on_commit`, so it never
shows a write that rolled back) and `fetchone`; the backends only decide when a transaction has
ended and how it ended.

SQL written against it stays portable: qmark parameters, `ON CONFLICT ... DO NOTHING`, dates
computed in Python (see `bot/store/sqlite.py` for what each call promises).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, runtime_checkable

from bot.core.events import valid_text

log = logging.getLogger(__name__)

Params = Sequence[Any] | dict[str, Any]


def valid_params(params: Sequence[Any]) -> Sequence[Any]:
    """The parameters with every string made valid text (bot.core.events.valid_text): nothing
    written can fail to encode, and both backends store the same characters (PostgreSQL
    refuses NUL in text). Valid strings, the rule, cost one scan each."""
    if all(type(p) is not str or (p.isascii() and "\x00" not in p) for p in params):
        return params
    return [valid_text(p) if isinstance(p, str) else p for p in params]


@runtime_checkable
class Row(Protocol):
    """One result row: indexable by column name (and position); `keys()` names the columns."""

    def __getitem__(self, key: Any, /) -> Any: ...

    def keys(self) -> Any: ...


@runtime_checkable
class Transaction(Protocol):
    """One write transaction (`async with store.transaction() as tx:`), the only way to write."""

    async def execute(self, sql: str, params: Params = ()) -> int:
        """Run one statement; the number of rows it changed."""
        ...

    async def defer(self, sql: str, params: Params = ()) -> None:
        """Run one statement whose outcome nobody reads, in order with the others; it may go to
        the server with the next statement that is answered, or with the commit (where its
        failure is then raised, rolling the transaction back). For the hot path's inserts."""
        ...

    async def insert_announced(self, sql: str, params: Params, topic: str,
                               key_after_id: str) -> None:
        """Insert one row (an INSERT into a table with an `id`, no RETURNING) like `defer`, and
        once this commits tell other processes `topic` with the key `<its id><key_after_id>`."""
        ...

    async def executemany(self, sql: str, seq: Iterable[Params]) -> None: ...

    async def fetchall(self, sql: str, params: Params = ()) -> list[Any]:
        """Reads (and `... RETURNING`) inside the transaction, seeing its own writes."""
        ...

    async def fetchone(self, sql: str, params: Params = ()) -> Any | None: ...

    async def lock(self, *keys: str) -> None:
        """Order this transaction after others locking the same keys (until it ends)."""
        ...

    def invalidate(self, topic: str, key: str) -> None:
        """Tell other processes' caches of `topic` that `key` changed (on commit)."""
        ...

    def on_commit(self, callback: Callable[[], None]) -> None: ...

    def on_rollback(self, callback: Callable[[], None]) -> None: ...


@runtime_checkable
class Store(Protocol):
    """A database the bot keeps everything in; `dialect` is "sqlite" or "postgresql"."""

    dialect: str

    async def open(self) -> Any: ...

    async def close(self) -> None: ...

    async def __aenter__(self) -> Any: ...

    async def __aexit__(self, *exc: object) -> None: ...

    async def schema_version(self) -> int: ...

    async def fetchone(self, sql: str, params: Params = ()) -> Any | None: ...

    async def fetchall(self, sql: str, params: Params = ()) -> list[Any]: ...

    async def ping(self) -> bool:
        """True when the store answers; False (never an exception) when it does not."""
        ...

    def transaction(self, *, serial: bool = True,
                    lock: Iterable[str] = ()) -> AbstractAsyncContextManager[Transaction]: ...

    async def hold(self, name: str) -> bool:
        """A lock held by one process at a time for as long as the store is open."""
        ...

    def subscribe(self, topic: str, callback: Callable[[str | None], None]) -> None: ...

    async def catch_up(self) -> None: ...


class TxHooks:
    """The backend-neutral half of a transaction; subclasses provide `fetchall` and call
    `_finished(committed)` exactly once when the transaction ends."""

    def __init__(self) -> None:
        self._on_commit: list[Callable[[], None]] = []
        self._on_rollback: list[Callable[[], None]] = []

    async def fetchall(self, sql: str, params: Params = ()) -> list[Any]:
        raise NotImplementedError

    async def fetchone(self, sql: str, params: Params = ()) -> Any | None:
        # Read to the end (not a single-row fetch), so a `RETURNING` statement always completes.
        return next(iter(await self.fetchall(sql, params)), None)

    def on_commit(self, callback: Callable[[], None]) -> None:
        """Run `callback()` once the transaction has committed (never if it rolls back)."""
        self._on_commit.append(callback)

    def on_rollback(self, callback: Callable[[], None]) -> None:
        """Run `callback()` if the transaction rolls back (or its commit fails)."""
        self._on_rollback.append(callback)

    def _finished(self, committed: bool) -> None:
        callbacks = self._on_commit if committed else self._on_rollback
        self._on_commit, self._on_rollback = [], []
        for callback in callbacks:
            try:
                callback()
            except Exception:  # a cache hook must not turn a committed write into a failure
                log.exception("transaction %s callback failed", "commit" if committed else "rollback")
