"""What a channel shows of an approval request, and the words every channel shows with it.

A request reaches a channel as an `ApprovalView` (a copy, not the live record) inside an
`ApprovalNeeded` (asked alone) or an `ApprovalBatchNeeded` (several calls of one model step);
an answer given elsewhere comes back as an `ApprovalResolved`. The ids, the labels of an answer
and the heading of a batch page are here so that every channel draws a request the same way
without reaching into the approval service.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from bot.core.tool import NO_PREVIEW

SUPERSEDED = "superseded"   # who "resolved" a request a newer message cancelled
# token_urlsafe(12) gives 16 characters; anything else cannot be one of ours. Channels build
# their button patterns from ID_PATTERN, so a forged id is refused the same way everywhere.
ID_PATTERN = r"[A-Za-z0-9_-]{16}"
ID_RE = re.compile(ID_PATTERN)


def N_(message: str) -> str:
    """Marks a catalog message id (the core sits below bot.language, whose N_ is the same
    marker); it is translated where it is shown, with the reader's translator."""
    return message


# How an answer reads, everywhere it is shown (channels add an icon, and translate: these are
# catalog message ids, English as they stand).
ANSWER_LABELS = {"approve": N_("Approved"), "always": N_("Approved, and always from now on"),
                 "deny": N_("Denied")}
EXPIRED_LABEL = N_("Expired")
SUPERSEDED_LABEL = N_("Cancelled (a newer message arrived)")
RISK_NAMES = {"low": N_("low"), "medium": N_("medium"), "high": N_("high")}
# bot.core.tool.NO_PREVIEW, the words channels show for a tool that cannot describe its call
NO_PREVIEW_TEXT = N_("(preview not available for this tool)")


class Words(Protocol):
    """The reader's translator as this module uses it (bot.language.translator.Translator)."""

    def _(self, message: str, /, **values: Any) -> str: ...

    def ngettext(self, singular: str, plural: str, n: int, /, **values: Any) -> str: ...

    def say(self, text: str) -> str: ...


@dataclass(frozen=True)
class ApprovalView:
    """What a channel needs to show an approval request (a copy, not the live record)."""

    id: str
    tool: str
    risk: str
    summary: str
    sender: str
    chat: str
    channel: str
    args: dict[str, Any]
    expires_at: float
    always: str = ""      # what an "Always" tap would cover ("`git` in this chat"); "" = no Always
    batch: str = ""       # shared by the requests asked in one model step; "" = asked alone
    position: int = 0     # the call's place in its batch


@dataclass(frozen=True)
class ApprovalNeeded:
    approval: ApprovalView


@dataclass(frozen=True)
class ApprovalBatchNeeded:
    """Several calls of one model step wait for approval: shown as one request listing every
    call with its preview, with Approve all / Deny all and a pair of buttons per call. The
    conversation resumes once, when every call is decided."""

    batch: str
    approvals: tuple[ApprovalView, ...]


@dataclass(frozen=True)
class CallOutcome:
    """Where one call of a batch stands, as its request message shows it."""

    approval: ApprovalView
    choice: str             # "" while pending, else approve | deny | expire
    resolver: str = ""
    resolved_at: float = 0.0


@dataclass(frozen=True)
class ApprovalResolved:
    """An approval answered away from its channel's own buttons (e.g. in the web console)."""

    approval: ApprovalView
    choice: str                        # approve | deny | always | expire (nobody answered)
    resolver: str                      # who answered ("console:operator")
    resolved_at: float
    message_ref: str | None            # what the channel stored when it showed the request
    note: str = ""                     # what became of the call, when known ("in doubt: …")
    # For a request of a batch: every call of the batch as it stands now (the message showing
    # `approval` is redrawn from it, buttons kept for the calls still pending).
    batch: tuple[CallOutcome, ...] = ()


@runtime_checkable
class ApprovalSurface(Protocol):
    """A channel whose request message shows the outcome of an approval answered elsewhere
    (the conversation itself resumes through the channel's delivery outlet)."""

    async def approval_resolved(self, outcome: ApprovalResolved) -> None: ...


def looks_like_id(value: Any) -> bool:
    """Forged ids are refused before they reach SQL (any string, any type, is safe here)."""
    return isinstance(value, str) and ID_RE.fullmatch(value) is not None


def preview_text(summary: str | None, tr: Words) -> str:
    """A preview as the tool wrote it — its own words in the reader's language, its content
    (a diff, a command, a URL) exactly — or the placeholder of a tool without one (or an empty
    preview) in the reader's words."""
    text = tr.say(summary) if summary else NO_PREVIEW
    if text.strip().startswith(NO_PREVIEW):   # anything else is shown as written, to the space
        text = text.strip()
        text = tr._(NO_PREVIEW_TEXT) + text[len(NO_PREVIEW):]
    return text


_MESSAGE_REF = re.compile(r"(-?\d{1,20}):(\d{1,20})")


def message_ref(chat_id: int, message_id: int) -> str:
    """Where a channel showed a request ("chat:message"), stored with it so the channel can
    edit that message when the request is answered elsewhere."""
    return f"{chat_id}:{message_id}"


def parse_message_ref(ref: str | None) -> tuple[int, int] | None:
    """(chat id, message id) of a stored `message_ref`, None when it is not one."""
    match = _MESSAGE_REF.fullmatch(ref or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def batch_heading(first_number: int, calls: Sequence[CallOutcome], total: int,
                  tr: Words) -> tuple[bool, str, str]:
    """Whether a call of a batch page still waits, the page's title ("Approval needed: 9 calls"
    while one does) and its span of calls (" (calls 3–5 of 9)", empty when the page shows them
    all), the same on every channel, in the reader's language."""
    pending = any(not call.choice for call in calls)
    last = first_number + len(calls) - 1
    span = (" " + tr._("(calls {first}–{last} of {total})", first=first_number, last=last,
                       total=total)) if len(calls) < total else ""
    title = (tr.ngettext("Approval needed: {n} call", "Approval needed: {n} calls", total)
             if pending else
             tr.ngettext("Approval request: {n} call", "Approval request: {n} calls", total))
    return pending, title, span


def previews_moved_out(calls: Sequence[ApprovalView], fits: Callable[[frozenset[str]], bool],
                       size: Callable[[str], int] = len) -> frozenset[str] | None:
    """The ids of a batch page's calls whose previews move out of the page (posted before it),
    longest first, until `fits(moved_out)`; None when it does not fit even with all of them out.
    `size` measures a preview as the channel counts its limit."""
    moved: set[str] = set()
    while not fits(frozenset(moved)):
        inside = [view for view in calls if view.id not in moved]
        if not inside:
            return None
        moved.add(max(inside, key=lambda view: size(view.summary or "")).id)
    return frozenset(moved)
