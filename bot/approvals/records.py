"""Approval requests as values: the stored row as an `ApprovalRequest` and the outcome of an
answer as a `Resolution` (the ids, labels and message references every channel shows are the
contract's, bot.core.approval_cards). bot/approvals/service.py stores and answers them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from bot.approvals.grants import Scope
from bot.core.approval_cards import SUPERSEDED, ApprovalView, CallOutcome
from bot.core.tool import args_hash
from bot.language.phrase import Moment, Phrase, words_of
from bot.store.audit import AuditEntry
from bot.store.protocol import Row

Status = Literal["pending", "approved", "denied", "expired", "started", "executed", "failed",
                 "in_doubt"]
Choice = Literal["approve", "deny", "always"]
CHOICES: tuple[str, ...] = ("approve", "deny", "always")
UNKNOWN_REQUEST = Phrase("Unknown approval request.")


@dataclass
class ApprovalRequest:
    id: str                 # unguessable (secrets.token_urlsafe), short enough for callback_data
    session_id: str
    sender: str
    chat: str
    channel: str
    tool: str
    tool_use_id: str
    args: dict[str, Any]
    args_hash: str
    risk: str
    summary: str            # the dry_run summary, or NO_PREVIEW
    status: Status
    created_at: float
    expires_at: float
    resolved_by: str | None = None
    resolved_at: float | None = None
    autonomy: str | None = None   # the sender's level when the request was made
    allowlist: frozenset[str] | None = None  # the run's tool allowlist (a scheduled job's)
    scope: Scope | None = None    # what "Always" covers; None when Always is not offered
    batch: str | None = None      # the requests asked in the same model step share it
    position: int = 0             # the call's place in its batch (the model's order)

    def view(self) -> ApprovalView:
        return ApprovalView(self.id, self.tool, self.risk, self.summary, self.sender, self.chat,
                            self.channel, dict(self.args), self.expires_at,
                            Phrase("{scope} in this chat", scope=self.scope.label)
                            if self.scope else "",
                            self.batch or "", self.position)

    def outcome(self) -> CallOutcome:
        """Where this call stands, as a request message shows it."""
        choice = {"pending": "", "denied": "deny", "expired": "expire"}.get(self.status, "approve")
        return CallOutcome(self.view(), choice, self.resolved_by or "", self.resolved_at or 0.0)

    @property
    def args_intact(self) -> bool:
        """True when the stored args still hash to what was shown (nobody edited the row)."""
        return args_hash(self.args) == self.args_hash


@dataclass(frozen=True)
class Resolution:
    """The outcome of one tap. `ok` is False when nothing changed; `reason` says why."""

    ok: bool
    reason: str
    status: Status | None = None
    request: ApprovalRequest | None = None
    lapsed_now: bool = False   # this tap found it past its expiry and closed it: tell everyone
    lapsed: tuple[ApprovalRequest, ...] = ()   # what that closed (a whole batch lapses at once)
    batch_done: bool = False   # this answer decided the last pending request of its batch
    decided: tuple[ApprovalRequest, ...] = ()  # every request this answer decided


def summary_of(row: Row) -> str:
    """The stored preview: a Phrase again when its words were kept, else its text."""
    return words_of(row["summary_data"], row["summary"])


def from_row(row: Row) -> ApprovalRequest:
    return ApprovalRequest(
        id=row["id"], session_id=row["session_id"], sender=row["sender"], chat=row["chat"],
        channel=row["channel"], tool=row["tool"], tool_use_id=row["tool_use_id"],
        args=json.loads(row["args"]), args_hash=row["args_hash"], risk=row["risk"],
        summary=summary_of(row), status=row["status"], created_at=row["created_at"],
        expires_at=row["expires_at"], resolved_by=row["resolved_by"],
        resolved_at=row["resolved_at"], autonomy=row["autonomy"],
        allowlist=None if row["allowlist"] is None else frozenset(json.loads(row["allowlist"])),
        scope=Scope(row["scope_key"], words_of(row["scope_data"], row["scope_label"]))
        if row["scope_key"] else None,
        batch=row["batch"], position=row["batch_position"],
    )


def closed_reason(request: ApprovalRequest, now: float) -> str:
    """Why a request that is no longer pending cannot be answered (a Phrase: each reader gets
    it in their language)."""
    who = request.resolved_by or Phrase("someone")
    if request.status in ("approved", "started", "executed", "failed", "in_doubt"):
        return Phrase("This request was already approved by {who}.", who=who)
    if request.status == "denied":
        return Phrase("This request was already denied by {who}.", who=who)
    if request.resolved_by == SUPERSEDED:
        return Phrase("This request was cancelled because a newer message arrived.")
    return Phrase("This request expired at {time}.", time=Moment(request.expires_at, now=now))


AUDIT_SUMMARY_CHARS = 160


def answer_audit(approval_id: str, resolver: str, choice: str,
                 resolution: Resolution) -> AuditEntry:
    """The audit row of an answer (or of a refused one): who, what, and how it ended."""
    request = resolution.request
    outcome = resolution.status if resolution.ok else "refused"
    return AuditEntry(
        sender=resolver, decision=f"approval:{choice}"[:40], outcome=outcome or "refused",
        session_id=request.session_id if request else None,
        tool=request.tool if request else None,
        args_hash=request.args_hash if request else None,
        detail=f"{approval_id[:40]!r}{_what(request)}: {resolution.reason}")


def _what(request: ApprovalRequest | None) -> str:
    """What was asked, for the audit row: the tool and the first line of its preview (the
    approval id alone says nothing to someone reading the log later)."""
    if request is None:
        return ""
    first = (str(request.summary).strip().splitlines() or [""])[0]
    if len(first) > AUDIT_SUMMARY_CHARS:
        first = first[:AUDIT_SUMMARY_CHARS - 1] + "…"
    return f" ({request.tool}: {first})" if first else f" ({request.tool})"
