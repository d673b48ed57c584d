"""Waiting for a condition in tests: polled with a bound, never a sleep standing in for it."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

SETTLE_TIMEOUT_S = 45.0


async def eventually(predicate: Callable[[], Any], what: str, timeout: float = SETTLE_TIMEOUT_S) -> Any:
    """Poll `predicate` (sync or async) until it returns something true; fail after `timeout`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"waited {timeout:.0f}s for {what}")
        await asyncio.sleep(0.02)   # the polling interval of this helper, not a synchronisation
