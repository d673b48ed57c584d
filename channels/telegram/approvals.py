"""How an approval request looks on Telegram: the message, its buttons and its outcome.

The dry_run summary can contain text the model or a web page chose, so it is always HTML-escaped
and shown in a <pre> block. Callback data carries only the request id and the choice
("ap:<id>:a|d|s", far below Telegram's 64-byte limit); everything else is looked up in the store
when the button is tapped, so a forged or replayed tap can change nothing by itself.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from bot.approvals.records import ANSWER_LABELS, ID_PATTERN
from bot.core.events import ApprovalView
from channels.telegram.rendering import Part, escape, truncate, utf16_len

CALLBACK_PREFIX = "ap:"
CALLBACK_PATTERN = re.compile(rf"^ap:({ID_PATTERN}):([ads])$")
CHOICE_BY_LETTER = {"a": "approve", "d": "deny", "s": "always"}
MAX_CALLBACK_BYTES = 64
MAX_SUMMARY_UNITS = 3000
RISK_ICON = {"low": "🟢", "medium": "🟠", "high": "🔴"}
ICON = {"approve": "✅", "deny": "❌", "always": "✅"}
MAX_ALWAYS_LABEL = 60


def callback_data(approval_id: str, letter: str) -> str:
    return f"{CALLBACK_PREFIX}{approval_id}:{letter}"


def parse_callback(data: str | None) -> tuple[str, str] | None:
    """(approval id, choice) from button data, or None when the data is not ours/malformed."""
    match = CALLBACK_PATTERN.match(data or "")
    if match is None:
        return None
    return match.group(1), CHOICE_BY_LETTER[match.group(2)]


def keyboard(view: ApprovalView) -> InlineKeyboardMarkup | None:
    """Approve / Deny, and "Always: <what it covers>" when the request offers it; None when the
    id would not fit in callback data."""
    if len(callback_data(view.id, "a").encode()) > MAX_CALLBACK_BYTES:
        return None
    rows = [[InlineKeyboardButton("Approve", callback_data=callback_data(view.id, "a")),
             InlineKeyboardButton("Deny", callback_data=callback_data(view.id, "d"))]]
    if view.always:
        label = f"Always: {view.always}"
        if len(label) > MAX_ALWAYS_LABEL:
            label = label[:MAX_ALWAYS_LABEL - 1] + "…"   # the request text names it in full
        rows.append([InlineKeyboardButton(label, callback_data=callback_data(view.id, "s"))])
    return InlineKeyboardMarkup(rows)


def belongs_to(markup: InlineKeyboardMarkup | None, approval_id: str) -> bool:
    """True when the tapped message really carries this request's buttons."""
    if markup is None:
        return False
    prefix = f"{CALLBACK_PREFIX}{approval_id}:"
    return any(isinstance(button.callback_data, str) and button.callback_data.startswith(prefix)
               for row in markup.inline_keyboard for button in row)


def clock(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%H:%M UTC")


def preview_parts(view: ApprovalView) -> list[Part]:
    """A preview too long for the request message, as messages sent before it, so that the
    person approving sees every character of the call (a truncated end could hide a command).
    Empty when the preview fits in the request itself."""
    summary = view.summary or ""
    if utf16_len(summary) <= MAX_SUMMARY_UNITS:
        return []
    chunks, rest = [], summary
    while rest:
        chunk = truncate(rest, MAX_SUMMARY_UNITS, "")
        chunks.append(chunk)
        rest = rest[len(chunk):]
    total = len(chunks)
    return [Part(f"🔎 Preview {n}/{total} of the call waiting for approval:\n<pre>{escape(c)}</pre>",
                 f"🔎 Preview {n}/{total} of the call waiting for approval:\n{c}")
            for n, c in enumerate(chunks, start=1)]


def _body(view: ApprovalView) -> Part:
    summary = view.summary or "(no summary)"
    if utf16_len(summary) > MAX_SUMMARY_UNITS:
        summary = f"(the full preview is in the {len(preview_parts(view))} messages above)"
    icon = RISK_ICON.get(view.risk, "⚪")
    html = (f"🔐 <b>Approval needed</b>\n"
            f"Tool: <code>{escape(view.tool)}</code>\n"
            f"Risk: {icon} {escape(view.risk)}\n"
            f"Requested by: {escape(view.sender)}\n\n"
            f"<pre>{escape(summary)}</pre>")
    plain = (f"🔐 Approval needed\nTool: {view.tool}\nRisk: {icon} {view.risk}\n"
             f"Requested by: {view.sender}\n\n{summary}")
    return Part(html, plain)


def request_message(view: ApprovalView) -> Part:
    """The request as shown with buttons."""
    body = _body(view)
    tail = f"\n\nExpires at {clock(view.expires_at)}."
    if view.always:
        tail += f"\n\"Always\" would allow {view.always}, up to {view.risk} risk, until /new."
    return Part(body.html + escape(tail), body.plain + tail)


def request_fallback(view: ApprovalView) -> Part:
    """The request as plain commands, for when the buttons cannot be sent."""
    body = _body(view)
    tail = (f"\n\nReply /approve {view.id} to allow it or /deny {view.id} to refuse "
            f"(expires at {clock(view.expires_at)}).")
    return Part(body.html + escape(tail), body.plain + tail)


def outcome_message(view: ApprovalView, choice: str, who: str, when: float,
                    note: str = "") -> Part:
    """The request once answered: same body, the outcome instead of the buttons (and what
    became of the call, when known)."""
    body = _body(view)
    if choice == "expire":
        line = f"\n\n⌛ Expired at {clock(when)} — nothing ran."
    else:
        label = f"{ICON[choice]} {ANSWER_LABELS[choice]}" if choice in ANSWER_LABELS else choice
        line = f"\n\n{label} by {who} at {clock(when)}."
    if note:
        line += f"\n{note}"
    return Part(body.html + escape(line), body.plain + line)
