"""How an approval request looks on Slack: a Block Kit card, its buttons and its outcome.

The card names the tool, the risk and who asked, then the WHOLE preview: `rich_text`
preformatted blocks of at most 3,000 characters each (the preview is text the model or a web
page chose, so it is never read as mrkdwn), within Slack's 50 blocks a message. A preview that
needs more blocks than a message has is uploaded as a snippet file just before the card, which
then says so: a preview is never cut, since a hidden end could hide a command.

Action ids carry only the request id and the choice (`ap:<id>:a|d|s`); everything else is
looked up in the store when the button is tapped, so a forged or replayed tap can change
nothing by itself. The plain twin of a card (sent when Slack refuses the blocks) names the
/approve and /deny commands instead. Every word but the preview, the tool and who asked is the
reader's language (`tr`: the requester's on their card, each approver's on their own copy), and
times are in the reader's format and time zone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from bot.core.approval_cards import (
    ANSWER_LABELS,
    ID_PATTERN,
    RISK_NAMES,
    SUPERSEDED,
    SUPERSEDED_LABEL,
    ApprovalView,
    preview_text,
)
from bot.core.identity import Sender
from bot.language.translator import Translator
from channels.slack import texts
from channels.slack.rendering import SECTION_LIMIT, Part, cut, escape, shorten

ACTION_PATTERN = re.compile(rf"^ap:({ID_PATTERN}):([ads])$")
CHOICE_BY_LETTER = {"a": "approve", "d": "deny", "s": "always"}
RISK_ICON = {"low": "🟢", "medium": "🟠", "high": "🔴"}
ICON = {"approve": "✅", "deny": "❌", "always": "✅"}
MAX_BLOCKS = 50
MAX_BUTTON_TEXT = 75
CARD_FRAME_BLOCKS = 4     # fields, expiry, buttons, room for the outcome line
# "channel:ts", and since the language follows the reader, ":user" of whoever reads that copy
_REF = re.compile(r"([CDG][A-Z0-9]{2,20}):(\d{1,12}\.\d{1,9})(?::([UW][A-Z0-9]{2,20}))?")


def action_id(approval_id: str, letter: str) -> str:
    return f"ap:{approval_id}:{letter}"


def parse_action(action: str | None) -> tuple[str, str] | None:
    """(approval id, choice) from a button's action id, or None when it is not ours."""
    match = ACTION_PATTERN.match(action or "")
    return (match.group(1), CHOICE_BY_LETTER[match.group(2)]) if match else None


def message_ref(channel: str, ts: str, reader: str = "") -> str:
    """Where a request is shown ("channel:ts", with ":user" of its reader when known), stored
    with it so that every copy can be redrawn later, in its own reader's language."""
    return f"{channel}:{ts}:{reader}" if reader else f"{channel}:{ts}"


def parse_ref(ref: str | None) -> tuple[str, str] | None:
    match = _REF.fullmatch(ref or "")
    return (match.group(1), match.group(2)) if match else None


def reader_of(ref: str | None) -> str:
    """The Slack user who reads the copy at `ref` ("" for a ref stored without one)."""
    match = _REF.fullmatch(ref or "")
    return (match.group(3) or "") if match else ""


def button(text: str, action: str, *, style: str = "", value: str = "") -> dict[str, Any]:
    element: dict[str, Any] = {"type": "button", "action_id": action, "value": value or action,
                               "text": {"type": "plain_text", "text": shorten(text, MAX_BUTTON_TEXT),
                                        "emoji": True}}
    if style:
        element["style"] = style
    return element


def section(mrkdwn: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": mrkdwn[:SECTION_LIMIT]}}


def context(mrkdwn: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": mrkdwn[:SECTION_LIMIT]}]}


def preview_blocks(summary: str, tr: Translator) -> list[dict[str, Any]]:
    """The preview, whole, as preformatted rich text (one block per 3,000 characters)."""
    return [{"type": "rich_text", "elements": [{"type": "rich_text_preformatted", "elements": [
        {"type": "text", "text": piece}]}]} for piece in cut(preview_text(summary, tr),
                                                             SECTION_LIMIT)]


def fits_inline(summary: str, room: int, tr: Translator) -> bool:
    return len(preview_blocks(summary, tr)) <= room


def requester(sender: str) -> str:
    """Who asked: a Slack user as a mention (the reader sees the name) with the sender id."""
    parsed = Sender.parse(sender)
    if parsed.channel == "slack":
        return f"<@{parsed.user_id}> ({escape(sender)})"
    return escape(sender)


def risk_name(risk: str, tr: Translator) -> str:
    name = RISK_NAMES.get(risk)
    return tr._(name) if name else risk


def risk_text(risk: str, tr: Translator) -> str:
    """A risk level as the reader says it, with its colour."""
    return f"{RISK_ICON.get(risk, '⚪')} {risk_name(risk, tr)}"


def fields(view: ApprovalView, tr: Translator) -> str:
    return "\n".join((tr._("Tool: {tool}", tool=f"`{escape(view.tool)}`"),
                      tr._("Risk: {risk}", risk=risk_text(view.risk, tr)),
                      tr._("Requested by: {who}", who=requester(view.sender))))


def title(tr: Translator) -> str:
    return f"🔐 *{tr._('Approval needed')}*"


def always_line(view: ApprovalView, tr: Translator, number: int | None = None) -> str:
    """What an "Always" tap would allow, in the reader's words."""
    values = {"scope": escape(tr.say(view.always)), "risk": risk_name(view.risk, tr)}
    if number is None:
        return tr._("\"Always\" would allow {scope}, up to {risk} risk, until /new.", **values)
    return tr._("\"Always {number}\" would allow {scope}, up to {risk} risk, until /new.",
                number=number, **values)


def expires_line(view: ApprovalView, tr: Translator) -> str:
    return tr._("Expires at {time}.", time=tr.clock(view.expires_at))


@dataclass(frozen=True)
class Card:
    """A request as sent: its blocks, its text twin, and the preview to upload first (if any)."""

    blocks: list[dict[str, Any]]
    part: Part
    file_preview: str = ""


def _body(view: ApprovalView, tr: Translator) -> tuple[list[dict[str, Any]], str, bool]:
    """The card's body blocks, its plain text and whether the preview goes in a file."""
    summary = preview_text(view.summary, tr)
    inline = fits_inline(summary, MAX_BLOCKS - CARD_FRAME_BLOCKS, tr)
    head = f"{title(tr)}\n{fields(view, tr)}"
    blocks = [section(head)]
    in_file = tr.ngettext("The full preview ({n} character) is in the file above.",
                          "The full preview ({n} characters) is in the file above.", len(summary))
    if inline:
        blocks.extend(preview_blocks(summary, tr))
    else:
        blocks.append(context(in_file))
    plain = f"{head}\n\n" + (summary if inline else in_file)
    return blocks, plain, not inline


def request_card(view: ApprovalView, tr: Translator) -> Card:
    blocks, plain, in_file = _body(view, tr)
    tail = expires_line(view, tr)
    if view.always:
        tail += "\n" + always_line(view, tr)
    blocks.append(context(tail))
    buttons = [button(tr._("Approve"), action_id(view.id, "a"), style="primary"),
               button(tr._("Deny"), action_id(view.id, "d"), style="danger")]
    if view.always:
        buttons.append(button(tr._("Always: {scope}", scope=tr.say(view.always)),
                              action_id(view.id, "s")))
    blocks.append({"type": "actions", "block_id": f"ap:{view.id}", "elements": buttons})
    commands = tr._("Reply /approve {id} to allow it or /deny {id} to refuse (expires at {time}).",
                    id=view.id, time=tr.clock(view.expires_at))
    always = f"\n\n{always_line(view, tr)}" if view.always else ""
    notification = escape(tr._(texts.APPROVAL_NOTIFICATION, tool=view.tool,
                               risk=risk_name(view.risk, tr)))
    return Card(blocks, Part(notification, f"{plain}{always}\n\n{commands}"),
                preview_text(view.summary, tr) if in_file else "")


def outcome_line(choice: str, who: str, when: float, tr: Translator) -> str:
    """How an answered request ends: who decided what, when (in the reader's time)."""
    if choice == "expire" and who == SUPERSEDED:
        return tr._("⌛ {outcome} — nothing ran.", outcome=tr._(SUPERSEDED_LABEL))
    if choice == "expire":
        return tr._("⌛ Expired at {time} — nothing ran.", time=tr.clock(when))
    label = f"{ICON[choice]} {tr._(ANSWER_LABELS[choice])}" if choice in ANSWER_LABELS \
        else escape(choice)
    return tr._("{outcome} by {who} at {time}.", outcome=label, who=mention_of(who),
                time=tr.clock(when))


def outcome_card(view: ApprovalView, choice: str, who: str, when: float, tr: Translator,
                 note: str = "") -> tuple[list[dict[str, Any]], Part]:
    """The request once answered: the same body, the outcome instead of the buttons."""
    blocks, plain, _ = _body(view, tr)
    line = outcome_line(choice, who, when, tr)
    if note:
        line += f"\n{escape(tr.say(note))}"
    blocks.append(section(line))
    return blocks, Part(line, f"{plain}\n\n{line}")


def mention_of(resolver: str) -> str:
    """A Slack resolver as a mention (the reader sees their name), anyone else as written."""
    try:
        parsed = Sender.parse(resolver)
    except ValueError:
        return escape(resolver)
    return f"<@{parsed.user_id}>" if parsed.channel == "slack" else escape(resolver)


def without_buttons(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A card's blocks before it is recorded: everything but its buttons (its text carries the
    /approve and /deny commands), so no button exists that a restart could not end."""
    return [block for block in blocks if block.get("type") != "actions"]
