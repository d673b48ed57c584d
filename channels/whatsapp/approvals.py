"""How an approval request looks on WhatsApp: an interactive card with three reply buttons.

WhatsApp gives a card's body 1,024 characters and at most three reply buttons (titles up to 20
characters, ids up to 256): exactly Approve / Deny / Always. A button's id carries only the
request id and the choice ("ap:<id>:a|d|s"); everything else is looked up in the store when it
is tapped, so a replayed or forged tap can change nothing by itself. A preview that does not fit
the body is sent whole before the card (one message, or a text document when it is longer than
a message), never cut: a truncated end could hide a command.

WhatsApp cannot edit a sent message, so an outcome is a new message sent as a reply to the card
(quoting it), and a tap on an old card is answered with why nothing changed ("already approved
by …"). Several calls of one step: one card per call, after an interactive list offering
"Approve all" / "Deny all" ("ab:<batch>:a|d"). Every word but the preview, the tool and who
asked is the reader's language (`tr`), within those limits in each language, and times are in
the reader's format and time zone.
"""

from __future__ import annotations

import re
from typing import Any

from bot.core.approval_cards import (
    ANSWER_LABELS,
    ID_PATTERN,
    RISK_NAMES,
    SUPERSEDED,
    SUPERSEDED_LABEL,
    ApprovalView,
    CallOutcome,
    batch_heading,
    preview_text,
)
from bot.language.translator import Translator
from channels.whatsapp import texts
from channels.whatsapp.rendering import MESSAGE_LIMIT, plain_of

BODY_LIMIT = 1024
TITLE_LIMIT = 20
ROW_TITLE_LIMIT = 24
HEADER_LIMIT = 60
CALLBACK = re.compile(rf"^ap:({ID_PATTERN}):([ads])$")
BATCH_CALLBACK = re.compile(rf"^ab:({ID_PATTERN}):([ad])$")
CHOICE_BY_LETTER = {"a": "approve", "d": "deny", "s": "always"}
RISK_ICON = {"low": "🟢", "medium": "🟠", "high": "🔴"}
ICON = {"approve": "✅", "deny": "❌", "always": "✅"}
PREVIEW_MESSAGE_ROOM = MESSAGE_LIMIT - 200   # the heading and the ``` fences


def parse_tap(reply_id: str) -> tuple[str, str, str] | None:
    """("one" | "all", request or batch id, choice) from a reply id, or None when not ours."""
    if match := CALLBACK.match(reply_id or ""):
        return "one", match.group(1), CHOICE_BY_LETTER[match.group(2)]
    if match := BATCH_CALLBACK.match(reply_id or ""):
        return "all", match.group(1), CHOICE_BY_LETTER[match.group(2)]
    return None


def risk_name(risk: str, tr: Translator) -> str:
    name = RISK_NAMES.get(risk)
    return tr._(name) if name else risk


def _head(view: ApprovalView, tr: Translator, number: int = 0, total: int = 0) -> list[str]:
    lines = [f"🔐 *{tr._('Approval needed')}*"]
    if total:
        lines.append(tr._(texts.BATCH_CALL, number=number, total=total))
    risk = f"{RISK_ICON.get(view.risk, '⚪')} {risk_name(view.risk, tr)}"
    lines += [tr._("Tool: {tool}", tool=view.tool), tr._("Risk: {risk}", risk=risk),
              tr._("Requested by: {who}", who=view.sender)]
    return lines


def _tail(view: ApprovalView, tr: Translator) -> list[str]:
    lines = [tr._("Expires at {time}.", time=tr.clock(view.expires_at))]
    if view.always:
        lines.append(tr._("\"Always\" would allow {scope}, up to {risk} risk, until /new.",
                          scope=tr.say(view.always), risk=risk_name(view.risk, tr)))
    return lines


def _compose(view: ApprovalView, summary_block: str, tr: Translator, number: int,
             total: int) -> str:
    return "\n".join(_head(view, tr, number, total)) + "\n\n" + summary_block + "\n\n" + \
        "\n".join(_tail(view, tr))


def _inline(view: ApprovalView, tr: Translator) -> str:
    return _code(preview_text(view.summary, tr))


def preview_fits(view: ApprovalView, tr: Translator, number: int = 0, total: int = 0) -> bool:
    return len(_compose(view, _inline(view, tr), tr, number, total)) <= BODY_LIMIT


def _code(text: str) -> str:
    return f"```{text}```"


def card_body(view: ApprovalView, tr: Translator, number: int = 0, total: int = 0) -> str:
    """The card's text: the preview inside it when it fits, else a pointer to where it was sent."""
    if preview_fits(view, tr, number, total):
        return _compose(view, _inline(view, tr), tr, number, total)
    pointer = tr._(texts.PREVIEW_ABOVE if preview_in_message(view, tr) else texts.PREVIEW_DOCUMENT)
    return _compose(view, pointer, tr, number, total)[:BODY_LIMIT]


def preview_in_message(view: ApprovalView, tr: Translator) -> bool:
    """A preview too long for the card goes out as one text message when it fits one, else as
    a document (so that it arrives whole, in one piece)."""
    return len(preview_text(view.summary, tr)) <= PREVIEW_MESSAGE_ROOM


def preview_message(view: ApprovalView, tr: Translator) -> str:
    return f"{tr._(texts.PREVIEW_HEAD, tool=view.tool)}\n{_code(preview_text(view.summary, tr))}"


def buttons(view: ApprovalView, tr: Translator) -> list[dict[str, Any]]:
    """Approve / Deny / Always in the reader's language; the ids the same in every one."""
    choices = [("a", tr._("Approve")), ("d", tr._("Deny"))]
    if view.always:
        choices.append(("s", tr._("Always")))
    return [{"type": "reply", "reply": {"id": f"ap:{view.id}:{letter}",
                                        "title": title[:TITLE_LIMIT]}}
            for letter, title in choices]


def card(view: ApprovalView, tr: Translator, number: int = 0, total: int = 0) -> dict[str, Any]:
    """The interactive message (without `to`)."""
    return {"type": "interactive", "interactive": {
        "type": "button", "body": {"text": card_body(view, tr, number, total)},
        "action": {"buttons": buttons(view, tr)}}}


def card_fallback(view: ApprovalView, tr: Translator, number: int = 0, total: int = 0) -> str:
    """The card as plain text with commands, for when the interactive message is refused."""
    body = plain_of(card_body(view, tr, number, total))
    commands = tr._("Reply /approve {id} to allow it or /deny {id} to refuse (expires at {time}).",
                    id=view.id, time=tr.clock(view.expires_at))
    return f"{body}\n\n{commands}"


def batch_heading_text(views: tuple[ApprovalView, ...], tr: Translator) -> str:
    """"Approval needed: 3 calls (requested by …)", the list's header and what a record of it
    says."""
    _, title, _ = batch_heading(1, [CallOutcome(view, "") for view in views], len(views), tr)
    return f"🔐 {title} {tr._(texts.BATCH_REQUESTED, who=views[0].sender)}"


def batch_list_body(total: int, tr: Translator) -> str:
    return tr.ngettext("Answer the {n} call at once, or each card on its own.",
                       "Answer all {n} calls at once, or each card on its own.", total)


def batch_list(views: tuple[ApprovalView, ...], tr: Translator) -> dict[str, Any]:
    """Approve all / Deny all for a batch, as an interactive list."""
    first = views[0]
    rows = [{"id": f"ab:{first.batch}:a", "title": tr._("Approve all")[:ROW_TITLE_LIMIT]},
            {"id": f"ab:{first.batch}:d", "title": tr._("Deny all")[:ROW_TITLE_LIMIT]}]
    answer_all = tr._(texts.BATCH_LIST_BUTTON)
    return {"type": "interactive", "interactive": {
        "type": "list",
        "header": {"type": "text", "text": batch_heading_text(views, tr)[:HEADER_LIMIT]},
        "body": {"text": batch_list_body(len(views), tr)},
        "action": {"button": answer_all[:TITLE_LIMIT],
                   "sections": [{"title": answer_all[:ROW_TITLE_LIMIT], "rows": rows}]}}}


def outcome_line(choice: str, who: str, when: float, tr: Translator) -> str:
    """How an answered request ends: who decided what, when (in the reader's time)."""
    if choice == "expire" and who == SUPERSEDED:
        return tr._("⌛ {outcome} — nothing ran.", outcome=tr._(SUPERSEDED_LABEL))
    if choice == "expire":
        return tr._("⌛ Expired at {time} — nothing ran.", time=tr.clock(when))
    label = f"{ICON[choice]} {tr._(ANSWER_LABELS[choice])}" if choice in ANSWER_LABELS else choice
    return tr._("{outcome} by {who} at {time}.", outcome=label, who=who, time=tr.clock(when))


def message_ref(wa_id: str, wamid: str) -> str:
    """What is stored with a request: where its card was shown (WhatsApp chats are one to one,
    so the wa_id is also whose language the card is in)."""
    return f"{wa_id}|{wamid}"


def parse_ref(ref: str | None) -> tuple[str, str] | None:
    wa_id, bar, wamid = (ref or "").partition("|")
    return (wa_id, wamid) if bar and wa_id.isdigit() and wamid else None
