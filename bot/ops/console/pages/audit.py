"""The audit log, newest first, filtered by sender, tool, decision or outcome, and date range."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.ops.console.web import ConsoleContext, Page, day_start
from bot.store.audit import AuditQuery, audit_decisions, recent_audit

LIMIT = 200
MAX_FILTER_CHARS = 200
DAY = 86400


def _filters(query: Mapping[str, str]) -> dict[str, str]:
    return {name: query.get(name, "").strip()[:MAX_FILTER_CHARS]
            for name in ("sender", "tool", "decision", "from", "to")}


def _query(filters: dict[str, str]) -> tuple[AuditQuery, list[str]]:
    """The query the filters ask for, and the problems with what was typed."""
    problems: list[str] = []
    bounds: dict[str, float | None] = {"from": None, "to": None}
    for name, shift in (("from", 0), ("to", DAY)):
        if not filters[name]:
            continue
        start = day_start(filters[name])
        if start is None:
            problems.append(f"'{filters[name]}' is not a date (YYYY-MM-DD); ignored.")
            continue
        bounds[name] = start + shift
    query = AuditQuery(sender=filters["sender"], tool=filters["tool"], verdict=filters["decision"],
                       since=bounds["from"], until=bounds["to"])
    return query, problems


async def load(ctx: ConsoleContext, query: Mapping[str, str]) -> dict[str, Any]:
    filters = _filters(query)
    audit_query, problems = _query(filters)
    rows = await recent_audit(ctx.services.store, audit_query, LIMIT)
    decisions = await audit_decisions(ctx.services.store)
    return {"rows": rows, "filters": filters, "problems": problems,
            "limit": LIMIT, "decisions": decisions}


PAGE = Page("/audit", "Audit", "audit.html", load)
