"""What both store backends' transactions share: commit and rollback callbacks, and fetchone.

A cache that mirrors stored rows updates itself from `on_commit`, so it never shows a write
that rolled back; the backends only decide when a transaction has ended and how it ended.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

log = logging.getLogger(__name__)

Params = Sequence[Any] | dict[str, Any]


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
