"""An update processor that keeps each chat in order while different chats run concurrently.

python-telegram-bot either processes every update one after another (one slow model answer
blocks every other chat) or, with `concurrent_updates(True)`, all at once with no per-chat order
(a user's second message may be answered before the first). This processor takes a FIFO lock per
chat key: updates of one chat wait for each other, other chats do not. A lock lives only while
some update of its chat is running or waiting, so the map is empty when the bot is idle.

Updates whose key is None (button taps, /stop) skip the queue: a /stop must reach the agent while
the turn it cancels is still running.

The concurrency limit counts running updates only. PTB's own semaphore is taken before
`do_process_update`, so an update waiting for its chat's lock held a slot: one user sending 256
messages in a row (each a model turn) filled every slot, and every other chat, every button tap
and every /stop waited behind that backlog. PTB's limit is therefore lifted and ours is taken
once the chat's lock is held; keyless updates (taps, /stop) are short and never wait for it.

`through(update, coroutine)` is what running an update means (default: awaiting it); the
channel passes the inbox's claim there, so the chat's in-process order comes first and the claim
across processes second.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from telegram.ext import BaseUpdateProcessor

KeyFunction = Callable[[object], Hashable | None]
Through = Callable[[object, Awaitable[Any]], Awaitable[Any]]

DEFAULT_MAX_CONCURRENT = 256
_PTB_LIMIT = 1 << 30   # PTB's semaphore, lifted: waiting updates must not hold running slots


@dataclass
class _ChatSlot:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0     # updates of this chat running or waiting for the lock


class ChatOrderedProcessor(BaseUpdateProcessor):
    """Runs updates of the same chat key in arrival order, different keys concurrently."""

    def __init__(self, key_for: KeyFunction, max_concurrent_updates: int = DEFAULT_MAX_CONCURRENT,
                 through: Through | None = None):
        super().__init__(_PTB_LIMIT)
        self._key_for = key_for
        self._through = through or _awaited
        self._slots: dict[Hashable, _ChatSlot] = {}
        self._running = asyncio.BoundedSemaphore(max_concurrent_updates)

    @property
    def active_chats(self) -> int:
        """How many chat locks exist right now (0 when idle: the map never grows unbounded)."""
        return len(self._slots)

    async def do_process_update(self, update: object, coroutine: Awaitable[Any]) -> None:
        key = self._key_for(update)
        if key is None:
            await self._through(update, coroutine)
            return
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = _ChatSlot()
        slot.users += 1
        try:
            # asyncio.Lock wakes waiters in FIFO order, and PTB starts one task per update in
            # the order the updates arrived, so a chat's updates run in arrival order.
            async with slot.lock, self._running:
                await self._through(update, coroutine)
        finally:
            slot.users -= 1
            if slot.users == 0:
                del self._slots[key]

    async def initialize(self) -> None:
        """Nothing to allocate: locks are created on demand."""

    async def shutdown(self) -> None:
        """Nothing to free: every lock is dropped when its chat goes idle."""


async def _awaited(update: object, coroutine: Awaitable[Any]) -> Any:
    return await coroutine
