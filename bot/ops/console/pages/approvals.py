"""Pending approvals with their whole preview; Approve / Deny with the buttons' compare-and-set.

The answer goes through the agent (`resolve_elsewhere`), so the conversation resumes in the
request's chat and the channel's request message shows the outcome, exactly as after a tap.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from bot.language.catalogs import N_
from bot.language.phrase import Phrase
from bot.ops.console.auth import OPERATOR
from bot.ops.console.web import Action, ConsoleContext, Outcome, Page

CHOICES = ("approve", "deny")
RECENT = 20


async def load(ctx: ConsoleContext, query: Mapping[str, str]) -> dict[str, Any]:
    approvals = ctx.services.approvals
    pending = [{"request": r, "args": json.dumps(r.args, indent=2, ensure_ascii=False)}
               for r in await approvals.pending()]
    return {"pending": pending, "recent": await approvals.recently_resolved(RECENT)}


async def resolve(ctx: ConsoleContext, route: Mapping[str, str], form: Mapping[str, str]) -> Outcome:
    choice = form.get("choice", "")
    if choice not in CHOICES:
        return Outcome(False, Phrase("Unknown answer; use Approve or Deny."))
    resolution = await ctx.agent.resolve_elsewhere(route["id"], OPERATOR, choice)
    return Outcome(resolution.ok, resolution.reason)


PAGE = Page("/", N_("Approvals"), "approvals.html", load,
            actions=(Action("/approvals/{id}", "approval", resolve),))
