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
"Approve all" / "Deny all" ("ab:<batch>:a|d").
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from bot.approvals.records import ANSWER_LABELS, ID_PATTERN, SUPERSEDED
from bot.core.events import ApprovalView
from channels.whatsapp import texts
from channels.whatsapp.rendering import MESSAGE_LIMIT, plain_of

BODY_LIMIT = 1024
TITLE_LIMIT = 20
ROW_TITLE_LIMIT = 24
CALLBACK = re.compile(rf"^ap:({ID_PATTERN}):([ads])$")
BATCH_CALLBACK = re.compile(rf"^ab:({ID_PATTERN}):([ad])$")
CHOICE_BY_LETTER = {"a": "approve", "d": "deny", "s": "always"}
RISK_ICON = {"low": "🟢", "medium": "🟠", "high": "🔴"}
ICON = {"approve": "✅", "deny": "❌", "always": "✅"}
PREVIEW_MESSAGE_ROOM = MESSAGE_LIMIT - 200   # the heading and the ``` fences


def clock(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%H:%M UTC")


def parse_tap(reply_id: str) -> tuple[str, str, str] | None:
    """("one" | "all", request or batch id, choice) from a reply id, or None when not ours."""
    if match := CALLBACK.match(reply_id or ""):
        return "one", match.group(1), CHOICE_BY_LETTER[match.group(2)]
    if match := BATCH_CALLBACK.match(reply_id or ""):
        return "all", match.group(1), CHOICE_BY_LETTER[match.group(2)]
    return None


def _head(view: ApprovalView, number: int = 0, total: int = 0) -> list[str]:
    lines = [texts.APPROVAL_TITLE]
    if total:
        lines.append(texts.BATCH_CALL.format(number=number, total=total))
    lines += [texts.APPROVAL_TOOL.format(tool=view.tool),
              texts.APPROVAL_RISK.format(icon=RISK_ICON.get(view.risk, "⚪"), risk=view.risk),
              texts.APPROVAL_REQUESTER.format(sender=view.sender)]
    return lines


def _tail(view: ApprovalView) -> list[str]:
    lines = [texts.APPROVAL_EXPIRES.format(clock=clock(view.expires_at))]
    if view.always:
        lines.append(texts.APPROVAL_ALWAYS.format(scope=view.always, risk=view.risk))
    return lines


def _compose(view: ApprovalView, summary_block: str, number: int, total: int) -> str:
    return "\n".join(_head(view, number, total)) + "\n\n" + summary_block + "\n\n" + \
        "\n".join(_tail(view))


def preview_fits(view: ApprovalView, number: int = 0, total: int = 0) -> bool:
    return len(_compose(view, _code(view.summary or texts.APPROVAL_NO_SUMMARY), number,
                        total)) <= BODY_LIMIT


def _code(text: str) -> str:
    return f"```{text}```"


def card_body(view: ApprovalView, number: int = 0, total: int = 0) -> str:
    """The card's text: the preview inside it when it fits, else a pointer to where it was sent."""
    if preview_fits(view, number, total):
        return _compose(view, _code(view.summary or texts.APPROVAL_NO_SUMMARY), number, total)
    pointer = texts.APPROVAL_PREVIEW_ABOVE if preview_in_message(view) \
        else texts.APPROVAL_PREVIEW_DOCUMENT
    return _compose(view, pointer, number, total)[:BODY_LIMIT]


def preview_in_message(view: ApprovalView) -> bool:
    """A preview too long for the card goes out as one text message when it fits one, else as
    a document (so that it arrives whole, in one piece)."""
    return len(view.summary or "") <= PREVIEW_MESSAGE_ROOM


def preview_message(view: ApprovalView) -> str:
    return f"{texts.APPROVAL_PREVIEW_HEAD.format(tool=view.tool)}\n{_code(view.summary)}"


def buttons(view: ApprovalView) -> list[dict[str, Any]]:
    choices = [("a", texts.BUTTON_APPROVE), ("d", texts.BUTTON_DENY)]
    if view.always:
        choices.append(("s", texts.BUTTON_ALWAYS))
    return [{"type": "reply", "reply": {"id": f"ap:{view.id}:{letter}",
                                        "title": title[:TITLE_LIMIT]}}
            for letter, title in choices]


def card(view: ApprovalView, number: int = 0, total: int = 0) -> dict[str, Any]:
    """The interactive message (without `to`)."""
    return {"type": "interactive", "interactive": {
        "type": "button", "body": {"text": card_body(view, number, total)},
        "action": {"buttons": buttons(view)}}}


def card_fallback(view: ApprovalView, number: int = 0, total: int = 0) -> str:
    """The card as plain text with commands, for when the interactive message is refused."""
    body = plain_of(card_body(view, number, total))
    return f"{body}\n\n{texts.APPROVAL_FALLBACK.format(id=view.id, clock=clock(view.expires_at))}"


def batch_list(views: tuple[ApprovalView, ...]) -> dict[str, Any]:
    """Approve all / Deny all for a batch, as an interactive list."""
    first = views[0]
    rows = [{"id": f"ab:{first.batch}:a", "title": texts.BATCH_APPROVE_ALL[:ROW_TITLE_LIMIT]},
            {"id": f"ab:{first.batch}:d", "title": texts.BATCH_DENY_ALL[:ROW_TITLE_LIMIT]}]
    return {"type": "interactive", "interactive": {
        "type": "list",
        "header": {"type": "text", "text": plain_of(texts.BATCH_TITLE.format(
            total=len(views), sender=first.sender))[:60]},
        "body": {"text": texts.BATCH_LIST_BODY.format(total=len(views))},
        "action": {"button": texts.BATCH_LIST_BUTTON[:TITLE_LIMIT],
                   "sections": [{"title": texts.BATCH_LIST_BUTTON[:ROW_TITLE_LIMIT],
                                 "rows": rows}]}}}


def outcome_line(choice: str, who: str, when: float) -> str:
    if choice == "expire":
        if who == SUPERSEDED:
            return texts.OUTCOME_SUPERSEDED
        return texts.OUTCOME_EXPIRED.format(clock=clock(when))
    label = ANSWER_LABELS.get(choice, choice)
    return texts.OUTCOME.format(icon=ICON.get(choice, ""), label=label, who=who,
                                clock=clock(when))


def message_ref(wa_id: str, wamid: str) -> str:
    """What is stored with a request: where its card was shown."""
    return f"{wa_id}|{wamid}"


def parse_ref(ref: str | None) -> tuple[str, str] | None:
    wa_id, bar, wamid = (ref or "").partition("|")
    return (wa_id, wamid) if bar and wa_id.isdigit() and wamid else None
