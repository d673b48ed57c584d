"""Which Slack messages are for the bot, and what the agent reads of them.

- The sender is `slack:<user id>`, never a display name; a message from another workspace (the
  envelope's or the author's team is not `[slack] team_id`), from a bot, or an edit/deletion is
  not read.
- A DM is always read. In a channel listed in `[slack] channels`, a message is read when it
  mentions the bot (`<@BOT>`, removed from the text), or when it is in a thread the bot is
  already in (it was mentioned there, or has written there: `Threads`). Any other channel gets
  silence.
- Each thread is a conversation (`chat` = `channel/thread ts`): a mention at the top of a
  channel starts a thread under it. A DM's main view is one conversation (`chat` = the DM id).
- Text commands: `/word` at the start, after the mention in a channel (Slack's own client
  takes a leading `/` in the box for a slash command, so `@bot /new` is the usual form).
- A shared message (Slack's "Forward", an attachment with `is_share`) is someone else's words:
  alone, it is a forwarded message (`forwarded_from`, its author); under the sender's own
  comment, it is quoted (`quoted`, `quoted_from`). Either way the model reads it as data from
  its author, never as the sender's request.
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slack_sdk.errors import SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.core.events import IncomingMessage
from bot.core.identity import Sender
from channels.slack.sink import Target

READ_SUBTYPES = (None, "file_share", "thread_broadcast")
MAX_THREADS = 10_000
NEGATIVE_TTL = 60.0     # a thread found without the bot is looked up again after this
MAX_SHARED = 10             # shared messages read from one event
MAX_SHARED_CHARS = 20_000   # bot.core.events.MAX_MESSAGE_CHARS: the most the agent takes
_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")


@dataclass(frozen=True)
class Reading:
    """A message the bot answers: what the agent reads and where the answer goes."""

    message: IncomingMessage
    target: Target
    files: tuple[dict[str, Any], ...] = ()


def sender_of(user: str) -> str:
    return Sender.of("slack", user)


def chat_of(channel: str, thread_ts: str | None) -> str:
    return f"{channel}/{thread_ts}" if thread_ts else channel


def parse_chat(chat: str) -> tuple[str, str | None] | None:
    """(channel, thread ts) of a Slack `chat`, None when it is not one."""
    match = re.fullmatch(r"([CDG][A-Z0-9]{2,20})(?:/(\d{1,12}\.\d{1,9}))?", chat)
    return (match.group(1), match.group(2)) if match else None


class Threads:
    """The threads the bot is in: remembered when it joins one, else asked of Slack once
    (conversations.replies) and remembered."""

    def __init__(self, client: AsyncWebClient, bot_user: str,
                 clock: Callable[[], float] = time.monotonic):
        self._client = client
        self._bot = bot_user
        self._clock = clock
        self._known: OrderedDict[tuple[str, str], float] = OrderedDict()   # -> 0 = in, else retry at

    def joined(self, channel: str, thread_ts: str) -> None:
        self._remember((channel, thread_ts), 0.0)

    async def is_in(self, channel: str, thread_ts: str) -> bool:
        key = (channel, thread_ts)
        seen = self._known.get(key)
        if seen is not None and (seen == 0.0 or self._clock() < seen):
            return seen == 0.0
        try:
            answer = await self._client.conversations_replies(channel=channel, ts=thread_ts,
                                                              limit=200)
            found = any(m.get("user") == self._bot
                        or self._bot in _MENTION.findall(str(m.get("text", "")))
                        for m in answer.get("messages", []))
        except SlackClientError:
            found = False
        self._remember(key, 0.0 if found else self._clock() + NEGATIVE_TTL)
        return found

    def _remember(self, key: tuple[str, str], value: float) -> None:
        self._known[key] = value
        self._known.move_to_end(key)
        while len(self._known) > MAX_THREADS:
            self._known.popitem(last=False)


class Reader:
    def __init__(self, *, team_id: str, bot_user: str, channels: frozenset[str], threads: Threads):
        self.team_id = team_id
        self.bot_user = bot_user
        self.channels = channels
        self.threads = threads

    def same_team(self, *teams: Any) -> bool:
        return all(team in (None, "", self.team_id) for team in teams)

    async def read(self, body: dict[str, Any], event: dict[str, Any]) -> Reading | None:
        user = event.get("user")
        if (event.get("subtype") not in READ_SUBTYPES or event.get("bot_id") or not user
                or user == self.bot_user or not isinstance(user, str)):
            return None
        if not body.get("team_id") or not self.same_team(body.get("team_id"),
                                                         event.get("user_team"), event.get("team")):
            return None
        channel, ts = str(event.get("channel", "")), str(event.get("ts", ""))
        thread = event.get("thread_ts")
        text = str(event.get("text") or "")
        is_dm = event.get("channel_type") == "im"
        if not is_dm:
            if channel not in self.channels:
                return None
            mentioned = self.bot_user in _MENTION.findall(text)
            if mentioned:
                self.threads.joined(channel, thread or ts)
            elif not thread or not await self.threads.is_in(channel, thread):
                return None
            text = _strip_mention(text, self.bot_user)
            thread = thread or ts
        files = tuple(f for f in event.get("files") or () if isinstance(f, dict))
        target = Target(channel=channel, thread_ts=thread, user_id=user,
                        team_id=self.team_id, is_group=not is_dm)
        text = _unescape(text).strip()
        shared, author = shared_message(event)
        forwarded = author if shared and not text else ""
        message = IncomingMessage(sender=sender_of(user), chat=chat_of(channel, thread),
                                  text=text or shared, channel="slack", message_id=ts,
                                  is_group=not is_dm, forwarded_from=forwarded,
                                  quoted=shared if text else "", quoted_from=author if text else "")
        return Reading(message, target, files)


def shared_message(event: dict[str, Any]) -> tuple[str, str]:
    """The text of the messages shared into this one, and who wrote them (the first one's
    author, as Slack names them, else their user id): ("", "") when nothing was shared."""
    attachments = event.get("attachments")
    shares = [a for a in (attachments if isinstance(attachments, list) else [])[:MAX_SHARED]
              if isinstance(a, dict) and (a.get("is_share") or a.get("is_msg_unfurl"))]
    texts = [_unescape(str(a.get("text") or a.get("fallback") or "")[:MAX_SHARED_CHARS]).strip()
             for a in shares]
    texts = [t for t in texts if t]
    if not texts:
        return "", ""
    first = shares[0]
    author = str(first.get("author_name") or first.get("author_subname")
                 or first.get("author_id") or "someone on Slack")
    return "\n\n".join(texts)[:MAX_SHARED_CHARS], author


def _strip_mention(text: str, bot_user: str) -> str:
    return " ".join(_MENTION.sub(lambda m: "" if m.group(1) == bot_user else m.group(0),
                                 text).split(" ")).strip()


def _unescape(text: str) -> str:
    """Slack escapes &, < and > in message text; the agent reads what the person typed."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
