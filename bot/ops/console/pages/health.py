"""Health of the store and the channels, and what waits for the operator."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from bot.language.catalogs import N_
from bot.ops.console.web import ConsoleContext, Page
from bot.ops.health import channel_states
from bot.store.factory import store_location

STORE_PING_TIMEOUT_SECONDS = 2.0


async def load(ctx: ConsoleContext, query: Mapping[str, str]) -> dict[str, Any]:
    store = ctx.services.store
    try:
        store_ok = await asyncio.wait_for(store.ping(), STORE_PING_TIMEOUT_SECONDS)
    except TimeoutError:
        store_ok = False
    channels = list(channel_states(ctx.channels).items())
    return {
        "store_ok": store_ok,
        # The SQLite file, or the PostgreSQL URL without its password.
        "store_path": store_location(ctx.config),
        "schema": await store.schema_version() if store_ok else None,
        "channels": channels,
        "pending_approvals": len(await ctx.services.approvals.pending()) if store_ok else None,
        "pending_codes": len(await ctx.services.senders.list_codes()) if store_ok else None,
    }


PAGE = Page("/health", N_("Health"), "health.html", load)
