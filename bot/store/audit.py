"""The audit log: one row per decision (tool call allowed, refused, approved, paired, undone).

Rows are values (`AuditEntry`) written with `write_audit` inside the caller's transaction, so an
audit row is committed together with what it describes, or not at all. The console and the CLI
read them back with `recent_audit` (filtered by `AuditQuery`) and `audit_decisions`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from bot.store.protocol import Store, Transaction

AUDIT_SQL = ("INSERT INTO audit(ts, session_id, sender, tool, args_hash, decision, outcome, detail,"
             " turn_id, call_id, approval_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")


@dataclass(frozen=True)
class AuditEntry:
    sender: str
    decision: str
    outcome: str
    session_id: str | None = None
    tool: str | None = None
    args_hash: str | None = None
    detail: str = ""
    ts: float | None = None  # when it happened; None means when written
    # A tool call's rows share its call id: 'started' is written before it runs (write-ahead),
    # its outcome after; a start with no outcome is a call in doubt.
    turn_id: str | None = None
    call_id: str | None = None
    approval_id: str | None = None


async def write_audit(tx: Transaction, entry: AuditEntry) -> None:
    await tx.defer(AUDIT_SQL, (entry.ts if entry.ts is not None else time.time(),
                                 entry.session_id, entry.sender, entry.tool, entry.args_hash,
                                 entry.decision, entry.outcome, entry.detail, entry.turn_id,
                                 entry.call_id, entry.approval_id))


# The console's routine sign-in rows: a link issued, a login, a logout, each gone well. A refused
# login, a refused form (CSRF) and everything the operator did in the console are not these.
LOGIN_DECISIONS = ("console:link", "console:login", "console:logout")
LOGIN_OUTCOMES = ("ok", "issued")


@dataclass(frozen=True)
class AuditQuery:
    """Which audit rows to read: all filters optional; `verdict` matches the decision or the
    outcome (a verdict may be recorded as either); `since`/`until` bound the time (until excluded)."""

    sender: str = ""
    tool: str = ""
    verdict: str = ""
    since: float | None = None
    until: float | None = None
    before_id: int | None = None      # rows older than this one (the next page)
    without_logins: bool = False      # leave out the console's successful link/login/logout rows

    def where(self) -> tuple[str, tuple[Any, ...]]:
        conditions: list[str] = []
        params: list[Any] = []
        if self.before_id is not None:
            conditions.append("id < ?")
            params.append(self.before_id)
        if self.without_logins:
            conditions.append(f"NOT (decision IN ({', '.join('?' * len(LOGIN_DECISIONS))})"
                              f" AND outcome IN ({', '.join('?' * len(LOGIN_OUTCOMES))}))")
            params += [*LOGIN_DECISIONS, *LOGIN_OUTCOMES]
        for column, value in (("sender", self.sender), ("tool", self.tool)):
            if value:
                conditions.append(f"{column} = ?")
                params.append(value)
        if self.verdict:
            conditions.append("(decision = ? OR outcome = ?)")
            params += [self.verdict, self.verdict]
        for op, moment in ((">=", self.since), ("<", self.until)):
            if moment is not None:
                conditions.append(f"ts {op} ?")
                params.append(moment)
        return (" WHERE " + " AND ".join(conditions) if conditions else ""), tuple(params)


async def recent_audit(store: Store, query: AuditQuery, limit: int) -> list[dict[str, Any]]:
    """The newest `limit` rows matching `query`, newest first."""
    where, params = query.where()
    rows = await store.fetchall(
        "SELECT id, ts, session_id, sender, tool, args_hash, decision, outcome, detail FROM audit"
        f"{where} ORDER BY id DESC LIMIT ?", (*params, limit))
    return [dict(row) for row in rows]


async def count_audit(store: Store, query: AuditQuery) -> int:
    where, params = query.where()
    row = await store.fetchone(f"SELECT COUNT(*) AS n FROM audit{where}", params)
    return int(row["n"]) if row else 0


async def audit_decisions(store: Store, limit: int = 100) -> list[str]:
    """The decisions recorded so far (for a filter's choices)."""
    rows = await store.fetchall("SELECT DISTINCT decision FROM audit ORDER BY decision LIMIT ?",
                                (limit,))
    return [row["decision"] for row in rows]


# --- write-ahead calls: what the rows say about a turn's calls after a restart -------------

async def calls_in_flight(store: Store, turn_id: str) -> list[dict[str, Any]]:
    """The calls of a turn recorded as started with no outcome after: each may or may not have
    run to the end (the audit rows, oldest first)."""
    rows = await store.fetchall(
        "SELECT * FROM audit s WHERE s.turn_id = ? AND s.outcome = 'started' AND NOT EXISTS"
        " (SELECT 1 FROM audit f WHERE f.turn_id = s.turn_id AND f.call_id = s.call_id"
        " AND f.id > s.id)"
        " ORDER BY s.id", (turn_id,))
    return [dict(row) for row in rows]


async def calls_in_doubt(store: Store, turn_id: str) -> list[dict[str, Any]]:
    """The calls of a turn reported in doubt after a restart (their 'started' audit rows)."""
    rows = await store.fetchall(
        "SELECT * FROM audit s WHERE s.turn_id = ? AND s.outcome = 'started' AND EXISTS"
        " (SELECT 1 FROM audit d WHERE d.turn_id = s.turn_id AND d.call_id = s.call_id"
        " AND d.outcome = 'in_doubt')"
        " ORDER BY s.id", (turn_id,))
    return [dict(row) for row in rows]


async def approved_call(store: Store, approval_id: str) -> dict[str, Any] | None:
    """The last audit row of an approved call ('started' while it runs), None if it never
    started."""
    row = await store.fetchone("SELECT * FROM audit WHERE approval_id = ? AND call_id IS NOT NULL"
                               " ORDER BY id DESC LIMIT 1", (approval_id,))
    return dict(row) if row else None
