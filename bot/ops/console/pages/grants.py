"""Live grants (what an Always tap allows from then on), each with Revoke (any sender's)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.approvals.grants import GrantError
from bot.core.errors import reason_of
from bot.language.catalogs import N_
from bot.language.phrase import Phrase
from bot.ops.console.auth import OPERATOR
from bot.ops.console.web import Action, ConsoleContext, Outcome, Page


async def load(ctx: ConsoleContext, query: Mapping[str, str]) -> dict[str, Any]:
    return {"grants": await ctx.services.approvals.grants.listing()}


async def revoke(ctx: ConsoleContext, route: Mapping[str, str], form: Mapping[str, str]) -> Outcome:
    try:
        grant = await ctx.services.approvals.grants.revoke(route["id"], OPERATOR, any_sender=True)
    except GrantError as exc:
        return Outcome(False, reason_of(exc))
    return Outcome(True, Phrase("Revoked grant {id} of {sender}: {what}.", id=grant.id,
                                 sender=grant.sender, what=grant.description))


PAGE = Page("/grants", N_("Grants"), "grants.html", load,
            actions=(Action("/grants/{id}/revoke", "grant-revoke", revoke),))
