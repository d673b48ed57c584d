"""A message that is sent once and then edited in place as it grows (streamed text, tool status).

Telegram allows roughly one edit per second per chat (fewer in groups), so edits are throttled:
the newest wanted text is kept and a single deferred flush sends it when the interval has passed.
Interim edits are best effort (flood control just pushes the next one later); the final edit in
`finish` waits for flood control and falls back to plain text, so the last word always lands.

With `first_delay` set (streamed text), the first send waits that long in a task instead of
happening inside `show`: the text that arrives meanwhile goes out in the same message, and an
answer that is complete by then is sent once, by `finish`, instead of being sent and then edited
(one Bot API call instead of two, and no edit spent from the chat's budget). The final text is
never delayed by this. The caller must `finish` or `close` the message before sending anything
else in the chat, which keeps messages in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from telegram.error import RetryAfter

from channels.telegram.rendering import Part
from channels.telegram.sending import DeliveryError, Messenger, retry_seconds

log = logging.getLogger(__name__)


class LiveMessage:
    def __init__(self, messenger: Messenger, chat_id: int, *, interval: float,
                 reply_to: int | None = None, thread_id: int | None = None,
                 first_delay: float | None = None):
        self._messenger = messenger
        self._chat_id = chat_id
        self._interval = interval
        self._reply_to = reply_to
        self._thread_id = thread_id
        self._lock = asyncio.Lock()
        self._wanted: Part | None = None
        self._shown: Part | None = None
        self._last_edit = 0.0
        self._not_before = 0.0
        self._flush: asyncio.Task[None] | None = None
        self._first_delay = first_delay
        self._first: asyncio.Task[None] | None = None   # the deferred first send
        self._first_sending = False                     # ... has begun its request
        self.message_id: int | None = None

    async def show(self, part: Part) -> None:
        """Make `part` the message's content soon (now if it was never sent)."""
        self._wanted = part
        if self.message_id is None and self._first_delay is not None:
            if self._first is None or self._first.done():
                self._first = asyncio.create_task(self._send_first_soon())
            return
        if self.message_id is None:
            async with self._lock:
                if self.message_id is None:
                    await self._send_first(part)
            return
        if self._flush is None or self._flush.done():
            self._flush = asyncio.create_task(self._flush_later())

    async def finish(self, parts: list[Part]) -> None:
        """Final content: the first part replaces the message, further parts follow it."""
        await self._settle_first(cancel_unstarted=bool(parts))
        await self._cancel_flush()
        if not parts:
            return
        async with self._lock:
            first, rest = parts[0], parts[1:]
            if self.message_id is None:
                sent = await self._messenger.send(self._chat_id, first, reply_to=self._reply_to,
                                                  thread_id=self._thread_id)
                self.message_id = sent.message_id
            elif first != self._shown:
                await self._messenger.edit(self._chat_id, self.message_id, first)
            self._shown = first
            for part in rest:
                await self._messenger.send(self._chat_id, part, thread_id=self._thread_id)

    async def close(self) -> None:
        await self._settle_first(cancel_unstarted=False)   # shown text is never dropped
        await self._cancel_flush()

    async def _send_first_soon(self) -> None:
        assert self._first_delay is not None
        await asyncio.sleep(self._first_delay)  # gathering text for the first message
        async with self._lock:
            part = self._wanted
            if self.message_id is not None or part is None:
                return
            self._first_sending = True
            try:
                await self._send_first(part)
            except DeliveryError:
                # Like any delivery failure: logged, never raised into the turn; the next
                # show() or finish() tries again.
                log.warning("telegram: could not deliver a streamed message to chat %s",
                            self._chat_id, exc_info=True)
                return
            finally:
                self._first_sending = False
        if self._wanted != self._shown and (self._flush is None or self._flush.done()):
            self._flush = asyncio.create_task(self._flush_later())

    async def _settle_first(self, *, cancel_unstarted: bool) -> None:
        """Wait for a deferred first send in flight; one not begun yet is cancelled when the
        caller is about to send the final text itself (else it is left to run)."""
        task, self._first = self._first, None
        if task is None or task.done():
            return
        if cancel_unstarted and not self._first_sending:
            task.cancel()
        # asyncio.wait: if our caller is cancelled, a request in flight still completes.
        await asyncio.wait({task})

    async def _send_first(self, part: Part) -> None:
        sent = await self._messenger.send(self._chat_id, part, reply_to=self._reply_to,
                                          thread_id=self._thread_id)
        self.message_id = sent.message_id
        self._shown = part
        self._last_edit = time.monotonic()

    async def _flush_later(self) -> None:
        delay = max(self._last_edit + self._interval, self._not_before) - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)  # Telegram's edit rate limit, not synchronisation
        async with self._lock:
            wanted = self._wanted
            if wanted is None or wanted == self._shown or self.message_id is None:
                return
            try:
                await self._messenger.edit(self._chat_id, self.message_id, wanted, wait_on_flood=False)
            except RetryAfter as exc:
                # Skip this frame; the next show() (or finish) sends the newest text later.
                self._not_before = time.monotonic() + retry_seconds(exc)
                return
            except DeliveryError:
                log.warning("interim edit of a telegram message failed", exc_info=True)
                return
            self._shown = wanted
            self._last_edit = time.monotonic()

    async def _cancel_flush(self) -> None:
        task, self._flush = self._flush, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
