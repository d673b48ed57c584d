"""The audit log: one row per decision (tool call allowed, refused, approved, paired, undone).

Rows are values (`AuditEntry`) written with `write_audit` inside the caller's transaction, so an
audit row is committed together with what it describes, or not at all.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from bot.store.sqlite import Tx

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


async def write_audit(tx: Tx, entry: AuditEntry) -> None:
    await tx.execute(AUDIT_SQL, (entry.ts if entry.ts is not None else time.time(),
                                 entry.session_id, entry.sender, entry.tool, entry.args_hash,
                                 entry.decision, entry.outcome, entry.detail, entry.turn_id,
                                 entry.call_id, entry.approval_id))
