"""Who may use the console: one-time login links and operator sessions, both stored hashed.

A login link carries a random token; the store keeps only its sha256, so a copy of the database
cannot be turned into a login. Redeeming is one compare-and-set UPDATE (`used_at IS NULL AND
expires_at > now`) in the same transaction that creates the session: a replayed, late or forged
link changes nothing. The session cookie is another random token, also stored hashed. Its CSRF
token is an HMAC keyed by the session token, so it is bound to that one session, needs no
storage, and a page from another site can neither read nor guess it.

Refused logins are audited at most `REFUSED_AUDITS_PER_MINUTE` times a minute; the next audited
row counts the ones left out, so a flood of guessed links cannot grow the audit log without bound
(guessing cannot succeed: a token has 256 random bits) and a real link still works during one.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from bot.core.identity import CONSOLE_OPERATOR
from bot.core.identity import OPERATOR as TERMINAL_SENDER
from bot.store.audit import AuditEntry, write_audit
from bot.store.protocol import Store

OPERATOR = str(CONSOLE_OPERATOR)       # who the console acts as (audit rows, approvals)
TERMINAL = str(TERMINAL_SENDER)        # who makes login links (`myclaw console login`)
TOKEN_BYTES = 32
# token_urlsafe(32) gives 43 characters; anything else cannot be one of ours.
TOKEN_RE = re.compile(r"[A-Za-z0-9_-]{43}")
FORGET_AFTER_SECONDS = 7 * 86400       # used, expired and revoked rows are kept this long
REFUSED_AUDITS_PER_MINUTE = 10


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("ascii")).hexdigest()


def looks_like_token(value: object) -> bool:
    return isinstance(value, str) and TOKEN_RE.fullmatch(value) is not None


@dataclass(frozen=True)
class ConsoleSession:
    id: int
    operator: str
    expires_at: float
    csrf: str


class ConsoleAuth:
    def __init__(self, store: Store, *, login_ttl_seconds: float, session_ttl_seconds: float,
                 clock: Callable[[], float] = time.time):
        self.store = store
        self.login_ttl = float(login_ttl_seconds)
        self.session_ttl = float(session_ttl_seconds)
        self.clock = clock
        self._refusals = _RefusalSampler(REFUSED_AUDITS_PER_MINUTE)

    async def issue_login(self, by: str = TERMINAL) -> str:
        """A new one-time login token (returned once, stored only as its hash)."""
        token = secrets.token_urlsafe(TOKEN_BYTES)
        now = self.clock()
        async with self.store.transaction() as tx:
            await tx.execute("DELETE FROM console_logins WHERE expires_at < ?",
                             (now - FORGET_AFTER_SECONDS,))
            await tx.execute("INSERT INTO console_logins(token_hash, created_at, expires_at)"
                             " VALUES (?, ?, ?)", (_hash(token), now, now + self.login_ttl))
            await write_audit(tx, AuditEntry(sender=by, decision="console:link", outcome="issued",
                                             detail=f"valid for {int(self.login_ttl)} s"))
        return token

    async def redeem(self, token: str, client: str = "") -> str | None:
        """The login token traded for a new session token, or None (unknown, used, expired).
        Every attempt is audited."""
        now = self.clock()
        session_token = secrets.token_urlsafe(TOKEN_BYTES)
        async with self.store.transaction() as tx:
            won = 0
            if looks_like_token(token):
                won = await tx.execute(
                    "UPDATE console_logins SET used_at = ?"
                    " WHERE token_hash = ? AND used_at IS NULL AND expires_at > ?",
                    (now, _hash(token), now))
            if won == 1:
                await tx.execute(
                    "DELETE FROM console_sessions WHERE expires_at < ?", (now - FORGET_AFTER_SECONDS,))
                await tx.execute(
                    "INSERT INTO console_sessions(token_hash, operator, created_at, expires_at)"
                    " VALUES (?, ?, ?, ?)", (_hash(session_token), OPERATOR, now, now + self.session_ttl))
            if won == 1:
                await write_audit(tx, AuditEntry(sender=OPERATOR, decision="console:login",
                                                 outcome="ok", detail=client[:80]))
            elif (left_out := self._refusals.admit(now)) is not None:
                more = f" (+{left_out} more refused, not audited)" if left_out else ""
                await write_audit(tx, AuditEntry(
                    sender=OPERATOR, decision="console:login", outcome="refused",
                    detail=f"unknown, used or expired link {client[:80]}{more}"))
        return session_token if won == 1 else None

    async def session(self, token: str | None) -> ConsoleSession | None:
        """The live session a cookie names, or None (missing, unknown, expired, revoked)."""
        if not looks_like_token(token):
            return None
        assert token is not None
        row = await self.store.fetchone(
            "SELECT id, operator, expires_at FROM console_sessions"
            " WHERE token_hash = ? AND revoked_at IS NULL AND expires_at > ?",
            (_hash(token), self.clock()))
        if row is None:
            return None
        return ConsoleSession(row["id"], row["operator"], row["expires_at"], csrf_token(token))

    async def revoke(self, session_id: int) -> None:
        """End one session (the Log out button)."""
        async with self.store.transaction() as tx:
            await tx.execute("UPDATE console_sessions SET revoked_at = ?"
                             " WHERE id = ? AND revoked_at IS NULL", (self.clock(), session_id))
            await write_audit(tx, AuditEntry(sender=OPERATOR, decision="console:logout",
                                             outcome="ok", detail="this session"))

    async def revoke_all(self, by: str = TERMINAL) -> int:
        """End every session (and every unused login link); returns how many sessions ended."""
        now = self.clock()
        async with self.store.transaction() as tx:
            ended = await tx.execute("UPDATE console_sessions SET revoked_at = ?"
                                     " WHERE revoked_at IS NULL AND expires_at > ?", (now, now))
            await tx.execute("UPDATE console_logins SET expires_at = ?"
                             " WHERE used_at IS NULL AND expires_at > ?", (now, now))
            await write_audit(tx, AuditEntry(sender=by, decision="console:logout", outcome="ok",
                                             detail=f"{ended} session(s) revoked"))
        return ended


def csrf_token(session_token: str) -> str:
    return hmac.new(session_token.encode("ascii"), b"myclaw console csrf", hashlib.sha256).hexdigest()


def csrf_matches(session: ConsoleSession, presented: object) -> bool:
    return isinstance(presented, str) and hmac.compare_digest(
        session.csrf.encode("ascii"), presented.encode("utf-8", "replace"))


class _RefusalSampler:
    """Lets `per_minute` refusals a minute through to the audit log and counts the rest."""

    def __init__(self, per_minute: int):
        self.per_minute = per_minute
        self._window_start = float("-inf")
        self._in_window = 0
        self._left_out = 0

    def admit(self, now: float) -> int | None:
        """None: leave this refusal out. Else audit it, noting how many were left out before."""
        if now - self._window_start >= 60:
            self._window_start, self._in_window = now, 0
        if self._in_window >= self.per_minute:
            self._left_out += 1
            return None
        self._in_window += 1
        left_out, self._left_out = self._left_out, 0
        return left_out
