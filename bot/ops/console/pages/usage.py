"""Model spend and tokens per day and per sender, as server-rendered SVG bar charts.

Spend is drawn once usage rows carry a cost (the price table prices each call); until then,
and always as a second view, tokens. Days are the operator's (their time zone, named on the
page). Days are computed in Python from the stored timestamps
(no database date functions, so the same query runs on every store backend).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from bot.language.catalogs import N_
from bot.money.spend import usage_since
from bot.ops.console import charts
from bot.ops.console.web import ConsoleContext, Page, day_of, day_start, last_days, operator_zone

DAYS = 30


class _Totals:
    """Sums per day and per sender of one quantity."""

    def __init__(self) -> None:
        self.per_day: dict[str, float] = defaultdict(float)
        self.per_sender: dict[str, float] = defaultdict(float)

    def add(self, day: str, sender: str, amount: float) -> None:
        self.per_day[day] += amount
        self.per_sender[sender] += amount

    def view(self, days: list[str], money: bool) -> dict[str, Any]:
        return {"total": charts.compact(sum(self.per_day.values()), money),
                "by_day": charts.columns([(d, self.per_day.get(d, 0.0)) for d in days], money),
                "by_sender": charts.rows(list(self.per_sender.items()), money)}


async def load(ctx: ConsoleContext, query: Mapping[str, str]) -> dict[str, Any]:
    zone = operator_zone(ctx)
    days = last_days(time.time(), DAYS, zone)
    rows = await usage_since(ctx.services.store, day_start(days[0], zone) or 0.0)
    tokens, spend, priced = _Totals(), _Totals(), False
    for row in rows:
        day = day_of(row["ts"], zone)
        tokens.add(day, row["sender"], float(row["input_tokens"] + row["output_tokens"]))
        if row.get("cost") is not None:
            priced = True
            spend.add(day, row["sender"], float(row["cost"]))
    currency = ctx.config.data.get("budgets", {}).get("currency", "")
    return {"days": DAYS, "zone": zone, "currency": currency, "tokens": tokens.view(days, money=False),
            "spend": spend.view(days, money=True) if priced else None}


PAGE = Page("/usage", N_("Usage"), "usage.html", load)
