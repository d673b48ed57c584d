"""Who may talk to the bot: levels from the config file, levels granted by pairing, roles."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.language.catalogs import N_
from bot.ops.console.web import ConsoleContext, Page


async def load(ctx: ConsoleContext, query: Mapping[str, str]) -> dict[str, Any]:
    configured = ctx.config["senders"]
    return {
        "configured": sorted((k, v) for k, v in configured.items() if k != "unknown"),
        "unknown": configured.get("unknown", "pairing"),
        "granted": await ctx.services.senders.granted(),
        "roles": sorted(ctx.config["discord"]["roles"].items()),
        "approvers": sorted(ctx.services.approvals.approvers),
    }


PAGE = Page("/senders", N_("Senders"), "senders.html", load)
