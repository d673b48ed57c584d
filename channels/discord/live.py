"""An answer streamed into Discord messages edited in place as the model writes it.

Discord allows about five edits per five seconds in a channel, so each message is edited at most
once per `interval` (1.2 s): text arriving meanwhile waits for the next round, and only the
newest text is sent. The first message waits `first_delay` to gather text, so a quick answer is
one message and no edit. Past 2,000 characters the answer continues in follow-up messages (split
where code blocks stay balanced, channels.discord.rendering); while it is being written the last
one ends with a cursor. A 429 is discord.py's to honour: its HTTP client waits `retry_after` and
sends the edit again, and a round in flight holds the next one back meanwhile.

`finish` puts the final text in place, whole: each message edited to its part (still at most
one edit per interval), further parts sent after it. A message that cannot be edited (deleted,
refused) is not the end of the answer: its part is sent as a new message. The clock and the
sleep are injected, so tests count edits per second without waiting for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp
import discord

from channels.discord.rendering import split_message

log = logging.getLogger(__name__)

CURSOR = " ▌"
NO_MENTIONS = discord.AllowedMentions.none()


@dataclass(frozen=True)
class StreamSettings:
    interval: float = 1.2          # seconds between two edits of one message
    first_delay: float = 0.3       # text gathered before the first message is sent
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep


class Poster(Protocol):
    async def send(self, text: str) -> discord.Message | None: ...


class LiveAnswer:
    def __init__(self, poster: Poster, settings: StreamSettings):
        self._poster = poster
        self._settings = settings
        self._parts: list[str] = []
        self._messages: list[discord.Message] = []
        self._shown: list[str] = []
        self._edited_at: list[float] = []
        self._opened = settings.clock()
        self._round: asyncio.Task[None] | None = None
        self._rendering = False
        self._calm_until = 0.0     # after a failed round: the next one waits an interval
        self._ended = False        # finished or closed: no round starts again
        self._lock = asyncio.Lock()

    @property
    def text(self) -> str:
        return "".join(self._parts)

    def append(self, text: str) -> None:
        self._parts.append(text)
        if not self._ended and (self._round is None or self._round.done()):
            self._round = asyncio.create_task(self._next_round())

    async def finish(self, final: str) -> None:
        """The final text, whole, in place of the streamed one."""
        await self._settle()
        async with self._lock:
            await self._render(split_message(final), final=True)

    async def close(self) -> None:
        """Stop streaming; what is shown stays."""
        await self._settle()

    # --- rounds ---------------------------------------------------------------------------

    def _wanted(self) -> list[str]:
        return split_message(self.text.rstrip() + CURSOR) if self.text.strip() else []

    def _due(self, chunks: list[str]) -> float | None:
        """When the next round can change something (None: nothing to change)."""
        if not self._messages:
            first = self._opened + self._settings.first_delay
            return max(first, self._calm_until) if chunks else None
        times = [self._edited_at[i] + self._settings.interval if i < len(self._messages)
                 else self._settings.clock()
                 for i, chunk in enumerate(chunks)
                 if i >= len(self._messages) or chunk != self._shown[i]]
        return None if not times else max(min(times), self._calm_until)

    async def _next_round(self) -> None:
        due = self._due(self._wanted())
        if due is None:
            return
        wait = due - self._settings.clock()
        if wait > 0:
            await self._settings.sleep(wait)   # Discord's edit rate, not synchronisation
        async with self._lock:
            self._rendering = True
            try:
                await self._render(self._wanted(), final=False)
            except (discord.HTTPException, aiohttp.ClientError, OSError):
                log.warning("discord: an interim edit of a streamed answer failed", exc_info=True)
                self._calm_until = self._settings.clock() + self._settings.interval
            finally:
                self._rendering = False
        if not self._ended and self._due(self._wanted()) is not None:
            self._round = asyncio.create_task(self._next_round())

    async def _settle(self) -> None:
        """A round waiting for its time is cancelled; one sending is let finish."""
        self._ended = True
        task, self._round = self._round, None
        if task is None or task.done():
            return
        if not self._rendering:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait({task})

    # --- messages -------------------------------------------------------------------------

    async def _render(self, chunks: list[str], *, final: bool) -> None:
        for index, chunk in enumerate(chunks):
            if index < len(self._messages):
                if chunk != self._shown[index]:
                    await self._edit(index, chunk, final=final)
            else:
                await self._send(chunk)
        if final:
            for message in self._messages[len(chunks):]:   # text that moved up: not left twice
                with contextlib.suppress(discord.HTTPException):
                    await message.delete()

    async def _edit(self, index: int, chunk: str, *, final: bool) -> None:
        wait = self._edited_at[index] + self._settings.interval - self._settings.clock()
        if wait > 0:
            if not final:
                return          # this message's turn comes in a later round
            await self._settings.sleep(wait)
        try:
            await self._messages[index].edit(content=chunk, allowed_mentions=NO_MENTIONS)
        except discord.HTTPException:
            self._edited_at[index] = self._settings.clock()
            if not final:
                raise
            # Reply even when the edit fails: the part goes out as a message of its own.
            log.warning("discord: the final edit of a streamed answer failed; sending it anew",
                        exc_info=True)
            sent = await self._poster.send(chunk)
            if sent is not None:
                self._messages[index] = sent
        self._shown[index] = chunk
        self._edited_at[index] = self._settings.clock()

    async def _send(self, chunk: str) -> None:
        sent = await self._poster.send(chunk)
        if sent is None:
            return
        self._messages.append(sent)
        self._shown.append(chunk)
        self._edited_at.append(self._settings.clock())


class StatusLine:
    """The tool status line below a step's text: one message, edited in place at most once per
    `interval` like the streamed answer. A change arriving sooner (two tools started and
    finished within milliseconds) waits for its turn in the background, and only the newest
    text is then shown; `settle` (at the turn's end) waits for that last edit."""

    def __init__(self, message: discord.Message, text: str, settings: StreamSettings):
        self._message = message
        self._settings = settings
        self._shown = self._wanted = text
        self._edited_at = settings.clock()
        self._task: asyncio.Task[None] | None = None

    async def show(self, text: str) -> None:
        self._wanted = text
        if self._task is not None and not self._task.done():
            return              # the waiting edit will show the newest text
        if self._settings.clock() - self._edited_at >= self._settings.interval:
            await self._edit()
        elif self._wanted != self._shown:
            self._task = asyncio.create_task(self._later())

    async def settle(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            await asyncio.wait({task})

    async def _later(self) -> None:
        try:
            while self._wanted != self._shown:
                wait = self._edited_at + self._settings.interval - self._settings.clock()
                if wait > 0:
                    await self._settings.sleep(wait)   # Discord's edit rate, not synchronisation
                await self._edit()
        except Exception:   # a task of its own: nobody else would see it fail
            log.warning("discord: the tool status line could not be edited", exc_info=True)

    async def _edit(self) -> None:
        text = self._wanted
        if text == self._shown:
            return
        self._edited_at = self._settings.clock()
        await self._message.edit(content=text, allowed_mentions=NO_MENTIONS)
        self._shown = text
