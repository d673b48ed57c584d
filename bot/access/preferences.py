"""Each person's own settings (`sender_settings`, one row per sender): the time zone their
schedules are read in, whether answers are spoken too (/voice), the language they chose (and
the one their app last said), and whatever else a person chooses for themselves. This module is
the table's one owner: everything else asks it.
"""

from __future__ import annotations

from bot.store.protocol import Row, Store


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

    async def voice_of(self, sender: str) -> str | None:
        """The sender's /voice choice (on, off, auto), None when they never chose."""
        row = await self.store.fetchone("SELECT voice FROM sender_settings WHERE sender = ?",
                                        (sender,))
        return row["voice"] if row and row["voice"] else None

    async def set_voice(self, sender: str, mode: str, *, changed_topic: str = "") -> None:
        """Store the choice; `changed_topic` tells other processes' caches (store invalidation)."""
        async with self.store.transaction() as tx:
            await tx.execute(
                "INSERT INTO sender_settings(sender, voice) VALUES (?, ?)"
                " ON CONFLICT (sender) DO UPDATE SET voice = excluded.voice", (sender, mode))
            if changed_topic:
                tx.invalidate(changed_topic, sender)

    async def everyone(self) -> list[Row]:
        """Every row (sender, timezone, language, language_hint): read once at start by
        `bot.access.languages`, which keeps them in memory."""
        return await self.store.fetchall(
            "SELECT sender, timezone, language, language_hint FROM sender_settings")

    async def set_language(self, sender: str, language: str | None) -> None:
        """The language `sender` chose with /language (None: follow their app again)."""
        await self._set(sender, "language", language)

    async def set_language_hint(self, sender: str, hint: str) -> None:
        """The language `sender`'s app or platform last said they use."""
        await self._set(sender, "language_hint", hint)

    async def _set(self, sender: str, column: str, value: str | None) -> None:
        assert column in ("language", "language_hint")
        async with self.store.transaction() as tx:
            await tx.execute(
                f"INSERT INTO sender_settings(sender, {column}) VALUES (?, ?)"
                f" ON CONFLICT (sender) DO UPDATE SET {column} = excluded.{column}",
                (sender, value))
