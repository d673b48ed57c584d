"""Arrival order within one process: callers let through one at a time per key, in the order
they arrived.

A platform that hands each event to its own task (discord.py does, and so do the webhook
servers) starts those tasks in the order the events came, but their writes to the store do not
commit in that order: each waits on a pool connection and a lock, and on PostgreSQL the earlier
one can lose. The inbox numbers a conversation's rows by commit, and runs them by number, so a
person's second message could be answered before their first. `ArrivalOrder.place` takes a
caller's place synchronously, when it is called — before any await — and `async with` that
place waits only for the places taken before it on the same keys.

    place = order.place(["discord:42"])      # at once, in the caller's order
    async with place:                          # after every earlier place on discord:42
        ...
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable


class ArrivalOrder:
    def __init__(self) -> None:
        self._last: dict[str, asyncio.Future[None]] = {}   # key -> its latest place, while busy

    def place(self, keys: Iterable[str]) -> Place:
        """The caller's place behind every earlier one on any of `keys` (taken now)."""
        mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        wanted = sorted(set(keys))
        before = [self._last[key] for key in wanted if key in self._last]
        for key in wanted:
            self._last[key] = mine
        return Place(self, mine, before, wanted)

    def _forget(self, key: str, place: asyncio.Future[None]) -> None:
        if self._last.get(key) is place:
            del self._last[key]

    def __len__(self) -> int:
        """Keys with a place taken (0 when idle: the map holds busy keys only)."""
        return len(self._last)


class Place:
    def __init__(self, order: ArrivalOrder, mine: asyncio.Future[None],
                 before: list[asyncio.Future[None]], keys: list[str]):
        self._order, self._mine, self._before, self._keys = order, mine, before, keys

    async def __aenter__(self) -> None:
        try:
            if self._before:
                # asyncio.wait, not await: a cancelled waiter must not cancel an earlier place.
                await asyncio.wait(self._before)
        except BaseException:
            self._leave()
            raise

    async def __aexit__(self, *exc: object) -> None:
        self._leave()

    def _leave(self) -> None:
        waiting = [f for f in self._before if not f.done()]
        if waiting:   # left early (cancelled): the places after it still wait for those before
            asyncio.gather(*waiting).add_done_callback(lambda _: self._done())
        else:
            self._done()

    def _done(self) -> None:
        if not self._mine.done():
            self._mine.set_result(None)
        for key in self._keys:
            self._order._forget(key, self._mine)
