"""Signed receipts of executed calls, and a Verify button that rechecks every signature."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.approvals.receipts import latest_receipts
from bot.language.catalogs import N_
from bot.language.phrase import Phrase
from bot.ops.console.web import Action, ConsoleContext, Outcome, Page

LATEST = 50
MAX_PROBLEM_LINES = 100


async def load(ctx: ConsoleContext, query: Mapping[str, str]) -> dict[str, Any]:
    return {"receipts": await latest_receipts(ctx.services.store, LATEST),
            "total": await ctx.services.receipts.count()}


async def verify(ctx: ConsoleContext, route: Mapping[str, str], form: Mapping[str, str]) -> Outcome:
    total = await ctx.services.receipts.count()
    problems = await ctx.services.receipts.verify_all()
    if not problems:
        return Outcome(True, Phrase("All {total} receipts verify.", total=total))
    shown = tuple(problems[:MAX_PROBLEM_LINES])
    more = len(problems) - len(shown)
    tail = (Phrase("… and {more} more (myclaw receipts verify lists them all)", more=more),) \
        if more else ()
    return Outcome(False, Phrase("{problems} problem(s) in {total} receipts.",
                                  problems=len(problems), total=total), shown + tail)


PAGE = Page("/receipts", N_("Receipts"), "receipts.html", load,
            actions=(Action("/receipts/verify", "verify-receipts", verify),))
