"""Several calls asked in one model step, on Slack: one card listing each call with its whole
preview, "Approve all" / "Deny all", and Approve / Deny (and "Always N" where offered) per call.

"All" buttons carry `ab:<batch>:a|d`; a call's own buttons carry the single request's
`ap:<id>:a|d|s`, so they take exactly the path of a request asked alone. A batch with more calls
than a card holds comfortably is shown on several cards (pages). A page whose blocks would pass
Slack's 50 moves its longest previews out, into snippet files uploaded before it: a preview is
never cut. The layout is a function of the calls and the reader's language alone, so a card can
be redrawn (for the same reader) as answers arrive (bot.approvals.display redraws every copy
from the store).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.core.approval_cards import (
    ID_PATTERN,
    ApprovalResolved,
    ApprovalView,
    CallOutcome,
    batch_heading,
    preview_text,
    previews_moved_out,
)
from bot.language.translator import Translator
from channels.slack import texts
from channels.slack.approvals import (
    MAX_BLOCKS,
    action_id,
    always_line,
    button,
    context,
    expires_line,
    outcome_line,
    preview_blocks,
    risk_name,
    risk_text,
    section,
)
from channels.slack.rendering import Part, escape

BATCH_PATTERN = re.compile(rf"^ab:({ID_PATTERN}):([ad])$")
CHOICE_BY_LETTER = {"a": "approve", "d": "deny"}
CALLS_PER_PAGE = 8


@dataclass(frozen=True)
class Page:
    calls: tuple[ApprovalView, ...]
    first: int                      # the number shown for its first call (1-based)
    outside: frozenset[str]         # ids whose preview is uploaded before the page


def batch_action(batch: str, letter: str) -> str:
    return f"ab:{batch}:{letter}"


def parse_batch_action(action: str | None) -> tuple[str, str] | None:
    match = BATCH_PATTERN.match(action or "")
    return (match.group(1), CHOICE_BY_LETTER[match.group(2)]) if match else None


def pages(views: Sequence[ApprovalView], tr: Translator) -> list[Page]:
    return [_page(views, start, tr) for start in range(0, len(views), CALLS_PER_PAGE)]


def _page(views: Sequence[ApprovalView], start: int, tr: Translator) -> Page:
    calls = tuple(views[start:start + CALLS_PER_PAGE])
    pending = [CallOutcome(view, "") for view in calls]

    def fits(outside: frozenset[str]) -> bool:
        # One block per call kept free for the outcome line an answer adds later.
        blocks = page_blocks(Page(calls, start + 1, outside), pending, len(views), True, tr)
        return len(blocks) + len(calls) <= MAX_BLOCKS
    outside = previews_moved_out(calls, fits)
    return Page(calls, start + 1, frozenset(v.id for v in calls) if outside is None else outside)


def page_of(views: Sequence[ApprovalView], approval_id: str, tr: Translator) -> Page | None:
    return next((p for p in pages(views, tr) if any(v.id == approval_id for v in p.calls)), None)


def page_blocks(page: Page, calls: Sequence[CallOutcome], total: int, batch_pending: bool,
                tr: Translator) -> list[dict[str, Any]]:
    first = calls[0].approval
    pending, title, span = batch_heading(page.first, calls, total, tr)
    blocks = [section(f"🔐 *{escape(title)}*{escape(span)}\n"
                      + tr._("Requested by: {who}", who=escape(first.sender)))]
    for number, call in enumerate(calls, start=page.first):
        view = call.approval
        blocks.append(section(f"*{number}. `{escape(view.tool)}`* — {risk_text(view.risk, tr)}"))
        if view.id in page.outside:
            blocks.append(context(tr._(texts.BATCH_PREVIEW_IN_FILE, number=number)))
        else:
            blocks.extend(preview_blocks(view.summary, tr))
        if call.choice:
            blocks.append(context(outcome_line(call.choice, call.resolver, call.resolved_at, tr)))
    if pending:
        tail = [expires_line(first, tr)]
        tail += [always_line(c.approval, tr, n)
                 for n, c in enumerate(calls, start=page.first) if c.approval.always and not c.choice]
        blocks.append(context("\n".join(tail)))
    return blocks + _buttons(page, calls, batch_pending, tr)


def _buttons(page: Page, calls: Sequence[CallOutcome], batch_pending: bool,
             tr: Translator) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if batch_pending:
        batch = calls[0].approval.batch
        blocks.append({"type": "actions", "block_id": f"ab:{batch}:{page.first}", "elements": [
            button(tr._("Approve all"), batch_action(batch, "a"), style="primary"),
            button(tr._("Deny all"), batch_action(batch, "d"), style="danger")]})
    for number, call in enumerate(calls, start=page.first):
        if call.choice:
            continue
        view = call.approval
        row = [button(tr._("Approve {number}", number=number), action_id(view.id, "a")),
               button(tr._("Deny {number}", number=number), action_id(view.id, "d"))]
        if view.always:
            row.append(button(tr._(texts.BUTTON_ALWAYS_N, number=number), action_id(view.id, "s")))
        blocks.append({"type": "actions", "block_id": f"ap:{view.id}", "elements": row})
    return blocks


def page_part(page: Page, calls: Sequence[CallOutcome], total: int, tr: Translator) -> Part:
    """The page's notification text, and its plain twin with commands to type."""
    lines = [tr.ngettext("Approval needed: {n} call", "Approval needed: {n} calls", total)]
    for number, call in enumerate(calls, start=page.first):
        view = call.approval
        summary = tr._(texts.BATCH_PREVIEW_IN_FILE, number=number) if view.id in page.outside \
            else preview_text(view.summary, tr)
        lines.append(f"{number}. {view.tool} ({risk_name(view.risk, tr)})\n{summary}\n"
                     f"/approve {view.id} · /deny {view.id}")
    return Part(escape(lines[0]), escape("\n\n".join(lines)))


def redrawn(outcome: ApprovalResolved, tr: Translator) -> tuple[list[dict[str, Any]], Part]:
    """The card showing `outcome.approval`, as the batch stands now, in its reader's words."""
    views = [call.approval for call in outcome.batch]
    page = page_of(views, outcome.approval.id, tr) or Page((outcome.approval,), 1, frozenset())
    ids = {view.id for view in page.calls}
    calls = [call for call in outcome.batch if call.approval.id in ids]
    batch_pending = any(not call.choice for call in outcome.batch)
    return (page_blocks(page, calls, len(views), batch_pending, tr),
            page_part(page, calls, len(views), tr))
