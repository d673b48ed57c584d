"""Per-conversation ordering: one turn at a time per key, in arrival order; keys independent.

A slot exists only while some work for its key is queued or running, so the map does not grow
with the number of chats ever seen. `/stop` cancels the task currently running for a key.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from bot.core.errors import ShuttingDown

T = TypeVar("T")


class Stopped(Exception):
    """The running work was cancelled by /stop (not by shutdown)."""


@dataclass
class _Slot:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0
    current: asyncio.Task | None = None
    owner: str = ""    # whose turn `current` is (/stop lets only them, or an approver, end it)


class SessionQueue:
    def __init__(self) -> None:
        self._slots: dict[str, _Slot] = {}
        self._background: set[asyncio.Task] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self.closing = False
        self.on_idle: Callable[[], None] | None = None   # called as the last work ends

    @property
    def idle(self) -> bool:
        return self._idle.is_set()

    def __len__(self) -> int:
        return len(self._slots)

    async def run(self, key: str, work: Callable[[], Awaitable[T]], owner: str = "") -> T:
        """Run `work()` when every earlier work of `key` is done, as `owner`'s. Raises Stopped on
        /stop, and ShuttingDown once `shutdown` has begun (new or still-queued work is not
        started)."""
        if self.closing:
            raise ShuttingDown()
        slot = self._slots.setdefault(key, _Slot())
        slot.users += 1
        self._idle.clear()
        try:
            async with slot.lock:
                if self.closing:
                    raise ShuttingDown()
                task = asyncio.ensure_future(work())
                slot.current, slot.owner = task, owner
                try:
                    return await task
                except asyncio.CancelledError:
                    current = asyncio.current_task()
                    if task.cancelled() and not (current and current.cancelling()):
                        raise Stopped() from None
                    raise
                finally:
                    slot.current, slot.owner = None, ""
        finally:
            slot.users -= 1
            if slot.users == 0:
                self._slots.pop(key, None)
                if not self._slots:
                    self._idle.set()
                    if self.on_idle is not None:
                        self.on_idle()

    def spawn(self, key: str, work: Callable[[], Awaitable[object]],
              owner: str = "") -> asyncio.Task:
        """Queue work for `key` in the background (e.g. a conversation resumed by a tap)."""
        async def runner() -> None:
            try:
                await self.run(key, work, owner)
            except (Stopped, ShuttingDown):
                pass
        task = asyncio.create_task(runner())
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    def running_for(self, key: str) -> str | None:
        """Whose work is running for `key` right now ("" when nobody's), None when none is."""
        slot = self._slots.get(key)
        if slot and slot.current and not slot.current.done():
            return slot.owner
        return None

    def stop(self, key: str) -> bool:
        slot = self._slots.get(key)
        if slot and slot.current and not slot.current.done():
            slot.current.cancel()
            return True
        return False

    async def drain(self, timeout: float | None = None) -> None:
        """Wait for background work (tests, graceful shutdown)."""
        if self._background:
            await asyncio.wait(set(self._background), timeout=timeout)

    def cancel_all(self) -> None:
        for slot in self._slots.values():
            if slot.current and not slot.current.done():
                slot.current.cancel()

    async def shutdown(self, grace: float) -> bool:
        """Refuse new work, let running turns finish for `grace` seconds, then cancel the rest
        (a cancelled turn records "(cancelled)" results, so nothing is half-written).
        Returns True when everything finished on its own."""
        self.closing = True
        try:
            await asyncio.wait_for(self._idle.wait(), grace)
            return True
        except TimeoutError:
            self.cancel_all()
            try:
                await asyncio.wait_for(self._idle.wait(), 10)
            except TimeoutError:
                pass
            return False
