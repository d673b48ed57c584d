"""Long polling that confirms an update to Telegram only once it is stored.

Telegram forgets updates up to the `offset` of the next `getUpdates` call. PTB's own Updater
advances that offset as soon as a batch is fetched, before anything handled or stored it, so a
process killed right after a fetch lost those messages for good. This loop, on PTB's
`bot.get_updates`, hands each batch to `receive` (which stores it durably) and only then moves
the offset past it. When `receive` fails, the offset stays where it was: the next call fetches
the same updates again, and the inbox's unique update id keeps a re-fetched one from running
twice. A `Conflict` (Telegram serves another poller with this token) ends the loop and calls
`on_conflict` once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence

from telegram import Bot, Update
from telegram.error import Conflict, TelegramError

log = logging.getLogger(__name__)

POLL_TIMEOUT_S = 10           # long-poll duration Telegram holds each getUpdates open
RETRY_DELAYS_S = (0.5, 1.0, 2.0, 5.0, 10.0)   # after a failed fetch or store, then the last again

Receive = Callable[[Sequence[Update]], Awaitable[None]]


class Poller:
    def __init__(self, bot: Bot, receive: Receive, *, allowed_updates: list[str],
                 on_conflict: Callable[[], None], poll_timeout: int = POLL_TIMEOUT_S):
        self._bot = bot
        self._receive = receive
        self._on_conflict = on_conflict
        self._allowed = allowed_updates
        self._timeout = poll_timeout
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def start(self) -> None:
        """Drop any webhook (Telegram refuses getUpdates while one is set), then poll."""
        await self._bot.delete_webhook()
        self._task = asyncio.create_task(self._loop(), name="telegram-polling")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _loop(self) -> None:
        offset: int | None = None
        failures = 0
        while True:
            try:
                updates = await self._bot.get_updates(offset=offset, timeout=self._timeout,
                                                      allowed_updates=self._allowed)
                if updates:
                    await self._receive(updates)
                    offset = updates[-1].update_id + 1
                failures = 0
            except Conflict:
                # Another process polls with this token; polling ends here (see the channel).
                self._on_conflict()
                return
            except TelegramError as exc:
                log.warning("telegram polling error (retrying): %s", exc)
                failures += 1
            except Exception:
                # Not stored, so not confirmed: the same updates come back on the next fetch.
                log.exception("telegram: could not store fetched updates; fetching them again")
                failures += 1
            if failures:
                await asyncio.sleep(RETRY_DELAYS_S[min(failures, len(RETRY_DELAYS_S)) - 1])
