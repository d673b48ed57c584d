"""The sink one agent turn writes into, rendered in one WhatsApp chat.

WhatsApp cannot edit a sent message, so nothing is streamed: text is gathered and sent when the
step ends (before a tool runs, an approval, a notice, and at Done), formatted and split. While
the agent works, the person sees the typing indicator (with the read receipt of their message).
- ApprovalNeeded: a long preview whole first, then the card with Approve / Deny / Always
  (channels/whatsapp/approvals.py); a refused card is resent as text with /approve and /deny.
  ApprovalBatchNeeded: "Approve all / Deny all" as a list, then one card per call.
- Notice with buttons: reply buttons (up to three) or a list (up to ten rows); each carries
  its command ("c:/pair allow …"), run as if the tapper had typed it.
- FileOut: uploaded, as an image when WhatsApp shows it as one, else as a document.
- SpeechOut: the spoken answer as a voice note (OGG/Opus audio), after its text.
A delivery that still fails after the Graph client's retries and the plain-text fallback (a
rate limit that does not lift, an outage) is never raised into the agent's turn, and never
lost: it is logged and held for the person's next message (`agent.held`, as for a `failed`
status: "My last message did not reach you …"); an approval request held so comes back as its
card while it is still pending.

The 24-hour window. A sink for a conversation someone is having (`attended`) is inside it: the
person just wrote. Any other sink (a job's run, an approver's copy, a note about pairing) may be
outside it: what cannot be sent is gathered, and on `close` goes out as one approved template
of its kind (`[whatsapp] templates`: approval, job or reminder), or, without one, is held for
the person's next message; `undelivered()` then says so, for the job's record.

Every word the bot adds is the language of the person the chat is with (`tr`; WhatsApp names no
locale, so it is the language they chose, else the installation's).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass

from bot.core.approval_cards import ApprovalBatchNeeded, ApprovalNeeded, ApprovalView, preview_text
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
    ToolStarted,
)
from bot.core.identity import Sender
from bot.core.ports import HeldPort
from bot.language.translator import Translator
from channels.whatsapp import approvals, texts
from channels.whatsapp.graph import GraphError
from channels.whatsapp.rendering import Part, plain_of
from channels.whatsapp.sending import DeliveryError, Messenger, OutsideWindow

log = logging.getLogger(__name__)

CHANNEL = "whatsapp"
MAX_REPLY_BUTTONS = 3
MAX_LIST_ROWS = 10
BUTTON_ID_LIMIT = 256
LIST_ID_LIMIT = 200


@dataclass(frozen=True)
class SinkSettings:
    typing_delay: float = 0.4          # instant answers (commands, ignored senders) show none
    typing_interval: float = 20.0      # WhatsApp shows the indicator for up to 25 s
    typing_idle_limit: float = 150.0   # stop if nothing happened for this long


def _reason(exc: DeliveryError) -> str:
    """What WhatsApp said, for the person and the log (never a URL or the token)."""
    cause = exc.__cause__
    return cause.message if isinstance(cause, GraphError) else str(exc)


def notice_buttons(text: str, buttons: tuple[Button, ...], tr: Translator) -> dict | None:
    """Reply buttons (≤ 3) or a list (≤ 10 rows) for a notice's command buttons, labelled in
    the reader's language; None when there are none that fit (the notice's text names every
    command anyway)."""
    usable = [b for b in buttons if len(("c:" + b.command).encode()) <= LIST_ID_LIMIT]
    choose = tr._(texts.BUTTONS_BODY)
    body = {"text": text if len(text) <= approvals.BODY_LIMIT else choose}
    if not usable:
        return None
    if len(usable) <= MAX_REPLY_BUTTONS:
        return {"type": "interactive", "interactive": {"type": "button", "body": body, "action": {
            "buttons": [{"type": "reply", "reply": {
                "id": "c:" + b.command, "title": tr.say(b.label)[:approvals.TITLE_LIMIT]}}
                for b in usable]}}}
    rows = [{"id": "c:" + b.command, "title": tr.say(b.label)[:approvals.ROW_TITLE_LIMIT]}
            for b in usable[:MAX_LIST_ROWS]]
    return {"type": "interactive", "interactive": {"type": "list", "body": body, "action": {
        "button": choose[:approvals.TITLE_LIMIT],
        "sections": [{"title": choose[:approvals.ROW_TITLE_LIMIT], "rows": rows}]}}}


class ChatSink:
    def __init__(self, messenger: Messenger, agent: AgentAPI, held: HeldPort, wa_id: str,
                 settings: SinkSettings, *, inbound: str | None = None, attended: bool = True):
        self._messenger = messenger
        self._agent = agent
        self._held = held
        self.wa_id = wa_id
        self._settings = settings
        self._inbound = inbound          # the message being answered (read receipt, typing)
        self._attended = attended
        self._segment: list[str] = []
        self._last_sent = ""
        self._outside: list[tuple[str, str]] = []        # (kind, text) gathered outside the window
        self._held_cards: list[ApprovalView] = []
        self._undelivered = ""
        self._typing: asyncio.Task[None] | None = None
        self._typing_stop = asyncio.Event()
        self._last_activity = time.monotonic()
        self._read = False

    @property
    def recipient(self) -> str:
        return f"{CHANNEL}:{self.wa_id}"

    @property
    def tr(self) -> Translator:
        """The reader's words: a WhatsApp chat is one person's."""
        return self._agent.translator(Sender.of(CHANNEL, self.wa_id))

    # --- the Sink protocol ------------------------------------------------------------------

    async def emit(self, event: Event) -> None:
        self._last_activity = time.monotonic()
        try:
            await self._render(event)
        except DeliveryError as exc:
            await self._hold_failed(event, exc)

    async def _hold_failed(self, event: Event, exc: DeliveryError) -> None:
        """What could not be delivered, held for when the person next writes."""
        reason = _reason(exc)
        if isinstance(event, ApprovalNeeded | ApprovalBatchNeeded):
            views = (event.approval,) if isinstance(event, ApprovalNeeded) else event.approvals
            for view in views:
                await self._held.hold(self.recipient, "approval", json.dumps(asdict(view)),
                                      reason, view.id)
        elif isinstance(event, Notice):
            await self._held.hold(self.recipient, "failed", plain_of(self.tr.say(event.text)),
                                  reason)
        elif isinstance(event, FileOut):
            said = f"📎 {event.name}" + (f"\n{event.caption}" if event.caption else "")
            await self._held.hold(self.recipient, "failed", said, reason)
        else:
            log.warning("whatsapp: could not deliver %s to %s (%s)", type(event).__name__,
                        self.wa_id, reason)
            return
        log.warning("whatsapp: %s to %s not delivered (%s); held for their next message",
                    type(event).__name__, self.wa_id, reason)

    async def _hold_text(self, text: str, exc: DeliveryError) -> None:
        reason = _reason(exc)
        await self._held.hold(self.recipient, "failed", plain_of(text), reason)
        log.warning("whatsapp: a message to %s not delivered (%s); held for their next message",
                    self.wa_id, reason)

    async def _render(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            self._segment.append(event.text)
            return
        if isinstance(event, Done):
            text = event.text if event.text.strip() else "".join(self._segment)
            self._segment = []
            if text.strip() and text.strip() != self._last_sent.strip():
                await self._markdown(text, "job")
            await self.stop_typing()
            return
        await self._flush_segment()
        if isinstance(event, ApprovalNeeded):
            await self._approval(event.approval)
        elif isinstance(event, ApprovalBatchNeeded):
            await self._batch(event.approvals)
        elif isinstance(event, Notice):
            await self._notice(event)
        elif isinstance(event, FileOut):
            await self._guarded("job", event.caption or event.name, lambda: self._messenger.send_file(
                self.wa_id, event.name, event.data, caption=event.caption,
                media_type=event.media_type, kind=self._kind("job")))
        elif isinstance(event, SpeechOut):
            try:   # the text is the answer: a voice note outside the window is simply not sent
                await self._messenger.send_voice(self.wa_id, event.data, kind=self._kind("reply"))
            except OutsideWindow:
                log.info("whatsapp: voice note to %s not sent (outside the 24-hour window)",
                         self.wa_id)
        elif isinstance(event, ErrorEvent):
            await self._markdown(f"⚠️ {self.tr.say(event.message)}", "job")
            await self.stop_typing()
        elif not isinstance(event, ToolStarted):
            return   # tool progress: the typing indicator says the agent is working

    def _kind(self, unattended: str) -> str:
        return "reply" if self._attended else unattended

    async def _flush_segment(self) -> None:
        text, self._segment = "".join(self._segment), []
        if text.strip():
            await self._markdown(text, "job")

    async def _markdown(self, text: str, kind: str) -> None:
        try:
            await self._guarded(kind, text, lambda: self._messenger.send_markdown(
                self.wa_id, text, kind=self._kind(kind)))
        except DeliveryError as exc:
            await self._hold_text(text, exc)
        self._last_sent = text

    async def _guarded(self, kind: str, text: str, send: Callable[[], Awaitable[object]]) -> bool:
        """Send, unless the window is closed: then the text is gathered for `close`."""
        if self._outside and not self._attended:
            self._outside.append((kind, plain_of(text)))
            return False
        try:
            await send()
            return True
        except OutsideWindow:
            self._outside.append((kind, plain_of(text)))
            return False

    # --- approvals --------------------------------------------------------------------------

    async def _approval(self, view: ApprovalView, number: int = 0, total: int = 0) -> None:
        tr = self.tr
        if not approvals.preview_fits(view, tr, number, total):
            sent = await self._preview(view, tr)
            if not sent:
                self._held_cards.append(view)
                self._outside.append(("approval",
                                      plain_of(approvals.card_body(view, tr, number, total))))
                return
        await self._card(view, tr, number, total)

    async def _preview(self, view: ApprovalView, tr: Translator) -> bool:
        if approvals.preview_in_message(view, tr):
            text = approvals.preview_message(view, tr)
            return await self._guarded("approval", "", lambda: self._messenger.send_part(
                self.wa_id, Part(text, text), kind=self._kind("approval")))
        caption = tr._(texts.PREVIEW_CAPTION, tool=view.tool)
        return await self._guarded("approval", "", lambda: self._messenger.send_file(
            self.wa_id, "preview.txt", preview_text(view.summary, tr).encode(), caption=caption,
            media_type="text/plain", kind=self._kind("approval")))

    async def _card(self, view: ApprovalView, tr: Translator, number: int = 0,
                    total: int = 0) -> None:
        body = approvals.card_body(view, tr, number, total)
        if self._outside and not self._attended:
            self._held_cards.append(view)
            self._outside.append(("approval", plain_of(body)))
            return
        wamid = None
        try:
            wamid = await self._messenger.send_interactive(
                self.wa_id, approvals.card(view, tr, number, total), body,
                kind=self._kind("approval"))
        except OutsideWindow:
            self._held_cards.append(view)
            self._outside.append(("approval", plain_of(body)))
            return
        except DeliveryError:
            log.warning("whatsapp: approval buttons for %s not sent; sending commands instead",
                        view.id, exc_info=True)
        if wamid is None:
            fallback = approvals.card_fallback(view, tr, number, total)
            wamid = await self._messenger.send_part(self.wa_id, Part(fallback, fallback))
        await self._agent.set_approval_message_ref(
            view.id, approvals.message_ref(self.wa_id, wamid), CHANNEL)

    async def _batch(self, views: tuple[ApprovalView, ...]) -> None:
        tr = self.tr
        heading = approvals.batch_list(views, tr)
        await self._guarded("approval", approvals.batch_heading_text(views, tr),
                            lambda: self._messenger.send_interactive(
                                self.wa_id, heading, approvals.batch_list_body(len(views), tr),
                                kind=self._kind("approval")))
        for number, view in enumerate(views, start=1):
            await self._approval(view, number, len(views))

    # --- notices ----------------------------------------------------------------------------

    async def _notice(self, event: Notice) -> None:
        kind = "approval" if event.buttons else "reminder"
        text = self.tr.say(event.text)
        markup = notice_buttons(text, event.buttons, self.tr)
        if markup is None:
            await self._markdown(text, kind)
            return
        if len(text) > approvals.BODY_LIMIT:
            await self._markdown(text, kind)
        await self._guarded(kind, text, lambda: self._messenger.send_interactive(
            self.wa_id, markup, text, kind=self._kind(kind)))

    # --- outside the window -----------------------------------------------------------------

    def undelivered(self) -> str:
        """Why something emitted here did not reach the person ("" when everything did)."""
        return self._undelivered

    async def _outside_window(self) -> None:
        gathered, self._outside = self._outside, []
        cards, self._held_cards = self._held_cards, []
        kinds = {kind for kind, _ in gathered}
        kind = "approval" if "approval" in kinds else "job" if "job" in kinds else "reminder"
        text = "\n\n".join(t for _, t in gathered if t.strip())
        carried = False
        tr = self.tr
        try:
            body = tr._(texts.TEMPLATE_APPROVAL, text=text) if kind == "approval" else text
            carried = await self._messenger.template(self.wa_id, kind, body,
                                                     more=tr._(texts.TEMPLATE_MORE))
        except DeliveryError:
            log.warning("whatsapp: the %s template to %s failed", kind, self.wa_id, exc_info=True)
        for view in cards:   # its buttons come when the person writes again
            await self._held.hold(self.recipient, "approval", json.dumps(asdict(view)),
                                  texts.NOT_DELIVERED, view.id)
        if carried:
            log.info("whatsapp: %s for %s sent as a template (outside the 24-hour window)",
                     kind, self.wa_id)
            return
        other = "\n\n".join(t for k, t in gathered if k != "approval" and t.strip())
        if other:
            await self._held.hold(self.recipient, kind, other, texts.NOT_DELIVERED)
        self._undelivered = texts.NOT_DELIVERED
        log.warning("whatsapp: %s for %s %s; held for their next message", kind, self.wa_id,
                    texts.NOT_DELIVERED)

    # --- typing indicator and read receipt ----------------------------------------------------

    def start_typing(self) -> None:
        if self._typing is None and self._inbound:
            self._typing = asyncio.create_task(self._typing_loop())

    async def stop_typing(self) -> None:
        self._typing_stop.set()
        task, self._typing = self._typing, None
        if task is not None:
            await task

    async def close(self) -> None:
        """End of the turn's handling: stop the indicator, send what the window held back."""
        await self.stop_typing()
        with contextlib.suppress(DeliveryError):
            await self._flush_segment()
        if self._outside:
            await self._outside_window()
        if self._inbound and not self._read and self._last_sent:
            await self._messenger.mark_read(self._inbound, typing=False)

    async def _typing_loop(self) -> None:
        delay = self._settings.typing_delay
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._typing_stop.wait(), delay)
            if self._typing_stop.is_set():
                return
            if time.monotonic() - self._last_activity > self._settings.typing_idle_limit:
                return
            assert self._inbound is not None
            await self._messenger.mark_read(self._inbound, typing=True)
            self._read = True
            delay = self._settings.typing_interval
