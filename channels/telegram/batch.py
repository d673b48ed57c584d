"""Several calls asked in one model step, on Telegram: one message listing each call with its
preview, "Approve all" / "Deny all", and Approve / Deny (and "Always: …" where offered) per call.

Callback data: "ab:<batch>:a|d" answers every call still pending; a call's own buttons carry the
single request's "ap:<id>:a|d|s", so they go through exactly the path of a request asked alone.
A batch with more calls than one keyboard holds comfortably on a phone is shown on several
messages (pages), each with "Approve all" / "Deny all". A preview that does not fit its page is
posted whole before it, over as many messages as it takes: a preview is never cut. The layout is
a function of the calls and the reader's language alone, so the message showing a call can be
redrawn (for the same reader) as answers arrive.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

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
from channels.telegram.approvals import always_line, callback_data, outcome_line, risk_text
from channels.telegram.rendering import MESSAGE_LIMIT, Part, escape, truncate, utf16_len

BATCH_PREFIX = "ab:"
BATCH_PATTERN = re.compile(rf"^ab:({ID_PATTERN}):([ad])$")
CHOICE_BY_LETTER = {"a": "approve", "d": "deny"}
CALLS_PER_PAGE = 8          # 1 + 8 rows of buttons: still usable on a phone
OUTCOME_UNITS = 120         # room kept per call for the outcome line an answer adds later
PREVIEW_UNITS = 3000        # one continuation message's share of a long preview
MAX_LABEL = 40


@dataclass(frozen=True)
class Page:
    calls: tuple[ApprovalView, ...]
    first: int                      # the number shown for its first call (1-based)
    outside: frozenset[str]         # ids whose preview is posted before the page
    explain_always: bool = True     # say what each "Always N" covers (dropped if it cannot fit)


def batch_callback(batch: str, letter: str) -> str:
    return f"{BATCH_PREFIX}{batch}:{letter}"


def parse_batch_callback(data: str | None) -> tuple[str, str] | None:
    """(batch id, choice) from an "all" button's data, or None when it is not one."""
    match = BATCH_PATTERN.match(data or "")
    return (match.group(1), CHOICE_BY_LETTER[match.group(2)]) if match else None


def belongs_to_batch(markup: InlineKeyboardMarkup | None, batch: str) -> bool:
    """True when the tapped message really carries this batch's buttons."""
    prefix = f"{BATCH_PREFIX}{batch}:"
    return markup is not None and any(
        isinstance(button.callback_data, str) and button.callback_data.startswith(prefix)
        for row in markup.inline_keyboard for button in row)


def pages(views: Sequence[ApprovalView], tr: Translator) -> list[Page]:
    """The batch cut into pages; in each, the longest previews move out until the page fits."""
    return [_page(views, start, tr) for start in range(0, len(views), CALLS_PER_PAGE)]


def _page(views: Sequence[ApprovalView], start: int, tr: Translator) -> Page:
    calls = tuple(views[start:start + CALLS_PER_PAGE])
    pending = [CallOutcome(view, "") for view in calls]
    budget = MESSAGE_LIMIT - OUTCOME_UNITS * len(calls)

    def fits(outside: frozenset[str]) -> bool:
        page = Page(calls, start + 1, outside)
        return utf16_len(page_part(page, pending, len(views), tr).html) <= budget
    outside = previews_moved_out(calls, fits, utf16_len)
    if outside is None:   # eight long "Always" scopes: the buttons still name them
        return Page(calls, start + 1, frozenset(view.id for view in calls), explain_always=False)
    return Page(calls, start + 1, outside)


def page_of(views: Sequence[ApprovalView], approval_id: str, tr: Translator) -> Page | None:
    return next((p for p in pages(views, tr) if any(v.id == approval_id for v in p.calls)), None)


def continuation_parts(page: Page, tr: Translator) -> list[Part]:
    """The previews that did not fit the page, whole, in messages sent before it."""
    parts: list[Part] = []
    for number, view in enumerate(page.calls, start=page.first):
        if view.id not in page.outside:
            continue
        chunks, rest = [], preview_text(view.summary, tr)
        while rest:
            chunk = truncate(rest, PREVIEW_UNITS, "")
            chunks.append(chunk)
            rest = rest[len(chunk):]
        for n, chunk in enumerate(chunks, start=1):
            title = tr._("🔎 Preview {n}/{total} of call {number} ({tool}) waiting for approval:",
                         n=n, total=len(chunks), number=number, tool=view.tool) + "\n"
            parts.append(Part(f"{escape(title)}<pre>{escape(chunk)}</pre>", title + chunk))
    return parts


def page_part(page: Page, calls: Sequence[CallOutcome], total: int, tr: Translator) -> Part:
    """The page's text, each call with its preview and, once answered, its outcome."""
    first = calls[0].approval
    pending, title, span = batch_heading(page.first, calls, total, tr)
    asked = tr._("Requested by: {who}", who=first.sender)
    html = [f"🔐 <b>{escape(title)}</b>{escape(span)}\n{escape(asked)}"]
    plain = [f"🔐 {title}{span}\n{asked}"]
    for number, call in enumerate(calls, start=page.first):
        view = call.approval
        summary = preview_text(view.summary, tr)
        if view.id in page.outside:
            summary = tr._("(the full preview of call {number} is in the messages above)",
                           number=number)
        head = f"{number}. {view.tool} — {risk_text(view.risk, tr)}"
        line = _outcome_line(call, tr)
        html.append(f"<b>{escape(head)}</b>\n<pre>{escape(summary)}</pre>"
                    + (f"\n{escape(line)}" if line else ""))
        plain.append(f"{head}\n{summary}" + (f"\n{line}" if line else ""))
    if pending:
        tail = tr._("Expires at {time}.", time=tr.clock(first.expires_at))
        for number, call in enumerate(calls, start=page.first):
            if page.explain_always and call.approval.always and not call.choice:
                tail += "\n" + always_line(call.approval, tr, number)
        html.append(escape(tail))
        plain.append(tail)
    return Part("\n\n".join(html), "\n\n".join(plain))


def fallback_part(page: Page, calls: Sequence[CallOutcome], total: int, tr: Translator) -> Part:
    """The page with commands to type, for when its buttons cannot be sent."""
    part = page_part(page, calls, total, tr)
    lines = "\n".join(f"{n}. /approve {c.approval.id} · /deny {c.approval.id}"
                      for n, c in enumerate(calls, start=page.first))
    tail = "\n\n" + tr._("Reply per call:") + f"\n{lines}"
    return Part(part.html + escape(tail), part.plain + tail)


def page_keyboard(page: Page, calls: Sequence[CallOutcome], batch_pending: bool,
                  tr: Translator) -> InlineKeyboardMarkup | None:
    """"Approve all" / "Deny all" while any call of the batch waits; a row per pending call.
    Labels in the reader's language; callback data the same in every language."""
    rows: list[list[InlineKeyboardButton]] = []
    if batch_pending:
        batch = calls[0].approval.batch
        rows.append([
            InlineKeyboardButton(tr._("Approve all"), callback_data=batch_callback(batch, "a")),
            InlineKeyboardButton(tr._("Deny all"), callback_data=batch_callback(batch, "d"))])
    for number, call in enumerate(calls, start=page.first):
        if call.choice:
            continue
        view = call.approval
        row = [InlineKeyboardButton(tr._("Approve {number}", number=number),
                                    callback_data=callback_data(view.id, "a")),
               InlineKeyboardButton(tr._("Deny {number}", number=number),
                                    callback_data=callback_data(view.id, "d"))]
        if view.always:
            label = tr._("Always {number}: {scope}", number=number, scope=tr.say(view.always))
            if len(label) > MAX_LABEL:
                label = label[:MAX_LABEL - 1].rsplit(" ", 1)[0] + "…"   # named in full above
            row.append(InlineKeyboardButton(label, callback_data=callback_data(view.id, "s")))
        rows.append(row)
    return InlineKeyboardMarkup(rows) if rows else None


def _outcome_line(call: CallOutcome, tr: Translator) -> str:
    if not call.choice:
        return ""
    return outcome_line(call.choice, call.resolver, call.resolved_at, tr)


def redrawn(outcome: ApprovalResolved, tr: Translator) -> tuple[Part, InlineKeyboardMarkup | None]:
    """The page showing `outcome.approval`, as the batch stands now."""
    views = [call.approval for call in outcome.batch]
    page = page_of(views, outcome.approval.id, tr)
    if page is None:    # cannot happen: the call is one of its batch
        page = Page((outcome.approval,), 1, frozenset())
    ids = {view.id for view in page.calls}
    calls = [call for call in outcome.batch if call.approval.id in ids]
    pending = any(not call.choice for call in outcome.batch)
    return page_part(page, calls, len(views), tr), page_keyboard(page, calls, pending, tr)
