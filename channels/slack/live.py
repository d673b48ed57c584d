"""Messages that grow while a turn runs: the streamed answer and the tool status line.

`LiveMessage` is posted once and then edited with `chat.update`, at most once per `interval`
(Slack allows about one update a second per channel): the newest wanted text is kept and one
deferred flush sends it. Interim updates are best effort; `finish` always lands the final text
(with its plain fallback, and the parts a long answer needs after the first).

`StreamedAnswer` uses Slack's streaming methods (`chat.startStream` / `appendStream` /
`stopStream`, with appends at a bounded rate) where the workspace has them: the text is
appended as it is written and Slack renders the Markdown itself. A stream is a reply in a thread,
so it is used only where the conversation is one. When the workspace refuses the methods, the
`Streaming` switch turns them off for the rest of the process and the answer continues as a
`LiveMessage`. A stream longer than `STREAM_LIMIT` is stopped and the rest goes into a new one,
like a long message is split.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field

from slack_sdk.errors import SlackApiError, SlackClientError

from channels.slack.rendering import MESSAGE_LIMIT, Part, escape, shorten, split_message, to_mrkdwn
from channels.slack.sending import DeliveryError, Poster, error_code

log = logging.getLogger(__name__)

STREAM_LIMIT = 10_000


@dataclass
class Streaming:
    """Whether this workspace lets the bot stream (one switch for the whole channel)."""

    enabled: bool = True
    refusals: list[str] = field(default_factory=list)

    def refused(self, code: str) -> None:
        if self.enabled:
            log.info("slack: streaming unavailable here (%s); answers are edited in place", code)
        self.enabled = False
        self.refusals.append(code)


@dataclass(frozen=True)
class Place:
    channel: str
    thread_ts: str | None
    team_id: str = ""
    user_id: str = ""


class LiveMessage:
    def __init__(self, poster: Poster, place: Place, *, interval: float):
        self._poster = poster
        self._place = place
        self._interval = interval
        self._lock = asyncio.Lock()
        self._wanted: Part | None = None
        self._shown: Part | None = None
        self._last = 0.0
        self._flush: asyncio.Task[None] | None = None
        self.ts: str | None = None

    async def show(self, part: Part) -> None:
        self._wanted = part
        if self.ts is None:
            async with self._lock:
                if self.ts is None:
                    self.ts = await self._poster.post(self._place.channel, part,
                                                      thread_ts=self._place.thread_ts)
                    self._shown, self._last = part, time.monotonic()
            return
        if self._flush is None or self._flush.done():
            self._flush = asyncio.create_task(self._flush_later())

    async def finish(self, parts: list[Part]) -> None:
        await self.close()
        if not parts:
            return
        async with self._lock:
            first, rest = parts[0], parts[1:]
            if self.ts is None:
                self.ts = await self._poster.post(self._place.channel, first,
                                                  thread_ts=self._place.thread_ts)
            elif first != self._shown:
                await self._poster.update(self._place.channel, self.ts, first)
            self._shown = first
            for part in rest:
                await self._poster.post(self._place.channel, part, thread_ts=self._place.thread_ts)

    async def close(self) -> None:
        task, self._flush = self._flush, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _flush_later(self) -> None:
        delay = self._last + self._interval - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)   # Slack's update rate, not synchronisation
        async with self._lock:
            wanted = self._wanted
            if wanted is None or wanted == self._shown or self.ts is None:
                return
            try:
                await self._poster.update(self._place.channel, self.ts, wanted)
            except DeliveryError:
                log.warning("slack: an interim update failed", exc_info=True)
                return
            self._shown, self._last = wanted, time.monotonic()


class _Stream:
    """One streamed message: started at once (so a refusal is known before any text is lost),
    then appended to at most once per `interval`, then stopped with whatever is left."""

    def __init__(self, poster: Poster, place: Place, *, interval: float):
        self._client = poster.client
        self._place = place
        self._interval = interval
        self._pending: list[str] = []
        self._lock = asyncio.Lock()
        self._flush: asyncio.Task[None] | None = None
        self._last = 0.0
        self.ts: str | None = None
        self.chars = 0

    async def start(self, text: str) -> None:
        place = self._place
        answer = await self._client.chat_startStream(
            channel=place.channel, thread_ts=place.thread_ts, markdown_text=text,
            recipient_team_id=place.team_id or None, recipient_user_id=place.user_id or None)
        self.ts, self.chars, self._last = str(answer["ts"]), len(text), time.monotonic()

    def append(self, text: str) -> None:
        self._pending.append(text)
        self.chars += len(text)
        if self._flush is None or self._flush.done():
            self._flush = asyncio.create_task(self._flush_later())

    async def _flush_later(self) -> None:
        delay = self._last + self._interval - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)   # Slack's rate for stream appends, not synchronisation
        async with self._lock:
            text, self._pending = "".join(self._pending), []
            if not text:
                return
            try:
                await self._client.chat_appendStream(channel=self._place.channel, ts=self.ts,
                                                     markdown_text=text)
            except SlackClientError:
                self._pending.insert(0, text)   # stop() carries it
                log.warning("slack: a stream append failed; the text follows at the end",
                            exc_info=True)
            self._last = time.monotonic()

    async def stop(self, extra: str = "") -> None:
        task, self._flush = self._flush, None
        if task is not None and not task.done():
            if self._lock.locked():
                await asyncio.wait({task})   # a request in flight completes; pending text stays
            else:
                # Still waiting for its turn: its text has not been taken, so it goes with the
                # stop (one call fewer, and the answer ends now rather than after the wait).
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        async with self._lock:
            text, self._pending = "".join(self._pending) + extra, []
            await self._client.chat_stopStream(channel=self._place.channel, ts=self.ts,
                                               markdown_text=text or None)


class StreamedAnswer:
    """One segment of streamed answer text (until a tool starts or the turn ends)."""

    def __init__(self, poster: Poster, place: Place, streaming: Streaming, *, interval: float,
                 stream_interval: float):
        self._poster = poster
        self._place = place
        self._streaming = streaming
        self._interval = interval                  # chat.update, when it cannot stream
        self._stream_interval = stream_interval    # chat.appendStream
        self._text: list[str] = []
        self._head = ""
        self._stream: _Stream | None = None
        self._streamed = 0              # characters carried by streams so far
        self._live: LiveMessage | None = None

    @property
    def text(self) -> str:
        return "".join(self._text)

    async def add(self, delta: str) -> None:
        self._text.append(delta)
        if self._live is None and (self._stream is not None or self._can_stream()):
            try:
                await self._append(delta)
                return
            except SlackApiError as exc:
                if self._streamed or self._stream is not None:
                    raise DeliveryError(f"slack stream failed: {error_code(exc)}") from exc
                self._streaming.refused(error_code(exc))
        await self._show_live()

    def _can_stream(self) -> bool:
        return self._streaming.enabled and self._place.thread_ts is not None

    async def _append(self, delta: str) -> None:
        if self._stream is not None and self._stream.chars + len(delta) > STREAM_LIMIT:
            stream, self._stream = self._stream, None
            await stream.stop()
        if self._stream is None:
            if not self.text[self._streamed:].strip():
                return   # whitespace alone cannot start a stream; it goes with the next text
            stream = _Stream(self._poster, self._place, interval=self._stream_interval)
            await stream.start(self.text[self._streamed:])
            self._stream = stream
        else:
            self._stream.append(delta)
        self._streamed = len(self.text)

    async def _show_live(self) -> None:
        if len(self._head) <= MESSAGE_LIMIT:
            self._head = self.text[:MESSAGE_LIMIT + 1]
        shown = shorten(self._head, MESSAGE_LIMIT)
        if not shown.strip():
            return
        if self._live is None:
            self._live = LiveMessage(self._poster, self._place, interval=self._interval)
        await self._live.show(Part(to_mrkdwn(shown), escape(shown)))

    async def finish(self, final: str = "") -> bool:
        """The segment's last word (`final` when the turn's answer is known, else what was
        streamed); True when anything was shown."""
        text = final if final.strip() else self.text
        if self._streamed:
            streamed = self.text[:self._streamed]
            rest = text[len(streamed):] if text.startswith(streamed) else ""
            stream, self._stream = self._stream, None
            try:
                if stream is not None:
                    await stream.stop(rest)
                elif rest.strip():
                    await self._poster.post_markdown(self._place.channel, rest,
                                                     thread_ts=self._place.thread_ts)
            except SlackClientError as exc:
                raise DeliveryError(f"slack stream failed: {error_code(exc)}") from exc
            return True
        if self._live is not None:
            await self._live.finish(split_message(text))
            return True
        return False

    async def close(self) -> None:
        if self._live is not None:
            await self._live.close()
        stream, self._stream = self._stream, None
        if stream is not None:
            with contextlib.suppress(SlackClientError):
                await stream.stop()
