"""How an approval request looks on Slack: a Block Kit card, its buttons and its outcome.

The card names the tool, the risk and who asked, then the WHOLE preview: `rich_text`
preformatted blocks of at most 3,000 characters each (the preview is text the model or a web
page chose, so it is never read as mrkdwn), within Slack's 50 blocks a message. A preview that
needs more blocks than a message has is uploaded as a snippet file just before the card, which
then says so: a preview is never cut, since a hidden end could hide a command.

Action ids carry only the request id and the choice (`ap:<id>:a|d|s`); everything else is
looked up in the store when the button is tapped, so a forged or replayed tap can change
nothing by itself. The plain twin of a card (sent when Slack refuses the blocks) names the
/approve and /deny commands instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bot.approvals.records import ANSWER_LABELS, ID_PATTERN, SUPERSEDED, SUPERSEDED_LABEL
from bot.core.events import ApprovalView
from bot.core.identity import Sender
from channels.slack import texts
from channels.slack.rendering import SECTION_LIMIT, Part, cut, escape, shorten

ACTION_PATTERN = re.compile(rf"^ap:({ID_PATTERN}):([ads])$")
CHOICE_BY_LETTER = {"a": "approve", "d": "deny", "s": "always"}
RISK_ICON = {"low": "🟢", "medium": "🟠", "high": "🔴"}
ICON = {"approve": "✅", "deny": "❌", "always": "✅"}
MAX_BLOCKS = 50
MAX_BUTTON_TEXT = 75
CARD_FRAME_BLOCKS = 4     # fields, expiry, buttons, room for the outcome line
_REF = re.compile(r"([CDG][A-Z0-9]{2,20}):(\d{1,12}\.\d{1,9})")


def action_id(approval_id: str, letter: str) -> str:
    return f"ap:{approval_id}:{letter}"


def parse_action(action: str | None) -> tuple[str, str] | None:
    """(approval id, choice) from a button's action id, or None when it is not ours."""
    match = ACTION_PATTERN.match(action or "")
    return (match.group(1), CHOICE_BY_LETTER[match.group(2)]) if match else None


def message_ref(channel: str, ts: str) -> str:
    """Where a request is shown ("channel:ts"), stored with it for later updates."""
    return f"{channel}:{ts}"


def parse_ref(ref: str | None) -> tuple[str, str] | None:
    match = _REF.fullmatch(ref or "")
    return (match.group(1), match.group(2)) if match else None


def clock(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%H:%M UTC")


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


def preview_blocks(summary: str) -> list[dict[str, Any]]:
    """The preview, whole, as preformatted rich text (one block per 3,000 characters)."""
    return [{"type": "rich_text", "elements": [{"type": "rich_text_preformatted", "elements": [
        {"type": "text", "text": piece}]}]} for piece in cut(summary or texts.NO_SUMMARY,
                                                             SECTION_LIMIT)]


def fits_inline(summary: str, room: int) -> bool:
    return len(preview_blocks(summary)) <= room


def requester(sender: str) -> dict[str, str]:
    parsed = Sender.parse(sender)
    return {"user": parsed.user_id} if parsed.channel == "slack" else {}


def fields(view: ApprovalView) -> str:
    icon = RISK_ICON.get(view.risk, "⚪")
    who = requester(view.sender)
    template = texts.APPROVAL_FIELDS if who else texts.APPROVAL_FIELDS_OTHER
    return template.format(tool=escape(view.tool), icon=icon, risk=escape(view.risk),
                           sender=escape(view.sender), **who)


@dataclass(frozen=True)
class Card:
    """A request as sent: its blocks, its text twin, and the preview to upload first (if any)."""

    blocks: list[dict[str, Any]]
    part: Part
    file_preview: str = ""


def _body(view: ApprovalView) -> tuple[list[dict[str, Any]], str, bool]:
    """The card's body blocks, its plain text and whether the preview goes in a file."""
    summary = view.summary or texts.NO_SUMMARY
    inline = fits_inline(summary, MAX_BLOCKS - CARD_FRAME_BLOCKS)
    blocks = [section(f"{texts.APPROVAL_TITLE}\n{fields(view)}")]
    if inline:
        blocks.extend(preview_blocks(summary))
    else:
        blocks.append(context(texts.PREVIEW_IN_FILE.format(chars=len(summary))))
    plain = (f"{texts.APPROVAL_TITLE}\n{fields(view)}\n\n"
             + (summary if inline else texts.PREVIEW_IN_FILE.format(chars=len(summary))))
    return blocks, plain, not inline


def request_card(view: ApprovalView) -> Card:
    blocks, plain, in_file = _body(view)
    tail = texts.EXPIRES.format(clock=clock(view.expires_at))
    if view.always:
        tail += "\n" + texts.ALWAYS_EXPLAINED.format(scope=escape(view.always), risk=view.risk)
    blocks.append(context(tail))
    buttons = [button(texts.BUTTON_APPROVE, action_id(view.id, "a"), style="primary"),
               button(texts.BUTTON_DENY, action_id(view.id, "d"), style="danger")]
    if view.always:
        buttons.append(button(texts.BUTTON_ALWAYS.format(scope=view.always), action_id(view.id, "s")))
    blocks.append({"type": "actions", "block_id": f"ap:{view.id}", "elements": buttons})
    commands = f"\n\nReply /approve {view.id} to allow it or /deny {view.id} to refuse."
    notification = texts.APPROVAL_NOTIFICATION.format(tool=escape(view.tool), risk=view.risk)
    return Card(blocks, Part(notification, f"{plain}\n\n{tail}{commands}"),
                view.summary if in_file else "")


def outcome_line(choice: str, who: str, when: float) -> str:
    if choice == "expire" and who == SUPERSEDED:
        return texts.OUTCOME_SUPERSEDED.format(label=SUPERSEDED_LABEL)
    if choice == "expire":
        return texts.OUTCOME_EXPIRED.format(clock=clock(when))
    label = ANSWER_LABELS.get(choice, choice)
    return texts.OUTCOME_BY.format(icon=ICON.get(choice, ""), label=label, who=who,
                                   clock=clock(when))


def outcome_card(view: ApprovalView, choice: str, who: str, when: float,
                 note: str = "") -> tuple[list[dict[str, Any]], Part]:
    """The request once answered: the same body, the outcome instead of the buttons."""
    blocks, plain, _ = _body(view)
    line = outcome_line(choice, mention_of(who), when)
    if note:
        line += f"\n{escape(note)}"
    blocks.append(section(line))
    return blocks, Part(line, f"{plain}\n\n{line}")


def mention_of(resolver: str) -> str:
    """A Slack resolver as a mention (the reader sees their name), anyone else as written."""
    try:
        parsed = Sender.parse(resolver)
    except ValueError:
        return escape(resolver)
    return f"<@{parsed.user_id}>" if parsed.channel == "slack" else escape(resolver)
