"""Session lifecycle hooks: let tools set up and clean up without touching the runtime loop.

A tool may define `async on_session(event, ctx)`; the runtime calls `run_session_hooks` when the
process starts, when a sender begins a fresh session (`/new`) and at shutdown. A failing or hung
hook is the tool's problem, never the bot's: it is logged with its traceback and the next hook
runs anyway.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any

from bot.core.tool import CallContext

log = logging.getLogger(__name__)

SESSION_EVENTS = ("start", "new_session", "shutdown")
DEFAULT_HOOK_TIMEOUT = 5.0


async def run_session_hooks(registry: Any, event: str, ctx: CallContext,
                            timeout: float = DEFAULT_HOOK_TIMEOUT) -> list[str]:
    """Call `on_session(event, ctx)` on every registered tool that has it, in name order.

    Returns the names of the tools whose hook failed or timed out (already logged). Hook errors
    never propagate; cancellation of the caller does. Raises ValueError only for an event name
    outside SESSION_EVENTS, which is a bug in the caller.
    """
    if event not in SESSION_EVENTS:
        raise ValueError(f"unknown session event {event!r}; expected one of {SESSION_EVENTS}")
    failed: list[str] = []
    for tool in registry.list_all():
        hook = getattr(tool, "on_session", None)
        if not callable(hook):
            continue
        name = tool.meta.name
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                outcome = hook(event, ctx)
                if inspect.isawaitable(outcome):
                    await outcome
        except TimeoutError:
            if not deadline.expired():
                log.exception("on_session(%r) hook of tool %s failed", event, name)
            else:
                log.error("on_session(%r) hook of tool %s did not finish within %.1fs",
                          event, name, timeout)
            failed.append(name)
        except Exception:  # a tool's bug must not stop the bot or the other hooks
            log.exception("on_session(%r) hook of tool %s failed", event, name)
            failed.append(name)
    return failed
