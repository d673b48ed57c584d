"""The sink one agent turn writes into, rendered in one Slack conversation (a DM, or a thread).

One `SlackSink` per incoming message (or per tap), so all per-turn state lives here:
- TextDelta: streamed (live.py: Slack's streaming methods in a thread, else one message edited
  in place at a bounded rate). A tool start ends the segment; later text goes into a new one.
- ToolStarted/Progress/Finished: one status message per turn, updated in place.
- ApprovalNeeded / ApprovalBatchNeeded: Block Kit cards (approvals.py, batch.py); a preview
  too long for a card is uploaded as a snippet first. Each card's place is stored with the
  request, so every copy can show the outcome later.
- Notice: mrkdwn, with its command buttons; a private one in a channel goes to the sender's DM.
- FileOut: files_upload_v2 into the conversation; SpeechOut (the spoken answer) likewise.
  Done: the answer, formatted and split.
A failed delivery is logged and never raised into the agent's turn. Every word the bot adds is
the language of the person the sink talks to (`tr`): the sender, or the approver whose DM it is.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

from bot.core.approval_cards import (
    ApprovalBatchNeeded,
    ApprovalNeeded,
    ApprovalView,
    CallOutcome,
    preview_text,
)
from bot.core.events import (
    AgentAPI,
    Button,
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
from channels.slack import texts
from channels.slack.approvals import button, message_ref, request_card, without_buttons
from channels.slack.batch import page_blocks, page_part, pages
from channels.slack.live import LiveMessage, Place, StreamedAnswer, Streaming
from channels.slack.rendering import Part, plain, shorten
from channels.slack.sending import DeliveryError, Poster

log = logging.getLogger(__name__)

CHANNEL = "slack"
PROGRESS_CHARS = 200
COMMAND_PREFIX = "c:"
MAX_COMMAND_CHARS = 2000      # a button's value
DM_FIRST = N_("I have something private for you: please open a chat with me and send /start.")


@dataclass(frozen=True)
class SinkSettings:
    edit_interval: float = 1.0      # chat.update: about one a second per channel
    stream_interval: float = 0.5    # chat.appendStream


@dataclass(frozen=True)
class Target:
    channel: str                 # C…/G… (a channel) or D… (a DM)
    thread_ts: str | None        # the thread the conversation is, None for a DM's main view
    user_id: str = ""            # the sender, for private notices and stream recipients
    team_id: str = ""
    is_group: bool = False

    @property
    def place(self) -> Place:
        return Place(self.channel, self.thread_ts, self.team_id, self.user_id)


def command_buttons(buttons: tuple[Button, ...], tr: Translator) -> list[dict[str, Any]]:
    """A notice's command buttons, labelled in the reader's language: the value is the
    command (the same in every language), run as typed by whoever taps."""
    return [button(tr.say(b.label), f"{COMMAND_PREFIX}{n}", value=b.command)
            for n, b in enumerate(buttons) if len(b.command) <= MAX_COMMAND_CHARS][:25]


class SlackSink:
    def __init__(self, poster: Poster, agent: AgentAPI, target: Target, settings: SinkSettings,
                 streaming: Streaming, *, dm_user: str = ""):
        self._poster = poster
        self._dm_user = dm_user     # the target is this user's DM, opened at the first event
        self._agent = agent
        self.target = target
        self._settings = settings
        self._streaming = streaming
        self._segment: StreamedAnswer | None = None
        self._last_closed = ""
        self._status: LiveMessage | None = None
        self._status_lines: dict[str, str] = {}
        self.emitted = False

    @property
    def tr(self) -> Translator:
        """The reader's words: the person this sink talks to (the default language otherwise)."""
        user = self.target.user_id or self._dm_user
        return self._agent.translator(Sender.of(CHANNEL, user) if user else "")

    async def emit(self, event: Event) -> None:
        self.emitted = True
        try:
            await self._open_dm()
            await self._render(event)
        except DeliveryError:
            log.warning("slack: could not deliver %s to %s", type(event).__name__,
                        self.target.channel or self._dm_user, exc_info=True)

    async def emit_line(self, text: str) -> None:
        """One line outside any turn (the channel's own failure notice); best effort."""
        try:
            await self._open_dm()
            await self._post(plain(text))
        except DeliveryError:
            log.warning("slack: could not deliver a line to %s", self.target.channel, exc_info=True)

    async def _open_dm(self) -> None:
        if self._dm_user and not self.target.channel:
            self.target = dataclasses.replace(self.target,
                                              channel=await self._poster.dm(self._dm_user))

    async def _render(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            await self._on_delta(event.text)
            return
        if isinstance(event, Done):
            await self._flush_status()     # the status is final before the answer lands
            await self._finish_segment(event.text)
            return
        await self._close_segment()
        if isinstance(event, ToolStarted | ToolProgress | ToolFinished):
            await self._on_tool(event)
        elif isinstance(event, ApprovalNeeded):
            await self._flush_status()
            await self._send_approval(event.approval)
        elif isinstance(event, ApprovalBatchNeeded):
            await self._flush_status()
            await self._send_batch(event.approvals)
        elif isinstance(event, Notice):
            await self._on_notice(event)
        elif isinstance(event, FileOut):
            await self._poster.upload(self.target.channel, event.name, event.data,
                                      thread_ts=self.target.thread_ts, comment=event.caption)
        elif isinstance(event, SpeechOut):   # an audio file Slack plays in the conversation
            await self._poster.upload(self.target.channel, event.name, event.data,
                                      thread_ts=self.target.thread_ts, comment="")
        elif isinstance(event, ErrorEvent):
            await self._flush_status()
            await self._post(plain(f"⚠️ {self.tr.say(event.message)}"))

    async def close(self) -> None:
        """End of the handling: stop timers, keep what was sent."""
        for live in (self._segment, self._status):
            if live is not None:
                await live.close()

    async def _post(self, part: Part, blocks: list[dict[str, Any]] | None = None) -> str:
        return await self._poster.post(self.target.channel, part, thread_ts=self.target.thread_ts,
                                       blocks=blocks)

    # --- streamed text ----------------------------------------------------------------------

    async def _on_delta(self, text: str) -> None:
        if self._segment is None:
            self._segment = StreamedAnswer(self._poster, self.target.place, self._streaming,
                                           interval=self._interval,
                                           stream_interval=self._settings.stream_interval)
        await self._segment.add(text)

    @property
    def _interval(self) -> float:
        return self._settings.edit_interval

    async def _close_segment(self) -> None:
        segment, self._segment = self._segment, None
        if segment is not None and await segment.finish():
            self._last_closed = segment.text

    async def _finish_segment(self, final: str) -> None:
        segment, self._segment = self._segment, None
        if segment is not None and await segment.finish(final):
            return
        if final.strip() and final.strip() != self._last_closed.strip():
            await self._poster.post_markdown(self.target.channel, final,
                                             thread_ts=self.target.thread_ts)

    # --- tool status ------------------------------------------------------------------------

    async def _on_tool(self, event: ToolStarted | ToolProgress | ToolFinished) -> None:
        name = event.tool
        if isinstance(event, ToolStarted):
            line = f"⚙️ {name}…"
        elif isinstance(event, ToolProgress):
            line = f"⚙️ {name}: {shorten(self.tr.say(event.text), PROGRESS_CHARS)}"
        elif event.ok:
            line = f"✅ {name}"
        else:
            said = self.tr.say(event.summary) if event.summary else self.tr._("failed")
            line = f"⚠️ {name}: {shorten(said, PROGRESS_CHARS)}"
        self._status_lines[event.call_id] = line
        if self._status is None:
            self._status = LiveMessage(self._poster, self.target.place, interval=self._interval)
        await self._status.show(self._status_part())

    def _status_part(self) -> Part:
        return plain("\n".join(list(self._status_lines.values())[-20:]))

    async def _flush_status(self) -> None:
        if self._status is not None:
            await self._status.finish([self._status_part()])

    # --- approvals and notices --------------------------------------------------------------

    async def _send_approval(self, view: ApprovalView) -> None:
        card = request_card(view, self.tr)
        if card.file_preview:
            await self._upload_preview(view, card.file_preview)
        # Text first, recorded, then its buttons (see without_buttons).
        ts = await self._post(card.part, without_buttons(card.blocks))
        await self._agent.set_approval_message_ref(view.id, self._ref(ts), CHANNEL)
        await self._arm(ts, card.part, card.blocks)

    async def _arm(self, ts: str, part: Part, blocks: list[dict[str, Any]]) -> None:
        try:
            await self._poster.update(self.target.channel, ts, part, blocks=blocks)
        except DeliveryError:   # its commands still work; a restart gives the buttons again
            log.warning("slack: could not add the buttons to a request message", exc_info=True)

    def _ref(self, ts: str) -> str:
        """Where a card went, and whose language it is in (redrawn later in the same)."""
        return message_ref(self.target.channel, ts, self.target.user_id or self._dm_user)

    async def _upload_preview(self, view: ApprovalView, preview: str) -> None:
        tr = self.tr
        await self._poster.upload(self.target.channel, f"preview-{view.id}.txt", preview.encode(),
                                  thread_ts=self.target.thread_ts,
                                  title=tr._(texts.PREVIEW_FILE_TITLE, tool=view.tool),
                                  comment=tr._(texts.PREVIEW_FILE_COMMENT), snippet_type="text")

    async def _send_batch(self, views: tuple[ApprovalView, ...]) -> None:
        tr = self.tr
        for page in pages(views, tr):
            for view in page.calls:
                if view.id in page.outside:
                    await self._upload_preview(view, preview_text(view.summary, tr))
            calls = [CallOutcome(view, "") for view in page.calls]
            part = page_part(page, calls, len(views), tr)
            blocks = page_blocks(page, calls, len(views), True, tr)
            ts = await self._post(part, without_buttons(blocks))
            for view in page.calls:
                await self._agent.set_approval_message_ref(view.id, self._ref(ts), CHANNEL)
            await self._arm(ts, part, blocks)

    async def _on_notice(self, event: Notice) -> None:
        target, tr = self.target, self.tr
        text, buttons = tr.say(event.text), command_buttons(event.buttons, tr)
        if not (event.private and target.is_group):
            await self._poster.post_markdown(target.channel, text, thread_ts=target.thread_ts,
                                             buttons=buttons)
            return
        try:
            dm = await self._poster.dm(target.user_id)
            await self._poster.post_markdown(dm, text, buttons=buttons)
        except DeliveryError:
            log.info("slack: private notice to %s refused", target.user_id)
            await self._poster.ephemeral(target.channel, target.user_id, tr._(DM_FIRST),
                                         thread_ts=target.thread_ts)
