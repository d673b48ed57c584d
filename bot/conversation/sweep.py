"""Rows another process left: every channel polls the durable inbox for its own rows whose
claim lapsed (the process died mid-turn) or that nobody claimed, and runs them here."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable

from bot.conversation.inbox import Inbox, InboxRow

log = logging.getLogger(__name__)

Adopt = Callable[[list[InboxRow]], Awaitable[int] | int]   # queue rows; how many were new


async def sweep_left_rows(inbox: Inbox, channel: str, adopt: Adopt) -> None:
    """Forever, every half lease: hand `adopt` the rows of `channel` nobody else will run.
    A failed look is logged and tried again at the next interval."""
    while True:
        await asyncio.sleep(inbox.settings.lease_seconds / 2)
        try:
            adopted = adopt(await inbox.adoptable(channel))
            if inspect.isawaitable(adopted):
                adopted = await adopted
        except Exception:
            log.warning("%s: could not look for updates left by another process", channel,
                        exc_info=True)
            continue
        if adopted:
            log.info("%s: %d update(s) left by a stopped process queued", channel, adopted)
