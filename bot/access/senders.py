"""Who may talk to the bot, at which autonomy level, and how a stranger gets paired.

A sender's level comes from, in order: an explicit `[senders]` entry, else a level granted by
pairing (`granted_senders`), raised by the roles a channel reports with a message (e.g. Discord
guild roles, mapped by that channel's `roles` table) when those rank higher; a sender with none
of these gets `[senders] unknown` ("pairing", "ignore" or a level).

Pairing: an unknown sender receives a short one-time code once; the operator grants a level on
the terminal with `myclaw pair approve CODE [--level L]`. Codes expire, are rate limited per
sender, and every grant or refusal is audited.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from typing import Any

from bot.config.settings import Config
from bot.core.errors import MyclawError
from bot.core.identity import CHANNELS, LEVELS, OPERATOR, Access, Level, Sender, Stranger, parse_access
from bot.core.policy import highest_level
from bot.language.phrase import Phrase
from bot.store.audit import AuditEntry, write_audit
from bot.store.protocol import Row, Store, Transaction

# No 0/O, 1/I/L: a code read aloud or copied from a phone screen survives.
CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8
# A flood of strangers must not grow the table without bound; past this, nobody gets a code
# until some expire or are answered.
MAX_PENDING_CODES = 1000
MAX_SENDER_CHARS = 128
# The config table mapping a channel's roles to levels, where it is not called `roles` (Slack's
# roles are user groups: `[slack] groups`).
ROLE_TABLES = {"slack": "groups"}


class PairingError(MyclawError):
    """A pairing code could not be approved or denied (unknown, expired, used, bad level)."""


class Senders:
    def __init__(self, config: Config, store: Store, clock: Callable[[], float] = time.time):
        self.store = store
        self.clock = clock
        senders = config["senders"]
        self._explicit = {key: Level(level) for key, level in senders.items() if key != "unknown"}
        self._unknown = parse_access(senders.get("unknown", Stranger.PAIRING))
        # Per channel, the levels its roles map to: only channels configured with a `roles`
        # table have role-derived levels (roles arrive with a message, never on their own).
        self._roles = {channel: {role: Level(level) for role, level in table.items()}
                       for channel in CHANNELS
                       if (table := config.data.get(channel, {}).get(ROLE_TABLES.get(channel,
                                                                                      "roles")))}
        self._code_ttl = float(config["pairing"]["code_ttl_seconds"])
        self._max_per_hour = int(config["pairing"]["max_codes_per_hour"])

    # --- autonomy --------------------------------------------------------------------------

    async def autonomy(self, sender: str, roles: Sequence[str] = ()) -> Access:
        """The sender's level, or what happens to a stranger (pairing / ignore)."""
        level = self._explicit.get(sender)
        if level is None:
            level = await self.granted_level(sender)
        if roles and self._has_roles(sender):
            mapped = self._roles[Sender.parse(sender).channel]
            role_levels = [mapped[role] for role in roles if role in mapped]
            level = highest_level([lvl for lvl in (level, *role_levels) if lvl]) or level
        return level or self._unknown

    async def level_of(self, sender: str, roles: Sequence[str] = (),
                       recorded: str | None = None) -> Access:
        """The one resolver of a sender's level: for a message (with the roles it came with),
        an approval answered later, a job that runs later, or a tool checking its caller.

        The sender's level now: access revoked since means refused. Roles arrive only with a
        message, so without them a sender whose level may come from roles keeps the level
        `recorded` when the request or job was made (a member whose level comes only from a
        guild role can answer their approvals and run their reminders).
        """
        if not roles and recorded in LEVELS and self._has_roles(sender):
            return Level(recorded)
        return await self.autonomy(sender, roles)

    def _has_roles(self, sender: str) -> bool:
        """Does the sender's channel map roles to levels?"""
        return Sender.parse(sender).channel in self._roles

    async def granted_level(self, sender: str) -> Level | None:
        row = await self.store.fetchone("SELECT level FROM granted_senders WHERE sender = ?",
                                        (sender,))
        return Level(row["level"]) if row and row["level"] in LEVELS else None

    # --- pairing codes ---------------------------------------------------------------------

    async def granted(self) -> list[dict[str, Any]]:
        """Every level granted by pairing, newest first (who, what level, when, by whom)."""
        rows = await self.store.fetchall("SELECT sender, level, granted_at, granted_by"
                                         " FROM granted_senders ORDER BY granted_at DESC")
        return [dict(row) for row in rows]

    async def pairing_code(self, sender: str, *, channel: str = "", chat: str = "",
                           display_name: str = "") -> str | None:
        """A new one-time code for an unknown sender, or None (already sent, or rate limited).

        The check and the insert share one write transaction, so a burst of messages from the
        same stranger still yields a single code.
        """
        if not sender or len(sender) > MAX_SENDER_CHARS:
            return None
        now = self.clock()
        async with self.store.transaction() as tx:
            if not await self._may_issue(tx, sender, now):
                return None
            await tx.execute("UPDATE pairing_codes SET status = 'expired', resolved_at = ?"
                             " WHERE sender = ? AND status = 'pending'", (now, sender))
            code = await self._insert_code(tx, sender, now)
            await tx.execute("UPDATE pairing_codes SET channel = ?, chat = ?, display_name = ?"
                             " WHERE code = ?", (channel, chat, display_name[:MAX_SENDER_CHARS], code))
            return code

    async def nudge(self, sender: str) -> bool:
        """True once per pending code: the stranger wrote again while waiting, and is told
        (once) that they are still waiting; after that, silence until something changes."""
        async with self.store.transaction() as tx:
            changed = await tx.execute(
                "UPDATE pairing_codes SET nudged = 1 WHERE sender = ? AND status = 'pending'"
                " AND expires_at > ? AND nudged = 0", (sender, self.clock()))
        return changed > 0

    async def code_row(self, code: str) -> dict[str, Any] | None:
        """Who asked with `code`, from which channel and chat (to tell them the outcome)."""
        row = await self.store.fetchone("SELECT * FROM pairing_codes WHERE code = ?",
                                        (_normalise(code),))
        return dict(row) if row else None

    async def _may_issue(self, tx: Transaction, sender: str, now: float) -> bool:
        if await self._count(tx, "SELECT COUNT(*) FROM granted_senders WHERE sender = ?", (sender,)):
            return False
        live = ("SELECT COUNT(*) FROM pairing_codes WHERE sender = ? AND status = 'pending'"
                " AND expires_at > ?")
        if await self._count(tx, live, (sender, now)):
            return False  # a valid code was already sent: it is sent once
        recent = "SELECT COUNT(*) FROM pairing_codes WHERE sender = ? AND created_at > ?"
        if await self._count(tx, recent, (sender, now - 3600)) >= self._max_per_hour:
            return False
        pending = "SELECT COUNT(*) FROM pairing_codes WHERE status = 'pending' AND expires_at > ?"
        return await self._count(tx, pending, (now,)) < MAX_PENDING_CODES

    async def _insert_code(self, tx: Transaction, sender: str, now: float) -> str:
        for _ in range(5):
            code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
            inserted = await tx.execute(
                "INSERT INTO pairing_codes(code, sender, created_at, expires_at, status)"
                " VALUES (?, ?, ?, ?, 'pending') ON CONFLICT DO NOTHING",
                (code, sender, now, now + self._code_ttl))
            if inserted:  # 31^8 codes: a clash is astronomically rare, but never reuse one
                return code
        raise PairingError("could not generate a unique pairing code")

    @staticmethod
    async def _count(tx: Transaction, sql: str, params: tuple[Any, ...]) -> int:
        row = await tx.fetchone(sql, params)
        return int(row[0]) if row else 0

    async def list_codes(self) -> list[dict[str, Any]]:
        """Codes waiting for the operator (pending and not expired), oldest first."""
        rows = await self.store.fetchall(
            "SELECT code, sender, created_at, expires_at FROM pairing_codes"
            " WHERE status = 'pending' AND expires_at > ? ORDER BY created_at", (self.clock(),))
        return [dict(row) for row in rows]

    async def approve(self, code: str, level: str = "supervised", by: str = str(OPERATOR)) -> str:
        """Grant `level` to the sender who received `code`; returns that sender."""
        if level not in LEVELS:
            raise PairingError(Phrase("unknown level {level}; expected one of {levels}",
                                      level=repr(level), levels=", ".join(LEVELS)))
        return await self._answer(code, "approved", level, by)

    async def deny(self, code: str, by: str = str(OPERATOR)) -> str:
        """Refuse `code`; the sender stays unknown. Returns that sender."""
        return await self._answer(code, "denied", None, by)

    async def _answer(self, code: str, status: str, level: str | None, by: str) -> str:
        code = _normalise(code)
        now = self.clock()
        async with self.store.transaction() as tx:
            row = await tx.fetchone("SELECT * FROM pairing_codes WHERE code = ?", (code,))
            problem = _why_not_answerable(row, now)
            if problem is None:
                await self._apply(tx, row["sender"], code, status, level, by, now)
            elif row is not None and row["status"] == "pending":  # seen expired: record it
                await tx.execute("UPDATE pairing_codes SET status = 'expired', resolved_at = ?"
                                 " WHERE code = ? AND status = 'pending'", (now, code))
        if problem is not None:
            raise PairingError(problem)
        return row["sender"]

    async def _apply(self, tx: Transaction, sender: str, code: str, status: str,
                     level: str | None, by: str, now: float) -> None:
        await tx.execute("UPDATE pairing_codes SET status = ?, level = ?, resolved_at = ?"
                         " WHERE code = ? AND status = 'pending'", (status, level, now, code))
        if level is not None:
            await tx.execute(
                "INSERT INTO granted_senders(sender, level, granted_at, granted_by) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(sender) DO UPDATE SET level = excluded.level,"
                " granted_at = excluded.granted_at, granted_by = excluded.granted_by",
                (sender, level, now, by))
        await write_audit(tx, AuditEntry(sender=by, decision="pair", outcome=status,
                                         detail=f"{sender} -> {level or 'none'} (code {code})"))


def _normalise(code: str) -> str:
    return "".join(str(code).split()).upper()[:32]


def _why_not_answerable(row: Row | None, now: float) -> str | None:
    if row is None:
        return Phrase("unknown pairing code (check `myclaw pair list`)")
    if row["status"] == "approved":
        return Phrase("pairing code {code} was already used for {sender}", code=row["code"],
                      sender=row["sender"])
    if row["status"] == "denied":
        return Phrase("pairing code {code} was denied", code=row["code"])
    if row["status"] != "pending" or row["expires_at"] <= now:
        return Phrase("pairing code {code} has expired; ask {sender} to write again",
                      code=row["code"], sender=row["sender"])
    return None
