"""The audit log, newest first, filtered by sender, tool, decision or outcome, and date range."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.ops.console.web import ConsoleContext, Page, day_start

LIMIT = 200
MAX_FILTER_CHARS = 200
DAY = 86400


def _filters(query: Mapping[str, str]) -> dict[str, str]:
    return {name: query.get(name, "").strip()[:MAX_FILTER_CHARS]
            for name in ("sender", "tool", "decision", "from", "to")}


def _where(filters: dict[str, str]) -> tuple[list[str], list[Any], list[str]]:
    """SQL conditions, their parameters, and the problems with what was typed."""
    where: list[str] = []
    params: list[Any] = []
    problems: list[str] = []
    for column in ("sender", "tool"):
        if filters[column]:
            where.append(f"{column} = ?")
            params.append(filters[column])
    if filters["decision"]:  # a verdict may be recorded as the decision or as its outcome
        where.append("(decision = ? OR outcome = ?)")
        params += [filters["decision"], filters["decision"]]
    for name, op, shift in (("from", ">=", 0), ("to", "<", DAY)):
        if not filters[name]:
            continue
        start = day_start(filters[name])
        if start is None:
            problems.append(f"'{filters[name]}' is not a date (YYYY-MM-DD); ignored.")
            continue
        where.append(f"ts {op} ?")
        params.append(start + shift)
    return where, params, problems


async def load(ctx: ConsoleContext, query: Mapping[str, str]) -> dict[str, Any]:
    filters = _filters(query)
    where, params, problems = _where(filters)
    sql = "SELECT id, ts, session_id, sender, tool, args_hash, decision, outcome, detail FROM audit"
    if where:
        sql += " WHERE " + " AND ".join(where)
    rows = await ctx.services.store.fetchall(sql + " ORDER BY id DESC LIMIT ?", (*params, LIMIT))
    decisions = await ctx.services.store.fetchall(
        "SELECT DISTINCT decision FROM audit ORDER BY decision LIMIT 100")
    return {"rows": [dict(row) for row in rows], "filters": filters, "problems": problems,
            "limit": LIMIT, "decisions": [row["decision"] for row in decisions]}


PAGE = Page("/audit", "Audit", "audit.html", load)
