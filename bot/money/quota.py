"""Per-sender daily call counts of a tool: the owner of the `tool_quota` table (the quota port
of `bot.core.ports`). A slot is reserved atomically before the call, so concurrent calls cannot
overshoot, and handed back when the call fails."""

from __future__ import annotations

from bot.core.identity import Sender
from bot.store.protocol import Store

# Reserve one slot unless today's count already reached the quota; RETURNING yields no row then.
_RESERVE_SQL = """
INSERT INTO tool_quota(sender, tool, day, count) VALUES (?, ?, ?, 1)
ON CONFLICT(sender, tool, day) DO UPDATE SET count = count + 1 WHERE count < ?
RETURNING count
"""
_REFUND_SQL = ("UPDATE tool_quota SET count = count - 1"
               " WHERE sender = ? AND tool = ? AND day = ? AND count > 0")


class ToolQuota:
    def __init__(self, store: Store):
        self.store = store

    async def reserve(self, sender: Sender, tool: str, day: str, limit: int) -> int | None:
        """Today's count including this call, or None when the quota is used up."""
        if limit <= 0:
            return None
        async with self.store.transaction() as tx:
            row = await tx.fetchone(_RESERVE_SQL, (str(sender), tool, day, limit))
        return int(row[0]) if row is not None else None

    async def refund(self, sender: Sender, tool: str, day: str) -> None:
        async with self.store.transaction() as tx:
            await tx.execute(_REFUND_SQL, (str(sender), tool, day))
