"""python-telegram-bot's update processor for the inbox: each update runs through `through`
(the inbox's claim, channels/telegram/intake.py), all of them concurrently.

PTB either processes every update one after another (one slow model answer blocks every other
chat) or, with `concurrent_updates`, all at once behind its own semaphore, taken before an
update starts. Order and limits are the inbox's instead (`Inbox.run`): a chat's updates run one
at a time in arrival order, different chats concurrently; an update waiting for its chat holds no
running slot (one user sending 256 messages in a row must not fill every slot and make every
other chat, tap and /stop wait behind that backlog); taps and /stop have no chat key and never
wait. PTB's limit is therefore lifted.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from telegram.ext import BaseUpdateProcessor

Through = Callable[[object, Awaitable[Any]], Awaitable[Any]]

_PTB_LIMIT = 1 << 30   # PTB's semaphore, lifted: waiting updates must not hold running slots


class InboxProcessor(BaseUpdateProcessor):
    def __init__(self, through: Through):
        super().__init__(_PTB_LIMIT)
        self._through = through

    async def do_process_update(self, update: object, coroutine: Awaitable[Any]) -> None:
        await self._through(update, coroutine)

    async def initialize(self) -> None:
        """Nothing to allocate: the inbox keeps the per-chat queues."""

    async def shutdown(self) -> None:
        """Nothing to free."""
