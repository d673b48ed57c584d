"""Grants: what an "Always" tap allows from then on — and nothing more.

A grant is (session, sender, tool, scope, max risk, expiry). A tool may describe the scope of a
call with `approval_scope(args) -> (key, label)` — the program(s) a shell command runs, the
folder a file is written in, the method and host of a request; without it the scope is the whole
tool. A later call is covered only when it is the same tool with the same scope key AND its risk
is no higher than the approved call's. High-risk calls get no "Always" unless the profile's
`always_max_risk` says so, and a tool in the profile's `always_ask` never gets one: the
operator's rule beats any tap. Grants end with their session (/new) or at their expiry, and can
be revoked one by one (/grants).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.core.errors import MyclawError
from bot.core.tool import RISKS, Risk, call_hook
from bot.language.phrase import Phrase, stored_words, words_of
from bot.store.audit import AuditEntry, write_audit
from bot.store.protocol import Store, Transaction

WHOLE_TOOL_KEY = "*"
MAX_SCOPE_CHARS = 200
CACHE_SIZE = 50_000
TOPIC = "grants"   # invalidation topic: a session's grants changed (key: session id)


class GrantError(MyclawError):
    """A grant could not be found or revoked; the text says why."""


@dataclass(frozen=True)
class Scope:
    key: str
    label: str


def scope_of(tool: Any, args: dict[str, Any], workspace: Path | None = None) -> Scope:
    """The scope a call would be granted under: the tool's own description, or the whole tool.
    `workspace`: the folder the call will run in, for a tool whose description takes it."""
    describe = getattr(tool, "approval_scope", None)
    name = tool.meta.name
    if callable(describe):
        try:
            key, label = call_hook(describe, args, workspace)
        except Exception:  # a scope that cannot be described is not generalised at all
            key, label = None, None
        if isinstance(key, str) and key and isinstance(label, str) and label:
            # A label's words stay a message unless it must be cut.
            return Scope(key[:MAX_SCOPE_CHARS],
                         label if len(label) <= MAX_SCOPE_CHARS else label[:MAX_SCOPE_CHARS])
        return Scope(f"exact:{secrets.token_hex(8)}", Phrase("this exact {tool} call", tool=name))
    return Scope(WHOLE_TOOL_KEY, Phrase("any {tool} call", tool=name))


def may_offer(tool: str, risk: str, always_max_risk: str, always_ask: frozenset[str]) -> bool:
    """Whether an "Always" button may be shown for a call of `tool` at `risk`."""
    if tool in always_ask or risk not in RISKS or always_max_risk not in RISKS:
        return False
    return RISKS.index(risk) <= RISKS.index(always_max_risk)


@dataclass(frozen=True)
class Grant:
    id: str
    session_id: str
    sender: str
    tool: str
    scope_key: str
    scope_label: str
    max_risk: Risk
    created_at: float
    expires_at: float
    approval_id: str = ""

    def covers(self, tool: str, scope_key: str, risk: str, now: float) -> bool:
        return (tool == self.tool and risk in RISKS
                and (self.scope_key == WHOLE_TOOL_KEY or scope_key == self.scope_key)
                and RISKS.index(risk) <= RISKS.index(self.max_risk) and now < self.expires_at)

    @property
    def description(self) -> str:
        return f"{self.tool}: {self.scope_label} (up to {self.max_risk} risk)"


def covering(grants: tuple[Grant, ...], tool: str, scope_key: str, risk: str,
             now: float) -> Grant | None:
    return next((g for g in grants if g.covers(tool, scope_key, risk, now)), None)


def _from_row(row: Any) -> Grant:
    return Grant(row["id"], row["session_id"], row["sender"], row["tool"], row["scope_key"],
                 words_of(row["scope_data"], row["scope_label"]), row["max_risk"],
                 row["created_at"], row["expires_at"],
                 row["approval_id"] or "")


class Grants:
    """Grants in the store, with each session's live grants cached (the per-call check must not
    read the store); every write invalidates the session's entry once it commits, here and (on
    a shared PostgreSQL store) in the other processes."""

    def __init__(self, store: Store, ttl_seconds: float = 86_400.0,
                 clock: Callable[[], float] = time.time):
        self.store = store
        self.ttl_seconds = float(ttl_seconds)
        self.clock = clock
        self._cache: dict[str, tuple[Grant, ...]] = {}
        self._generation = 0   # bumped when another process changes grants
        store.subscribe(TOPIC, self._changed_elsewhere)

    async def for_session(self, session_id: str) -> tuple[Grant, ...]:
        cached = self._cache.get(session_id)
        if cached is None:
            generation = self._generation
            rows = await self.store.fetchall(
                "SELECT * FROM grants WHERE session_id = ? AND revoked_at IS NULL"
                " AND expires_at > ? ORDER BY created_at", (session_id, self.clock()))
            cached = tuple(_from_row(r) for r in rows)
            if len(self._cache) >= CACHE_SIZE:
                self._cache.clear()
            if generation == self._generation:  # else the rows may predate the other write
                self._cache[session_id] = cached
        return cached

    def _changed_elsewhere(self, session_id: str | None) -> None:
        self._generation += 1
        if session_id is None:
            self._cache.clear()
        else:
            self._cache.pop(session_id, None)

    async def add(self, tx: Transaction, *, session_id: str, sender: str, tool: str, scope: Scope,
                  risk: Risk, by: str, approval_id: str = "") -> Grant:
        now = self.clock()
        grant = Grant(secrets.token_hex(5), session_id, sender, tool, scope.key, scope.label,
                      risk, now, now + self.ttl_seconds, approval_id)
        await tx.execute(
            "INSERT INTO grants(id, session_id, sender, tool, scope_key, scope_label, max_risk,"
            " created_at, expires_at, approval_id, granted_by, scope_data)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (grant.id, session_id, sender, tool, scope.key, str(scope.label), risk, now,
             grant.expires_at, approval_id, by, stored_words(scope.label)))
        await write_audit(tx, AuditEntry(
            sender=by, decision="grant", outcome="granted", session_id=session_id, tool=tool,
            detail=f"grant {grant.id} for {sender}: {grant.description}"))
        tx.on_commit(lambda: self._cache.pop(session_id, None))
        tx.invalidate(TOPIC, session_id)
        return grant

    async def active_for(self, sender: str, session_id: str) -> list[Grant]:
        return [g for g in await self.for_session(session_id) if g.sender == sender]

    async def revoke(self, grant_id: str, by: str, *, any_sender: bool = False) -> Grant:
        row = await self.store.fetchone("SELECT * FROM grants WHERE id = ?", (str(grant_id)[:40],))
        grant = _from_row(row) if row else None
        if grant is None or (grant.sender != by and not any_sender):
            raise GrantError(Phrase("no grant {id} of yours; see /grants",
                                    id=repr(str(grant_id)[:40])))
        async with self.store.transaction() as tx:
            changed = await tx.execute("UPDATE grants SET revoked_at = ? WHERE id = ?"
                                       " AND revoked_at IS NULL", (self.clock(), grant.id))
            if changed:
                await write_audit(tx, AuditEntry(
                    sender=by, decision="grant", outcome="revoked", session_id=grant.session_id,
                    tool=grant.tool, detail=f"grant {grant.id}: {grant.description}"))
            tx.on_commit(lambda: self._cache.pop(grant.session_id, None))
            tx.invalidate(TOPIC, grant.session_id)
        if not changed:
            raise GrantError(Phrase("grant {id} was already revoked", id=grant.id))
        return grant

    async def listing(self) -> list[Grant]:
        """Every live grant (the console and `myclaw audit` views)."""
        rows = await self.store.fetchall(
            "SELECT * FROM grants WHERE revoked_at IS NULL AND expires_at > ? ORDER BY created_at",
            (self.clock(),))
        return [_from_row(r) for r in rows]

    def forget(self, session_id: str) -> None:
        """The session ended (/new): its grants no longer apply."""
        self._cache.pop(session_id, None)
