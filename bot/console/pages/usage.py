"""Model usage per day and per sender, as server-rendered SVG bar charts.

Days are computed in Python from the stored timestamps (no database date functions, so the same
query runs on every store backend).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from bot.console import charts
from bot.console.web import ConsoleContext, Page, day_of, day_start, last_days

DAYS = 30


async def load(ctx: ConsoleContext, query: Mapping[str, str]) -> dict[str, Any]:
    now = time.time()
    days = last_days(now, DAYS)
    since = day_start(days[0]) or 0.0
    rows = await ctx.services.store.fetchall(
        "SELECT ts, sender, input_tokens, output_tokens FROM usage WHERE ts >= ?", (since,))
    per_day: dict[str, float] = defaultdict(float)
    per_sender: dict[str, float] = defaultdict(float)
    for row in rows:
        tokens = float(row["input_tokens"] + row["output_tokens"])
        per_day[day_of(row["ts"])] += tokens
        per_sender[row["sender"]] += tokens
    return {
        "metric": "tokens (input + output)",
        "days": DAYS,
        "total": charts.compact(sum(per_day.values())),
        "by_day": charts.columns([(day, per_day.get(day, 0.0)) for day in days]),
        "by_sender": charts.rows(list(per_sender.items())),
    }


PAGE = Page("/usage", "Usage", "usage.html", load)
