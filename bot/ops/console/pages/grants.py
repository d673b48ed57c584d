"""Live grants (what an Always tap allows from then on), each with Revoke (any sender's)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.approvals.grants import GrantError
from bot.ops.console.auth import OPERATOR
from bot.ops.console.web import Action, ConsoleContext, Outcome, Page


async def load(ctx: ConsoleContext, query: Mapping[str, str]) -> dict[str, Any]:
    return {"grants": await ctx.services.approvals.grants.listing()}


async def revoke(ctx: ConsoleContext, route: Mapping[str, str], form: Mapping[str, str]) -> Outcome:
    try:
        grant = await ctx.services.approvals.grants.revoke(route["id"], OPERATOR, any_sender=True)
    except GrantError as exc:
        return Outcome(False, str(exc))
    return Outcome(True, f"Revoked grant {grant.id} of {grant.sender}: {grant.description}.")


PAGE = Page("/grants", "Grants", "grants.html", load,
            actions=(Action("/grants/{id}/revoke", "grant-revoke", revoke),))
