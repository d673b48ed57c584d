"""Approval requests that lapse are closed where people can see it.

`sweep()` closes every pending request past its expiry (a compare-and-set in the store, so each
is closed once however many processes sweep) and hands each to the agent, which edits the
request's message ("Expired — nothing ran"), tells the requester and gives the model a result.
It runs every `interval` seconds while the bot is up, and once right after the channels start,
so requests that lapsed while the bot was down are closed too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

log = logging.getLogger(__name__)


class ExpirySweeper:
    def __init__(self, agent: Any, interval: float = 15.0):
        self.agent = agent
        self.interval = interval
        self._stop = asyncio.Event()
        self._loop: asyncio.Task[None] | None = None

    async def sweep(self) -> int:
        lapsed = await self.agent.services.approvals.expire_lapsed()
        await self.agent.close_lapsed(lapsed)
        return len(lapsed)

    async def start(self) -> None:
        self._stop.clear()
        self._loop = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.interval):
                    await self._stop.wait()
            if self._stop.is_set():
                return
            try:
                await self.sweep()
            except Exception:  # the next sweep tries again; nothing is lost in the store
                log.exception("sweeping lapsed approval requests failed")

    async def stop(self) -> None:
        self._stop.set()
        if self._loop is not None:
            await self._loop
            self._loop = None
