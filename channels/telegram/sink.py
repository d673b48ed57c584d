"""The sink one agent turn writes into, rendered on one Telegram chat.

One `ChatSink` is created per incoming message (or per approval tap), so all per-turn state
(the streamed message, the status message, the typing indicator) lives here and never on the
shared channel object. Rendering:
- TextDelta: one message edited in place (throttled; its first send waits
  `stream_first_delay`, so an answer complete by then is one message, not a message and an
  edit). When a tool starts, that message is finalised and later text streams into a new one,
  because `Done.text` holds only the last step.
- ToolStarted/Progress/Finished: one status message per turn, edited in place.
- ApprovalNeeded: a request with ✅ Approve / ❌ Deny / ✅ Always buttons, or the same text with
  /approve and /deny commands when the buttons cannot be sent. ApprovalBatchNeeded: the calls of
  one step in one message (channels/telegram/batch.py), the same way.
- Notice(private=True) in a group goes to the sender's private chat, never to the group.
- FileOut: the file uploaded (sendPhoto for a JPEG/PNG that fits, else sendDocument).
- SpeechOut: the spoken answer as a voice message (sendVoice), after its text.
- Done: the final answer, formatted and split; ErrorEvent: one line.
A failed delivery is logged and never raised into the agent's turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.core.approval_cards import (
    ApprovalBatchNeeded,
    ApprovalNeeded,
    ApprovalView,
    CallOutcome,
    message_ref,
)
from bot.core.events import (
    AgentAPI,
    Done,
    ErrorEvent,
    Event,
    FileOut,
    Notice,
    SpeechOut,
    TextDelta,
    ToolFinished,
    ToolProgress,
    ToolStarted,
)
from bot.core.identity import Sender
from bot.language.catalogs import N_
from bot.language.translator import Translator
from channels.telegram.approvals import keyboard as approval_keyboard
from channels.telegram.approvals import preview_parts, request_fallback, request_message
from channels.telegram.batch import continuation_parts, fallback_part, page_keyboard, page_part, pages
from channels.telegram.buttons import keyboard
from channels.telegram.live import LiveMessage
from channels.telegram.rendering import MESSAGE_LIMIT, Part, escape, split_message, truncate
from channels.telegram.sending import DeliveryError, Messenger

if TYPE_CHECKING:
    from telegram import InlineKeyboardMarkup

log = logging.getLogger(__name__)

STREAM_PREVIEW_UNITS = MESSAGE_LIMIT - 96
PROGRESS_UNITS = 200
DM_FIRST = N_("I have something private for you: please open a chat with me and send /start.")


@dataclass(frozen=True)
class SinkSettings:
    edit_interval: float = 1.0         # Telegram: about one edit per second per chat
    group_edit_interval: float = 3.0   # and about twenty messages a minute in a group
    typing_delay: float = 0.4          # instant answers (commands, ignored senders) show none
    typing_interval: float = 4.0       # the indicator fades after ~5 s
    typing_idle_limit: float = 150.0   # stop if nothing happened for this long
    stream_first_delay: float = 0.05   # streamed text gathered before its first message


@dataclass(frozen=True)
class Target:
    chat_id: int
    user_id: int | None        # the sender, for private notices
    reply_to: int | None       # the message being answered (groups), or None
    is_group: bool
    thread_id: int | None = None   # forum topic of the conversation, if any


class ChatSink:
    def __init__(self, messenger: Messenger, agent: AgentAPI, target: Target, settings: SinkSettings):
        self._messenger = messenger
        self._agent = agent
        self.target = target
        self._settings = settings
        self._interval = settings.group_edit_interval if target.is_group else settings.edit_interval
        self._segment: list[str] = []
        # The first STREAM_PREVIEW_UNITS + 1 characters of the segment: all a streamed preview
        # can show, so each delta costs the size of the delta, not of the reply so far.
        self._segment_head = ""
        self._stream: LiveMessage | None = None
        self._last_closed = ""
        self._status: LiveMessage | None = None
        self._status_lines: dict[str, tuple[str, str]] = {}
        self._typing: asyncio.Task[None] | None = None
        self._typing_stop = asyncio.Event()
        self._last_activity = time.monotonic()

    @property
    def tr(self) -> Translator:
        """The reader's words: the person this sink talks to (the chat's default otherwise)."""
        user = self.target.user_id
        return self._agent.translator(Sender.of("telegram", user) if user is not None else "")

    # --- the Sink protocol ------------------------------------------------------------------

    async def emit(self, event: Event) -> None:
        self._last_activity = time.monotonic()
        try:
            await self._render(event)
        except DeliveryError:
            log.warning("telegram: could not deliver %s to chat %s", type(event).__name__,
                        self.target.chat_id, exc_info=True)

    async def _render(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            await self._on_delta(event.text)
        elif isinstance(event, ToolStarted | ToolProgress | ToolFinished):
            await self._close_segment()
            await self._on_tool(event)
        elif isinstance(event, ApprovalNeeded):
            await self._close_segment()
            await self._flush_status()
            await self._send_approval(event.approval)
        elif isinstance(event, ApprovalBatchNeeded):
            await self._close_segment()
            await self._flush_status()
            await self._send_batch(event.approvals)
        elif isinstance(event, Notice):
            await self._close_segment()
            await self._on_notice(event)
        elif isinstance(event, FileOut):
            await self._close_segment()
            await self._messenger.send_file(self.target.chat_id, event.name, event.data,
                                            caption=event.caption, media_type=event.media_type,
                                            thread_id=self.target.thread_id)
        elif isinstance(event, SpeechOut):
            await self._close_segment()
            await self._messenger.send_voice(self.target.chat_id, event.data, event.duration,
                                             reply_to=self.target.reply_to,
                                             thread_id=self.target.thread_id)
        elif isinstance(event, Done):
            await self._finish_stream(event.text)
            await self._flush_status()
            await self.stop_typing()
        elif isinstance(event, ErrorEvent):
            await self._close_segment()
            await self._flush_status()
            line = f"⚠️ {self.tr.say(event.message)}"
            await self._messenger.send(self.target.chat_id, Part(escape(line), line),
                                       reply_to=self.target.reply_to, thread_id=self.target.thread_id)
            await self.stop_typing()

    # --- typing indicator -------------------------------------------------------------------

    def start_typing(self) -> None:
        if self._typing is None:
            self._typing = asyncio.create_task(self._typing_loop())

    async def stop_typing(self) -> None:
        self._typing_stop.set()
        task, self._typing = self._typing, None
        if task is not None:
            await task

    async def close(self) -> None:
        """End of the incoming message's handling: stop timers, keep what was sent."""
        await self.stop_typing()
        for live in (self._stream, self._status):
            if live is not None:
                await live.close()

    async def _typing_loop(self) -> None:
        delay = self._settings.typing_delay
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._typing_stop.wait(), delay)
            if self._typing_stop.is_set():
                return
            if time.monotonic() - self._last_activity > self._settings.typing_idle_limit:
                return
            await self._messenger.typing(self.target.chat_id)
            delay = self._settings.typing_interval

    # --- streamed text ----------------------------------------------------------------------

    async def _on_delta(self, text: str) -> None:
        self._segment.append(text)
        room = STREAM_PREVIEW_UNITS + 1 - len(self._segment_head)
        if room > 0:
            self._segment_head += text[:room]
        shown = truncate(self._segment_head, STREAM_PREVIEW_UNITS)
        if not shown.strip():
            return  # Telegram refuses an empty message
        if self._stream is None:
            # Every other event finishes the stream before it sends, so deferring its first
            # send (see LiveMessage) never reorders messages.
            self._stream = self._live(first_delay=self._settings.stream_first_delay)
        await self._stream.show(Part(escape(shown), shown))

    async def _close_segment(self) -> None:
        """Finalise the streamed message with its own text (more text will follow a tool)."""
        text = "".join(self._segment)
        stream, self._stream, self._segment = self._stream, None, []
        self._segment_head = ""
        if stream is not None:
            await stream.finish(split_message(text))
            self._last_closed = text

    async def _finish_stream(self, final: str) -> None:
        streamed = "".join(self._segment)
        text = final if final.strip() else streamed
        stream, self._stream, self._segment = self._stream, None, []
        self._segment_head = ""
        if stream is not None:
            await stream.finish(split_message(text))
        elif text.strip() and text.strip() != self._last_closed.strip():
            await self._messenger.send_markdown(self.target.chat_id, text, reply_to=self.target.reply_to,
                                                thread_id=self.target.thread_id)

    def _live(self, *, first_delay: float | None = None) -> LiveMessage:
        return LiveMessage(self._messenger, self.target.chat_id, interval=self._interval,
                           reply_to=self.target.reply_to, thread_id=self.target.thread_id,
                           first_delay=first_delay)

    # --- tool status ------------------------------------------------------------------------

    async def _on_tool(self, event: ToolStarted | ToolProgress | ToolFinished) -> None:
        name = event.tool
        if isinstance(event, ToolStarted):
            plain = f"⚙️ {name}…"
        elif isinstance(event, ToolProgress):
            plain = f"⚙️ {name}: {truncate(self.tr.say(event.text), PROGRESS_UNITS)}"
        elif event.ok:
            plain = f"✅ {name}"
        else:
            said = self.tr.say(event.summary) if event.summary else self.tr._("failed")
            plain = f"⚠️ {name}: {truncate(said, PROGRESS_UNITS)}"
        self._status_lines[event.call_id] = (escape(plain), plain)
        if self._status is None:
            self._status = self._live()
        await self._status.show(self._status_part())

    def _status_part(self) -> Part:
        lines = list(self._status_lines.values())[-20:]
        return Part("\n".join(h for h, _ in lines), "\n".join(p for _, p in lines))

    async def _flush_status(self) -> None:
        if self._status is not None:
            await self._status.finish([self._status_part()])

    # --- approvals and notices --------------------------------------------------------------

    async def _send_approval(self, view: ApprovalView) -> None:
        """The request goes out as commands first, is recorded, and only then gets its buttons:
        a process killed between sending and recording leaves a message without buttons (its
        commands still answer it), never buttons on a message nobody will redraw."""
        chat_id, thread_id, tr = self.target.chat_id, self.target.thread_id, self.tr
        for part in preview_parts(view, tr):  # a long preview, whole, before the buttons
            await self._messenger.send(chat_id, part, thread_id=thread_id)
        sent = await self._messenger.send(chat_id, request_fallback(view, tr), thread_id=thread_id)
        await self._agent.set_approval_message_ref(view.id, message_ref(chat_id, sent.message_id),
                                                   "telegram")
        markup = approval_keyboard(view, tr)
        if markup is not None:
            await self._arm(chat_id, sent.message_id, request_message(view, tr), markup, view.id)

    async def _send_batch(self, views: tuple[ApprovalView, ...]) -> None:
        chat_id, thread_id, tr = self.target.chat_id, self.target.thread_id, self.tr
        for page in pages(views, tr):
            for part in continuation_parts(page, tr):   # long previews, whole, before the buttons
                await self._messenger.send(chat_id, part, thread_id=thread_id)
            calls = [CallOutcome(view, "") for view in page.calls]
            sent = await self._messenger.send(  # commands first, buttons once recorded
                chat_id, fallback_part(page, calls, len(views), tr), thread_id=thread_id)
            for view in page.calls:
                await self._agent.set_approval_message_ref(
                    view.id, message_ref(chat_id, sent.message_id), "telegram")
            await self._arm(chat_id, sent.message_id, page_part(page, calls, len(views), tr),
                            page_keyboard(page, calls, True, tr), views[0].batch)

    async def _arm(self, chat_id: int, message_id: int, part: Part, markup: InlineKeyboardMarkup,
                   what: str) -> None:
        """Swap a recorded request's commands for its buttons; when that fails the commands
        stay, which answer it as well."""
        try:
            await self._messenger.edit(chat_id, message_id, part, markup=markup)
        except DeliveryError:
            log.warning("telegram: buttons for %s not shown; its commands stay", what,
                        exc_info=True)

    async def _on_notice(self, event: Notice) -> None:
        target, text = self.target, self.tr.say(event.text)
        if not (event.private and target.is_group):
            await self._messenger.send_markdown(target.chat_id, text, reply_to=target.reply_to,
                                                thread_id=target.thread_id,
                                                markup=keyboard(event.buttons, self.tr))
            return
        if target.user_id is not None:
            try:
                await self._messenger.send_markdown(target.user_id, text)
                return
            except DeliveryError:
                log.info("telegram: private notice to %s refused (no private chat yet)", target.user_id)
        # Never post a private notice (a pairing code) in the group itself.
        dm_first = self.tr._(DM_FIRST)
        await self._messenger.send(target.chat_id, Part(escape(dm_first), dm_first),
                                   reply_to=target.reply_to, thread_id=target.thread_id)
