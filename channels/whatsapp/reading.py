"""A stored WhatsApp message read as the agent's `IncomingMessage` (taps are taps.py's).

WhatsApp bots talk one to one: the chat is the person's wa_id, and so is the sender
(`whatsapp:<wa_id>`). The text is the message's body, or the caption of a photo or document;
a forwarded message is marked as someone else's words. A reply quoting one of the bot's own
recent messages that is not in the conversation (a job's output, a reminder, a notice, a card)
passes that message's opening on as a quote: data, never the sender's request (it may repeat
what a job read outside), so the turn is tainted. A quote of the bot's reply in a turn is left
out (its words are in the history already), as Telegram and Discord do; of any other message
WhatsApp sends only its id.
"""

from __future__ import annotations

from typing import Any

from bot.core.events import IncomingMessage
from bot.core.identity import Sender
from channels.whatsapp import texts
from channels.whatsapp.sending import Messenger

CHANNEL = "whatsapp"
QUOTED_CHARS = 200
IN_THE_CONVERSATION = "reply"   # the kind of a message sent in a turn the person started


def text_of(message: dict[str, Any]) -> str:
    kind = message.get("type", "")
    if kind == "text":
        return str((message.get("text") or {}).get("body") or "")
    body = message.get(kind) if isinstance(message.get(kind), dict) else {}
    return str(body.get("caption") or "")


async def incoming(message: dict[str, Any], name: str, messenger: Messenger) -> IncomingMessage:
    wa_id = str(message["from"])
    context = message.get("context") or {}
    quoted, quoted_from = await _quoted(context, messenger)
    forwarded = texts.FORWARDED_BY if context.get("forwarded") or context.get(
        "frequently_forwarded") else ""
    return IncomingMessage(sender=Sender.of(CHANNEL, wa_id), chat=wa_id, text=text_of(message),
                           channel=CHANNEL, message_id=str(message.get("id", "")),
                           display_name=name, forwarded_from=forwarded,
                           quoted=quoted, quoted_from=quoted_from)


async def _quoted(context: dict[str, Any], messenger: Messenger) -> tuple[str, str]:
    """(the words, their author) of the bot's own message a reply quotes, when they are not in
    the conversation already; ("", "") otherwise."""
    sent = await messenger.outbox.recall(str(context.get("id") or ""))
    if sent is None or sent.kind == IN_THE_CONVERSATION or not sent.text.strip():
        return "", ""
    return " ".join(sent.text.split())[:QUOTED_CHARS], texts.QUOTED_FROM.format(kind=sent.kind)


def timestamp_of(message: dict[str, Any]) -> float:
    try:
        return float(message.get("timestamp") or 0)
    except (TypeError, ValueError):
        return 0.0


def tap_of(message: dict[str, Any]) -> tuple[str, str] | None:
    """(reply id, the tapped message's id) of a button or list tap, or None."""
    context = str((message.get("context") or {}).get("id") or "")
    if message.get("type") == "interactive":
        interactive = message.get("interactive") or {}
        reply = interactive.get("button_reply") or interactive.get("list_reply") or {}
        return (str(reply.get("id") or ""), context) if reply else None
    if message.get("type") == "button":   # a template's quick-reply button
        return str((message.get("button") or {}).get("payload") or ""), context
    return None
