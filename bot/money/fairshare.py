"""A bounded pool of model-call slots shared fairly between senders.

`[agent] max_concurrent_llm_calls` slots; one sender's share is
`floor(slots × [rate_limits] max_share_of_model_slots)` (at least one).

* A sender holding fewer slots than its share takes any free slot.
* A sender at its share may borrow an idle slot only while a full share of slots stays free
  after it: work is conserved (a lone sender with many chats is not throttled to its share),
  yet a newcomer always finds a slot at once instead of waiting for a long call to end.
* When a slot frees, waiting senders below their share go first; among senders it goes round
  robin, and each sender's own calls keep their order.

A share of 1.0 turns fair sharing off: one FIFO queue for every call, as a plain semaphore. The
work per release grows with the number of distinct senders waiting, never with the number of
queued calls.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class FairSlots:
    def __init__(self, total: int, share: float = 1.0):
        if total < 1:
            raise ValueError("at least one slot is needed")
        self.total = total
        self.share = max(1, min(total, math.floor(total * share + 1e-9)))
        self._held: dict[str, int] = {}
        self._in_use = 0
        self._fair = self.share < total
        # Waiting calls per sender, senders in round-robin order (one shared queue when not fair).
        self._waiting: dict[str, deque[tuple[str, asyncio.Future[None]]]] = {}

    @property
    def free(self) -> int:
        return self.total - self._in_use

    def held(self, sender: str) -> int:
        return self._held.get(sender, 0)

    def waiting(self) -> int:
        return sum(len(queue) for queue in self._waiting.values())

    @asynccontextmanager
    async def hold(self, sender: str) -> AsyncIterator[None]:
        await self.acquire(sender)
        try:
            yield
        finally:
            self.release(sender)

    async def acquire(self, sender: str) -> None:
        key = sender if self._fair else ""
        if key not in self._waiting and self._may_take(sender):
            self._take(sender)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (sender, future)
        self._waiting.setdefault(key, deque()).append(entry)
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release(sender)  # granted just as we were cancelled: hand it on
            else:
                self._forget(key, entry)
            raise

    def release(self, sender: str) -> None:
        held = self._held.get(sender, 0) - 1
        if held > 0:
            self._held[sender] = held
        else:
            self._held.pop(sender, None)
        self._in_use -= 1
        self._wake()

    def _may_take(self, sender: str) -> bool:
        if self.free <= 0:
            return False
        return self.held(sender) < self.share or self.free - 1 >= self.share

    def _take(self, sender: str) -> None:
        self._held[sender] = self._held.get(sender, 0) + 1
        self._in_use += 1

    def _wake(self) -> None:
        while self.free > 0 and self._waiting:
            key = self._next_key()
            if key is None:
                return
            queue = self._waiting.pop(key)  # re-inserted at the end: round robin
            sender, future = queue.popleft()
            if queue:
                self._waiting[key] = queue
            self._take(sender)
            future.set_result(None)

    def _next_key(self) -> str | None:
        """The first waiting sender below its share, else the first that may borrow."""
        if not self._fair:
            return ""
        for sender in self._waiting:
            if self.held(sender) < self.share:
                return sender
        if self.free - 1 >= self.share:
            return next(iter(self._waiting))
        return None

    def _forget(self, key: str, entry: tuple[str, asyncio.Future[None]]) -> None:
        queue = self._waiting.get(key)
        if queue is None:
            return
        try:
            queue.remove(entry)
        except ValueError:
            pass
        if not queue:
            del self._waiting[key]
        self._wake()
