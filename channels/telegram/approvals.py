"""How an approval request looks on Telegram: the message, its buttons and its outcome.

The dry_run summary can contain text the model or a web page chose, so it is always HTML-escaped
and shown in a <pre> block, exactly as written; every other word is the reader's language (`tr`:
the requester's on their message, each approver's on their own copy). Callback data carries only
the request id and the choice ("ap:<id>:a|d|s", far below Telegram's 64-byte limit), the same in
every language; everything else is looked up in the store when the button is tapped, so a forged
or replayed tap can change nothing by itself.
"""

from __future__ import annotations

import re

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from bot.core.approval_cards import (
    ANSWER_LABELS,
    ID_PATTERN,
    RISK_NAMES,
    SUPERSEDED,
    SUPERSEDED_LABEL,
    ApprovalView,
    preview_text,
)
from bot.language.translator import Translator
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


def keyboard(view: ApprovalView, tr: Translator) -> InlineKeyboardMarkup | None:
    """Approve / Deny, and "Always: <what it covers>" when the request offers it; None when the
    id would not fit in callback data. The labels are the reader's language; the data is not."""
    if len(callback_data(view.id, "a").encode()) > MAX_CALLBACK_BYTES:
        return None
    rows = [[InlineKeyboardButton(tr._("Approve"), callback_data=callback_data(view.id, "a")),
             InlineKeyboardButton(tr._("Deny"), callback_data=callback_data(view.id, "d"))]]
    if view.always:
        label = tr._("Always: {scope}", scope=tr.say(view.always))
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


def risk_text(risk: str, tr: Translator) -> str:
    """A risk level as the reader says it, with its colour."""
    name = RISK_NAMES.get(risk)
    return f"{RISK_ICON.get(risk, '⚪')} {tr._(name) if name else risk}"


def preview_parts(view: ApprovalView, tr: Translator) -> list[Part]:
    """A preview too long for the request message, as messages sent before it, so that the
    person approving sees every character of the call (a truncated end could hide a command).
    Empty when the preview fits in the request itself."""
    summary = preview_text(view.summary, tr)
    if utf16_len(summary) <= MAX_SUMMARY_UNITS:
        return []
    chunks, rest = [], summary
    while rest:
        chunk = truncate(rest, MAX_SUMMARY_UNITS, "")
        chunks.append(chunk)
        rest = rest[len(chunk):]
    total = len(chunks)
    titles = [tr._("🔎 Preview {n}/{total} of the call waiting for approval:", n=n, total=total)
              for n in range(1, total + 1)]
    return [Part(f"{escape(title)}\n<pre>{escape(c)}</pre>", f"{title}\n{c}")
            for title, c in zip(titles, chunks, strict=True)]


def _body(view: ApprovalView, tr: Translator) -> Part:
    summary = preview_text(view.summary, tr)
    if utf16_len(summary) > MAX_SUMMARY_UNITS:
        summary = tr.ngettext("(the full preview is in the {n} message above)",
                              "(the full preview is in the {n} messages above)",
                              len(preview_parts(view, tr)))
    title, risk = tr._("Approval needed"), risk_text(view.risk, tr)
    tool, asked = tr._("Tool: {tool}", tool="\0"), tr._("Requested by: {who}", who=view.sender)
    risk_line = tr._("Risk: {risk}", risk=risk)
    html = (f"🔐 <b>{escape(title)}</b>\n"
            + escape(tool).replace("\0", f"<code>{escape(view.tool)}</code>") + "\n"
            f"{escape(risk_line)}\n{escape(asked)}\n\n<pre>{escape(summary)}</pre>")
    plain = (f"🔐 {title}\n{tool.replace(chr(0), view.tool)}\n{risk_line}\n{asked}\n\n"
             f"{summary}")
    return Part(html, plain)


def always_line(view: ApprovalView, tr: Translator, number: int | None = None) -> str:
    """What an "Always" tap would allow, in the reader's words."""
    values = {"scope": tr.say(view.always), "risk": risk_text(view.risk, tr)}
    if number is None:
        return tr._("\"Always\" would allow {scope}, up to {risk} risk, until /new.", **values)
    return tr._("\"Always {number}\" would allow {scope}, up to {risk} risk, until /new.",
                number=number, **values)


def request_message(view: ApprovalView, tr: Translator) -> Part:
    """The request as shown with buttons."""
    body = _body(view, tr)
    tail = "\n\n" + tr._("Expires at {time}.", time=tr.clock(view.expires_at))
    if view.always:
        tail += "\n" + always_line(view, tr)
    return Part(body.html + escape(tail), body.plain + tail)


def request_fallback(view: ApprovalView, tr: Translator) -> Part:
    """The request as plain commands, for when the buttons cannot be sent."""
    body = _body(view, tr)
    tail = "\n\n" + tr._("Reply /approve {id} to allow it or /deny {id} to refuse (expires at "
                          "{time}).", id=view.id, time=tr.clock(view.expires_at))
    return Part(body.html + escape(tail), body.plain + tail)


def outcome_line(choice: str, who: str, when: float, tr: Translator) -> str:
    """How an answered request ends: who decided what, when (in the reader's time)."""
    if choice == "expire" and who == SUPERSEDED:
        return tr._("⌛ {outcome} — nothing ran.", outcome=tr._(SUPERSEDED_LABEL))
    if choice == "expire":
        return tr._("⌛ Expired at {time} — nothing ran.", time=tr.clock(when))
    label = f"{ICON[choice]} {tr._(ANSWER_LABELS[choice])}" if choice in ANSWER_LABELS else choice
    return tr._("{outcome} by {who} at {time}.", outcome=label, who=who, time=tr.clock(when))


def outcome_message(view: ApprovalView, choice: str, who: str, when: float, tr: Translator,
                    note: str = "") -> Part:
    """The request once answered: same body, the outcome instead of the buttons (and what
    became of the call, when known)."""
    body = _body(view, tr)
    line = "\n\n" + outcome_line(choice, who, when, tr)
    if note:
        line += f"\n{tr.say(note)}"
    return Part(body.html + escape(line), body.plain + line)
