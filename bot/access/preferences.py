"""Each person's own settings (`sender_settings`, one row per sender): the time zone their
schedules are read in, and whatever else a person chooses for themselves. This module is the
table's one owner: everything else asks it.
"""

from __future__ import annotations

from bot.store.protocol import Store


class Preferences:
    def __init__(self, store: Store):
        self.store = store

    async def timezone_of(self, sender: str, default: str) -> str:
        """The sender's IANA time zone, `default` when they never chose one."""
        row = await self.store.fetchone("SELECT timezone FROM sender_settings WHERE sender = ?",
                                        (sender,))
        return row["timezone"] if row and row["timezone"] else default

    async def set_timezone(self, sender: str, timezone: str) -> None:
        async with self.store.transaction() as tx:
            await tx.execute(
                "INSERT INTO sender_settings(sender, timezone) VALUES (?, ?)"
                " ON CONFLICT (sender) DO UPDATE SET timezone = excluded.timezone",
                (sender, timezone))
