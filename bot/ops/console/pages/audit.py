"""The audit log, newest first, filtered by sender, tool, decision or outcome, and date range,
PAGE_SIZE entries a page ("Older entries" follows on from the last one shown). The console's
own successful link, login and logout rows are folded away unless asked for (`logins=1`) or
filtered by name: a phone should not scroll past a third of the page of them. What the operator
did in the console, and what it refused (a login, a stale form), is never folded. Each entry is
a compact card: the arguments' hash shortened (the whole of it on hover and in the copy)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from bot.language.catalogs import N_
from bot.language.phrase import Phrase
from bot.ops.console.web import ConsoleContext, Page, day_start, operator_zone
from bot.store.audit import LOGIN_DECISIONS, AuditQuery, audit_decisions, count_audit, recent_audit

PAGE_SIZE = 20
HASH_SHOWN = 12           # characters of an arguments hash on the card
MAX_FILTER_CHARS = 200
DAY = 86400


def _filters(query: Mapping[str, str]) -> dict[str, str]:
    return {name: query.get(name, "").strip()[:MAX_FILTER_CHARS]
            for name in ("sender", "tool", "decision", "from", "to", "logins")}


def _before(query: Mapping[str, str]) -> int | None:
    text = query.get("before", "").strip()
    return int(text) if text.isdigit() and len(text) < 19 else None


def _query(filters: dict[str, str], zone: str = "UTC") -> tuple[AuditQuery, list[str]]:
    """The query the filters ask for (From and To are days in `zone`), and the problems with
    what was typed."""
    problems: list[str] = []
    bounds: dict[str, float | None] = {"from": None, "to": None}
    for name, shift in (("from", 0), ("to", DAY)):
        if not filters[name]:
            continue
        start = day_start(filters[name], zone)
        if start is None:
            problems.append(Phrase("'{value}' is not a date (YYYY-MM-DD); ignored.",
                                   value=filters[name]))
            continue
        bounds[name] = start + shift
    fold = filters["logins"] != "1" and filters["decision"] not in LOGIN_DECISIONS
    query = AuditQuery(sender=filters["sender"], tool=filters["tool"], verdict=filters["decision"],
                       since=bounds["from"], until=bounds["to"], without_logins=fold)
    return query, problems


async def load(ctx: ConsoleContext, query: Mapping[str, str]) -> dict[str, Any]:
    filters = _filters(query)
    zone = operator_zone(ctx)
    audit_query, problems = _query(filters, zone)
    store = ctx.services.store
    page = dataclasses.replace(audit_query, before_id=_before(query))
    rows = await recent_audit(store, page, PAGE_SIZE + 1)
    more, rows = len(rows) > PAGE_SIZE, rows[:PAGE_SIZE]
    folded = 0
    if audit_query.without_logins:
        folded = await count_audit(store, dataclasses.replace(audit_query, without_logins=False)) \
            - await count_audit(store, audit_query)
    kept = {k: v for k, v in filters.items() if v}
    return {"rows": rows, "hash_shown": HASH_SHOWN, "zone": zone, "filters": filters,
            "problems": problems, "decisions": await audit_decisions(store), "folded": folded,
            "first_page": page.before_id is None,
            "older": urlencode({**kept, "before": rows[-1]["id"]}) if more else "",
            "newest": urlencode(kept), "with_logins": urlencode({**kept, "logins": "1"})}


PAGE = Page("/audit", N_("Audit"), "audit.html", load)
