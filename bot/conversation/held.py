"""Messages a platform would not deliver yet, held for the person until they can be reached.

WhatsApp, for one, accepts free-form messages only within 24 hours of the person's last message;
a reminder or a job's answer due later, with no template to carry it, waits here. When the
person next writes (which reopens the window), the channel takes what was held for them and
says it first, so nothing is lost silently.

    await held.hold("whatsapp:39347…", "reminder", text, reason)
    for message in await held.take("whatsapp:39347…"): ...

`take` deletes what it returns in the same transaction, so with several processes on one store
each held message is handed out once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from bot.core.ports import HeldMessage

MAX_HELD_PER_RECIPIENT = 50   # a person away for months gets the newest, not an endless backlog


class HeldMessages:
    def __init__(self, store: Any, clock: Callable[[], float] = time.time):
        self.store = store
        self.clock = clock

    async def hold(self, recipient: str, kind: str, text: str, reason: str,
                   approval_id: str = "") -> None:
        async with self.store.transaction(lock=[f"held:{recipient}"]) as tx:
            await tx.execute(
                "INSERT INTO held_messages(recipient, kind, text, reason, approval_id, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (recipient, kind, text, reason, approval_id or None, self.clock()))
            # Concurrent-safe: the recipient's lock orders the insert and the trim.
            await tx.execute(
                "DELETE FROM held_messages WHERE recipient = ? AND id NOT IN (SELECT id FROM "
                "held_messages WHERE recipient = ? ORDER BY id DESC LIMIT ?)",
                (recipient, recipient, MAX_HELD_PER_RECIPIENT))

    async def take(self, recipient: str) -> list[HeldMessage]:
        """Everything held for `recipient`, oldest first; removed as it is returned."""
        if not await self.count(recipient):   # the usual case, without a write transaction
            return []
        async with self.store.transaction(lock=[f"held:{recipient}"]) as tx:
            rows = await tx.fetchall(
                "SELECT id, recipient, kind, text, reason, approval_id, created_at "
                "FROM held_messages WHERE recipient = ? ORDER BY id", (recipient,))
            if rows:
                await tx.execute("DELETE FROM held_messages WHERE recipient = ? AND id <= ?",
                                 (recipient, max(int(r["id"]) for r in rows)))
        return [HeldMessage(r["recipient"], r["kind"], r["text"], r["reason"],
                            float(r["created_at"]), r["approval_id"] or "") for r in rows]

    async def count(self, recipient: str) -> int:
        row = await self.store.fetchone(
            "SELECT COUNT(*) AS n FROM held_messages WHERE recipient = ?", (recipient,))
        return int(row["n"]) if row else 0
