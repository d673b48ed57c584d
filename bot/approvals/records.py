"""Approval requests as values: the stored row as an `ApprovalRequest`, the outcome of an
answer as a `Resolution`, the id pattern, the labels every channel shows, and the reference
to the message that shows a request. bot/approvals/service.py is the service that stores and answers
them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from bot.approvals.grants import Scope
from bot.core.events import ApprovalView
from bot.core.tool import NO_PREVIEW, args_hash
from bot.language.catalogs import N_
from bot.language.phrase import Moment, Phrase, words_of
from bot.store.protocol import Row

Status = Literal["pending", "approved", "denied", "expired", "started", "executed", "failed",
                 "in_doubt"]
Choice = Literal["approve", "deny", "always"]
CHOICES: tuple[str, ...] = ("approve", "deny", "always")
SUPERSEDED = "superseded"
# token_urlsafe(12) gives 16 characters; anything else cannot be one of ours. Channels build
# their button patterns from ID_PATTERN, so a forged id is refused the same way everywhere.
ID_PATTERN = r"[A-Za-z0-9_-]{16}"
ID_RE = re.compile(ID_PATTERN)
# How an answer reads, everywhere it is shown (channels add an icon, and translate: these are
# catalog message ids, English as they stand).
ANSWER_LABELS = {"approve": N_("Approved"), "always": N_("Approved, and always from now on"),
                 "deny": N_("Denied")}
EXPIRED_LABEL = N_("Expired")
SUPERSEDED_LABEL = N_("Cancelled (a newer message arrived)")
UNKNOWN_REQUEST = Phrase("Unknown approval request.")
RISK_NAMES = {"low": N_("low"), "medium": N_("medium"), "high": N_("high")}
# bot.core.tool.NO_PREVIEW, the words channels show for a tool that cannot describe its call
NO_PREVIEW_TEXT = N_("(preview not available for this tool)")


def preview_text(summary: str | None, tr: Any) -> str:
    """A preview as the tool wrote it — its own words in the reader's language (`tr`, a
    bot.language Translator), its content (a diff, a command, a URL) exactly — or the
    placeholder of a tool without one (or an empty preview) in the reader's words."""
    text = tr.say(summary) if summary else NO_PREVIEW
    if text.strip().startswith(NO_PREVIEW):   # anything else is shown as written, to the space
        text = text.strip()
        text = tr._(NO_PREVIEW_TEXT) + text[len(NO_PREVIEW):]
    return text


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


_MESSAGE_REF = re.compile(r"(-?\d{1,20}):(\d{1,20})")


def message_ref(chat_id: int, message_id: int) -> str:
    """Where a channel showed a request ("chat:message"), stored with it so the channel can
    edit that message when the request is answered elsewhere."""
    return f"{chat_id}:{message_id}"


def parse_message_ref(ref: str | None) -> tuple[int, int] | None:
    """(chat id, message id) of a stored `message_ref`, None when it is not one."""
    match = _MESSAGE_REF.fullmatch(ref or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def looks_like_id(value: Any) -> bool:
    """Forged ids are refused before they reach SQL (any string, any type, is safe here)."""
    return isinstance(value, str) and ID_RE.fullmatch(value) is not None
