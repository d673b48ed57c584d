"""After a burst of turns, the C heap's free pages go back to the system.

A hundred chats at once allocate a few MiB in glibc's heaps (request and response bodies,
SQLite's pages, buffers of the threads that write files); once they are answered most of it is
free but stays resident, because glibc returns memory only from the top of a heap. `malloc_trim`
releases every free page, wherever it lies. It is called once the bot has no turn queued or
running for `DELAY` seconds, and at most once every `EVERY` seconds: a single person's turn
after turn does not pay for a walk over the heaps each time. Elsewhere than glibc: nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

DELAY = 0.5
EVERY = 10.0


def _malloc_trim() -> Callable[[int], int] | None:
    import ctypes  # loaded already on Linux: the process hardening's prctl

    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


class HeapTrim:
    def __init__(self, idle: Callable[[], bool], delay: float = DELAY, every: float = EVERY,
                 clock: Callable[[], float] = time.monotonic,
                 trim: Callable[[int], int] | None = None):
        """`idle`: whether no turn is queued or running right now."""
        self.idle, self.delay, self.every, self.clock = idle, delay, every, clock
        self._trim = trim if trim is not None else _malloc_trim()
        self._handle: asyncio.TimerHandle | None = None
        self._last = float("-inf")
        self.trims = 0

    def soon(self) -> None:
        """The bot just went idle: trim in a moment, unless it is busy again by then."""
        if self._trim is None or self._handle is not None:
            return
        wait = max(self.delay, self._last + self.every - self.clock())
        self._handle = asyncio.get_running_loop().call_later(wait, self._fire)

    def after_start(self) -> None:
        """The bot is ready: what start-up freed (imports, migrations, recovery) goes back in a
        moment. This one does not hold back the trim after the first burst."""
        if self._trim is not None and self._handle is None:
            self._handle = asyncio.get_running_loop().call_later(
                self.delay, lambda: self._fire(counted=False))

    def _fire(self, counted: bool = True) -> None:
        self._handle = None
        if not self.idle():
            return                  # the next idle moment schedules it again
        if counted:
            self._last = self.clock()
        self.trims += 1
        self._trim(0)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
