"""Reading a Telegram message as the agent's `IncomingMessage`, or not at all.

In a private chat every message is read. In a group listed in `[telegram] groups` a message is
read when it is meant for the bot: it mentions the bot (@name, or a mention of the bot's
account), replies to one of the bot's messages, or is a command (bare, or /cmd@thisbot; a
command for another bot is left alone). Any other chat gets silence. The mention is removed
from the text, "/cmd@thisbot" becomes "/cmd", and a forwarded message (or one sent via an inline
bot) names who wrote it.
channel.py asks a `MessageReader` made at start-up, once the bot's @username and id are known.
"""

from __future__ import annotations

from dataclasses import dataclass

from telegram import Message, MessageEntity

from bot.core.events import IncomingMessage
from bot.core.identity import Sender

GROUP_TYPES = ("group", "supergroup")


@dataclass(frozen=True)
class _Addressed:
    """Whether a group message is meant for the bot, and its text without the mention."""

    yes: bool
    text: str


def _strip_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """Remove entity spans (offsets in UTF-16 units, as Telegram counts them)."""
    encoded = text.encode("utf-16-le")
    for offset, length in sorted(spans, reverse=True):
        encoded = encoded[:offset * 2] + encoded[(offset + length) * 2:]
    return " ".join(encoded.decode("utf-16-le").split(" ")).strip()


@dataclass(frozen=True)
class MessageReader:
    """Reads messages as the bot whose @username and id it holds, in the groups it may answer in."""

    groups: frozenset[str]
    username: str
    bot_id: int

    def incoming(self, message: Message) -> IncomingMessage | None:
        """The agent's view of a message, or None when the bot must stay silent."""
        user = message.from_user
        assert user is not None
        is_group = message.chat.type in GROUP_TYPES
        if message.chat.type not in ("private", *GROUP_TYPES):
            return None
        # A caption is the text of a photo, document or voice note (their files are fetched by
        # the channel, once the agent admits the sender); a sticker arrives as empty text and
        # the agent answers it politely.
        text = message.text or message.caption or ""
        if is_group:
            if str(message.chat_id) not in self.groups:
                return None
            addressed = self._addressed(message, text)
            if not addressed.yes:
                return None
            text = addressed.text
        text = self._strip_command_suffix(text)
        quoted, quoted_from = self._quoted(message)
        return IncomingMessage(sender=Sender.of("telegram", user.id), chat=str(message.chat_id), text=text,
                               channel="telegram", message_id=str(message.message_id),
                               is_group=is_group, display_name=user.full_name,
                               forwarded_from=_forwarded_from(message, user.id),
                               quoted=quoted, quoted_from=quoted_from,
                               language_hint=user.language_code or "")

    def _quoted(self, message: Message) -> tuple[str, str]:
        """The words a reply quotes (the part selected, else the whole message replied to) and
        their author; nothing for a reply to the bot, whose words are in the history already."""
        replied = message.reply_to_message
        if replied is None or (replied.from_user and replied.from_user.id == self.bot_id):
            return "", ""
        selected = message.quote.text if message.quote is not None else ""
        words = selected or replied.text or replied.caption or ""
        author = replied.from_user
        return words, str(Sender.of("telegram", author.id)) if author else "someone"

    def _addressed(self, message: Message, text: str) -> _Addressed:
        entities = message.parse_entities() if message.text else message.parse_caption_entities()
        mention_spans = []
        for entity, value in entities.items():
            if entity.type == MessageEntity.MENTION and value[1:].lower() == self.username.lower():
                mention_spans.append((entity.offset, entity.length))
            elif entity.type == MessageEntity.TEXT_MENTION and entity.user and entity.user.id == self.bot_id:
                mention_spans.append((entity.offset, entity.length))
        command = text.split(maxsplit=1)[0] if text.startswith("/") else ""
        _, _, target = command.partition("@")
        replied = message.reply_to_message
        to_bot = bool(replied and replied.from_user and replied.from_user.id == self.bot_id)
        if target and target.lower() != self.username.lower():
            return _Addressed(False, text)   # a command for another bot in the same group
        yes = bool(mention_spans) or to_bot or bool(command)
        return _Addressed(yes, _strip_spans(text, mention_spans) if mention_spans else text)

    def _strip_command_suffix(self, text: str) -> str:
        """"/help@this_bot args" → "/help args" (only our own name is removed)."""
        if not text.startswith("/"):
            return text
        head, sep, rest = text.partition(" ")
        name, _, target = head.partition("@")
        if target and target.lower() == self.username.lower():
            return f"{name}{sep}{rest}"
        return text


def _forwarded_from(message: Message, user_id: int) -> str:
    """Who wrote a forwarded message ("" when it is not one). The sender's own old message is
    forwarded too: not typed in this message, so data like any other forward. So is a message
    sent via an inline bot (`@somebot query`, then a result picked): its text and media are
    that bot's, not the sender's words."""
    origin = message.forward_origin
    if origin is None:
        via = message.via_bot
        if via is not None:
            return f"the inline bot @{via.username}" if via.username else "an inline bot"
        return ""
    author = getattr(origin, "sender_user", None)
    if author is not None:
        who = str(Sender.of("telegram", author.id))
        return f"{who} (an earlier message of the sender)" if author.id == user_id else who
    hidden = getattr(origin, "sender_user_name", None)
    if hidden:
        return f"a Telegram user who hides their account ({hidden})"
    chat = getattr(origin, "sender_chat", None) or getattr(origin, "chat", None)
    if chat is not None:
        return f"the Telegram chat {chat.title or chat.id}"
    return "someone else"
