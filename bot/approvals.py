"""Approval requests: persisted before they are shown, resolved exactly once.

INTERFACE FIXED — implementation pending (issue 3). The runtime and the channels program
against the signatures below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from bot.events import ApprovalView

Status = Literal["pending", "approved", "denied", "expired", "executed", "failed"]
Choice = Literal["approve", "deny", "always"]


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

    def view(self) -> ApprovalView:
        return ApprovalView(self.id, self.tool, self.risk, self.summary, self.sender, self.chat,
                            self.channel, dict(self.args), self.expires_at)


@dataclass(frozen=True)
class Resolution:
    """The outcome of one tap. `ok` is False when nothing changed; `reason` says why."""

    ok: bool
    reason: str
    status: Status | None = None
    request: ApprovalRequest | None = None
