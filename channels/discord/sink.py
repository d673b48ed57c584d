"""Rendering one turn's events on Discord.

A `TurnSink` receives the agent's events and turns them into Discord messages through an
*outlet*: `ChannelOutlet` posts into a text channel or DM (with a DM to the requester for
private notices), `InteractionOutlet` answers a slash command with ephemeral followups. Every
send passes `allowed_mentions=NO_MENTIONS`, so nothing the model writes can ping anyone.

Delivery failures (Discord refusing a message) are logged with their traceback and do not abort
the turn: the agent has already stored the conversation, and there is no one else to tell.
"""

from __future__ import annotations

import io
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Protocol

import discord

from bot.core.approval_cards import ApprovalBatchNeeded, ApprovalNeeded, ApprovalView
from bot.core.events import (
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
from bot.language.catalogs import N_
from bot.language.translator import Translator
from channels.discord.buttons import view_for
from channels.discord.live import LiveAnswer, StatusLine, StreamSettings
from channels.discord.rendering import split_message

log = logging.getLogger(__name__)


class ApprovalDesk(Protocol):
    """Where approval requests are posted (`channels.discord.approvals.ApprovalDesk`)."""

    async def post_request(self, approval: ApprovalView, outlet: Outlet) -> None: ...

    async def post_batch(self, approvals: tuple[ApprovalView, ...], outlet: Outlet) -> None: ...

    def reader(self, outlet: Outlet) -> Translator: ...

NO_MENTIONS = discord.AllowedMentions.none()
DM_REFUSED = N_("I couldn't send you a direct message — allow DMs from server members and try "
                "again.")


class Outlet(Protocol):
    client: discord.Client
    requester_id: int          # who the outlet posts for: whose language its messages speak

    async def send(self, text: str, *, view: discord.ui.View | None = None) -> discord.Message | None: ...

    async def send_private(self, text: str, refused: str = DM_REFUSED) -> None: ...

    async def send_approval(self, text: str, view: discord.ui.View) -> discord.Message | None: ...

    async def send_file(self, name: str, data: bytes, caption: str) -> None: ...

    def typing(self) -> Any: ...


@asynccontextmanager
async def keep_typing(channel: discord.abc.Messageable) -> AsyncIterator[None]:
    """Discord's typing indicator for the duration of a block; a refused indicator is not fatal."""
    indicator = channel.typing()
    try:
        await indicator.__aenter__()
    except discord.HTTPException:
        log.warning("discord: typing indicator refused", exc_info=True)
        yield
        return
    try:
        yield
    finally:
        await indicator.__aexit__(None, None, None)


async def _send_chunks(channel: discord.abc.Messageable, text: str, *,
                       view: discord.ui.View | None = None,
                       reference: discord.MessageReference | None = None) -> discord.Message | None:
    """Post `text` split at 2000 characters; the view (buttons) goes on the last chunk."""
    chunks = split_message(text)
    sent: discord.Message | None = None
    for index, chunk in enumerate(chunks):
        last = index == len(chunks) - 1
        kwargs: dict[str, Any] = {"allowed_mentions": NO_MENTIONS}
        if view is not None and last:
            kwargs["view"] = view
        if reference is not None and index == 0:
            kwargs.update(reference=reference, mention_author=False)
        sent = await channel.send(chunk, **kwargs)
    return sent


class ChannelOutlet:
    """Posts into a channel (guild text channel or DM) on behalf of one requester."""

    def __init__(self, client: discord.Client, channel: discord.abc.Messageable, requester_id: int, *,
                 in_guild: bool, approvals_in_dm: bool = False,
                 reply_to: discord.MessageReference | None = None):
        self.client = client
        self.channel = channel
        self.requester_id = requester_id
        self.in_guild = in_guild
        self.approvals_in_dm = approvals_in_dm
        self._reply_to = reply_to

    async def send(self, text: str, *, view: discord.ui.View | None = None) -> discord.Message | None:
        # Only the first message of a turn replies to the user's message; later ones just follow.
        reference, self._reply_to = self._reply_to, None
        return await _send_chunks(self.channel, text, view=view, reference=reference)

    async def _dm(self) -> discord.DMChannel:
        return await self.client.create_dm(discord.Object(id=self.requester_id))

    async def send_private(self, text: str, refused: str = DM_REFUSED) -> None:
        """`text` to the requester alone; `refused` (in their words) here when DMs are off."""
        if not self.in_guild:
            await self.send(text)
            return
        try:
            await _send_chunks(await self._dm(), text)
        except discord.Forbidden:
            # Never fall back to posting the private text in the channel: it may be a pairing code.
            log.info("discord: user %s does not accept DMs", self.requester_id)
            await self.send(refused)

    async def send_approval(self, text: str, view: discord.ui.View) -> discord.Message | None:
        """The request with its buttons: here, or by DM to the requester (`approvals_in_dm`)."""
        if self.in_guild and self.approvals_in_dm:
            try:
                return await _send_chunks(await self._dm(), text, view=view)
            except discord.HTTPException:
                # Buttons nobody can see would leave the request unanswerable: use the channel.
                log.warning("discord: cannot DM an approval request; posting it in the channel",
                            exc_info=True)
        return await self.send(text, view=view)

    async def send_file(self, name: str, data: bytes, caption: str) -> None:
        await self.channel.send(caption[:2000] or None, file=discord.File(io.BytesIO(data), filename=name),
                                allowed_mentions=NO_MENTIONS)

    def typing(self) -> Any:
        return keep_typing(self.channel)

    async def typing_pulse(self) -> None:
        """One typing indicator (Discord shows it ~10 s) for work that continues in the background."""
        try:
            await self.channel.typing()
        except discord.HTTPException:
            log.warning("discord: typing indicator refused", exc_info=True)


class DirectOutlet(ChannelOutlet):
    """Posts into a user's DM with the bot, opening it on first use."""

    def __init__(self, client: discord.Client, user_id: int):
        super().__init__(client, client.get_partial_messageable(user_id), user_id, in_guild=False)

    async def send(self, text: str, *, view: discord.ui.View | None = None) -> discord.Message | None:
        return await _send_chunks(await self._dm(), text, view=view)

    async def send_approval(self, text: str, view: discord.ui.View) -> discord.Message | None:
        return await self.send(text, view=view)

    async def send_file(self, name: str, data: bytes, caption: str) -> None:
        await (await self._dm()).send(caption[:2000] or None, allowed_mentions=NO_MENTIONS,
                                      file=discord.File(io.BytesIO(data), filename=name))

    def typing(self) -> Any:
        return _no_typing()


class InteractionOutlet:
    """Answers a (deferred) slash command: every reply is an ephemeral followup."""

    def __init__(self, interaction: discord.Interaction, channel_outlet: ChannelOutlet):
        self.client = interaction.client
        self.interaction = interaction
        self.channel_outlet = channel_outlet       # approval buttons must live on a real message
        self.requester_id = channel_outlet.requester_id

    async def send(self, text: str, *, view: discord.ui.View | None = None) -> discord.Message | None:
        if view is not None:
            return await self.channel_outlet.send(text, view=view)
        sent = None
        for chunk in split_message(text):
            sent = await self.interaction.followup.send(chunk, ephemeral=True, wait=True,
                                                        allowed_mentions=NO_MENTIONS)
        return sent

    async def send_private(self, text: str, refused: str = DM_REFUSED) -> None:
        await self.send(text)                      # ephemeral already: only the user sees it

    async def send_approval(self, text: str, view: discord.ui.View) -> discord.Message | None:
        # Buttons live on a normal message: an ephemeral one cannot be edited after a restart.
        return await self.channel_outlet.send_approval(text, view)

    async def send_file(self, name: str, data: bytes, caption: str) -> None:
        await self.interaction.followup.send(caption[:2000], ephemeral=True, allowed_mentions=NO_MENTIONS,
                                             file=discord.File(io.BytesIO(data), filename=name))

    def typing(self) -> Any:
        return _no_typing()


@asynccontextmanager
async def _no_typing() -> AsyncIterator[None]:
    yield          # a deferred interaction already shows "thinking…"


class TurnSink:
    """The `bot.core.events.Sink` of one turn (or of the continuation after an approval tap).

    Streamed text is shown as it is written (channels.discord.live: a message edited in place
    at most once per 1.2 s, continued in follow-up messages past 2,000 characters); tool
    progress is a status line edited at the same rate, showing the newest state. Text the
    model writes before calling a tool ("Let me check…") is finished when the tool starts or
    asks for approval, so it stays above the status line or the buttons; the final answer
    replaces the streamed text with `Done`, whole.
    """

    def __init__(self, outlet: Outlet, desk: ApprovalDesk, stream: StreamSettings | None = None):
        self.outlet = outlet
        self.desk = desk
        self.emitted = False
        self._stream = stream or StreamSettings()
        self._live: LiveAnswer | None = None  # the current model step's text, as streamed
        self._step_text = ""                 # what was posted from the current step
        self._status: StatusLine | None = None     # the current step's tool status line
        self._status_lines: list[StatusLine] = []  # this turn's, settled at its end

    async def emit(self, event: Event) -> None:
        if self.outlet.client.is_closed():
            # The channel was stopped while the agent finished a turn (e.g. one resumed after an
            # approval); the conversation is stored, there is just no connection to show it on.
            log.info("discord: channel stopped; %s not shown", type(event).__name__)
            return
        if isinstance(event, TextDelta):
            if self._live is None:
                self._live = LiveAnswer(self.outlet, self._stream)
            self._live.append(event.text)
            return
        self.emitted = True
        try:
            await self._render(event)
        except discord.HTTPException:
            log.warning("discord: could not deliver %s", type(event).__name__, exc_info=True)

    async def _finish_step_text(self, final: str | None = None) -> None:
        """The streamed step in its final form (`final`, else what was streamed)."""
        live, self._live = self._live, None
        if live is None:
            return
        text = final if final is not None and final.strip() else live.text
        self.emitted = True
        if text.strip():
            self._step_text = text
            self._status = None              # a new status line goes below this text
            await live.finish(text)
        else:
            await live.close()

    async def close(self) -> None:
        """End of the handling: nothing is left streaming."""
        if self._live is not None:
            await self._live.close()
        await self._settle_status()

    async def _settle_status(self) -> None:
        """Each status line shows its last text (its edit waits for the edit rate)."""
        lines, self._status_lines = self._status_lines, []
        for line in lines:
            await line.settle()

    async def _render(self, event: Event) -> None:
        if isinstance(event, Done):
            if self._live is not None:
                await self._finish_step_text(event.text)
            # Waiting for approval, Done repeats the step's text: it is already above the buttons.
            elif event.text.strip() and event.text.strip() != self._step_text.strip():
                await self.outlet.send(event.text)
            await self._settle_status()   # the answer first; the status line's last edit after
            return
        await self._finish_step_text()
        if isinstance(event, Notice):
            tr = self.desk.reader(self.outlet)
            if event.private:
                await self.outlet.send_private(tr.say(event.text), tr._(DM_REFUSED))
            else:
                await self.outlet.send(tr.say(event.text), view=view_for(event.buttons, tr))
        elif isinstance(event, ErrorEvent):
            await self.outlet.send(f"⚠️ {self.desk.reader(self.outlet).say(event.message)}")
        elif isinstance(event, FileOut):
            await self.outlet.send_file(event.name, event.data, event.caption)
        elif isinstance(event, SpeechOut):   # an audio attachment Discord plays in the chat
            await self.outlet.send_file(event.name, event.data, "")
        elif isinstance(event, ApprovalNeeded):
            await self.desk.post_request(event.approval, self.outlet)
        elif isinstance(event, ApprovalBatchNeeded):
            await self.desk.post_batch(event.approvals, self.outlet)
        else:
            await self._on_tool(event)

    async def _on_tool(self, event: Event) -> None:
        if isinstance(event, ToolStarted):
            await self._set_status(f"⚙️ `{event.tool}` …")
        elif isinstance(event, ToolProgress):
            said = self.desk.reader(self.outlet).say(event.text)
            await self._set_status(f"⚙️ `{event.tool}` — {said}"[:1900])
        elif isinstance(event, ToolFinished):
            mark = "✅" if event.ok else "⚠️"
            said = self.desk.reader(self.outlet).say(event.summary) if event.summary else ""
            detail = f" — {said}" if said else ""
            await self._set_status(f"{mark} `{event.tool}`{detail}"[:1900])

    async def _set_status(self, text: str) -> None:
        """One status message per step, edited in place at most once per interval: a change
        sooner than that is shown (the newest one) when the interval has passed."""
        if self._status is None:
            message = await self.outlet.send(text)
            if message is not None:
                self._status = StatusLine(message, text, self._stream)
                self._status_lines.append(self._status)
            return
        await self._status.show(text)
