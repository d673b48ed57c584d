"""Notices said once: each is claimed by a key in the store before it is said, so a restart or
another process sharing the store does not say it again (a budget's 80% warning, the audit row
of the first refusal of a day). Keys name their period ("…\x1f2026-12-01"); claims older than
`KEEP_S` are deleted as new ones are made.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

KEEP_S = 62 * 86_400      # longer than the longest period a key names (a month)
MAX_KNOWN = 100_000       # keys remembered as claimed in memory; a full set is simply cleared
_CLAIM_SQL = "INSERT INTO notices_sent(key, sent_at) VALUES (?, ?) ON CONFLICT(key) DO NOTHING"
_PRUNE_SQL = "DELETE FROM notices_sent WHERE sent_at < ?"


class OnceNotices:
    def __init__(self, store: Any, clock: Callable[[], float] = time.time):
        self.store = store
        self.clock = clock
        self._known: set[str] = set()   # claimed, here or elsewhere: asked once per process

    async def first(self, key: str) -> bool:
        """True for the one caller, of all processes and runs, that claims `key` first."""
        if key in self._known:
            return False
        async with self.store.transaction(serial=False) as tx:
            return await self.claim(tx, key)

    async def claim(self, tx: Any, key: str) -> bool:
        """`first` inside the caller's transaction: the claim commits with what is said."""
        if key in self._known:
            return False
        now = self.clock()
        claimed = await tx.execute(_CLAIM_SQL, (key, now)) == 1
        if claimed:
            await tx.execute(_PRUNE_SQL, (now - KEEP_S,))
            tx.on_commit(lambda: self._remember(key))
        else:
            self._remember(key)
        return claimed

    def _remember(self, key: str) -> None:
        if len(self._known) >= MAX_KNOWN:
            self._known.clear()
        self._known.add(key)
