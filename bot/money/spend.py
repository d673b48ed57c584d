"""The spend ledger: every model call's tokens and cost in the `usage` table, and running totals
per sender (today, this month) and for everyone (today) kept in memory.

The store is the source of truth. A total is read from it once per period (UTC day; the first
look at a sender in a day reads their day and month together), then kept up to date as this
process writes rows (on commit), so checking a budget before a model call costs a dictionary
lookup, not a SUM over the table. That read happens inside a write transaction holding the
sender's lock, which every transaction adding a row of theirs takes before its insert: no such
row can be committed between the SUM and the moment the total is remembered, and a row
committed before is in the SUM (`committed` ignores totals not loaded yet), so nothing is
counted twice or missed.
Rows written by other processes sharing a PostgreSQL store arrive as notifications carrying
their id and cost (bot.store.pg_invalidation); a total counts one when the row's id is above the
highest id it was read with. Every row of the sender not in the SUM takes its id after it, so
that comparison neither misses nor doubles a row. The global total has no such lock: it is read
in a serial transaction, when no row of anyone's is half-written.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bot.config.prices import PriceTable
from bot.store.protocol import Store, Transaction

USAGE_SQL = ("INSERT INTO usage(ts, session_id, sender, model, input_tokens, output_tokens,"
             " cache_read_tokens, cache_write_tokens, characters, cost)"
             " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
_SENDER_SQL = ("SELECT COALESCE(SUM(cost), 0) AS month,"
               " COALESCE(SUM(CASE WHEN ts >= ? THEN cost ELSE 0 END), 0) AS day"
               " FROM usage WHERE sender = ? AND ts >= ?")
_GLOBAL_SQL = "SELECT COALESCE(SUM(cost), 0) AS day FROM usage WHERE ts >= ?"
_SEEN_SQL = "SELECT COALESCE(MAX(id), 0) AS seen FROM usage"
TOPIC = "spend"


@dataclass(frozen=True)
class Period:
    """The UTC day and month a moment falls in, with their bounds as Unix times."""

    day: str            # "2026-12-01"
    month: str          # "2026-12"
    day_start: float
    day_end: float
    month_start: float
    month_end: float

    @classmethod
    def at(cls, ts: float) -> Period:
        moment = datetime.fromtimestamp(ts, UTC)
        day = moment.replace(hour=0, minute=0, second=0, microsecond=0)
        month = day.replace(day=1)
        next_month = (month.replace(year=month.year + 1, month=1) if month.month == 12
                      else month.replace(month=month.month + 1))
        return cls(day.date().isoformat(), month.strftime("%Y-%m"), day.timestamp(),
                   day.timestamp() + 86400, month.timestamp(), next_month.timestamp())


@dataclass(frozen=True)
class Totals:
    """What a sender spent today and this month, and what everyone spent today."""

    day: float
    month: float
    global_day: float


@dataclass
class _SenderTotals:
    day: float
    month: float
    seen: int   # the highest usage id when these were read: rows above it are not in them


class SpendLedger:
    def __init__(self, store: Store, prices: PriceTable | None,
                 clock: Callable[[], float] = time.time):
        """`prices` None: rows are stored without a cost (priced later by `myclaw usage`)."""
        self.store = store
        self.prices = prices
        self.clock = clock
        self._period = Period.at(clock())
        self._senders: dict[str, _SenderTotals] = {}
        self._global: float | None = None
        self._global_seen = 0
        store.subscribe(TOPIC, self._written_elsewhere)

    def period(self) -> Period:
        """The current period; moving into a new day (or month) forgets the old totals."""
        now = self.clock()
        if not self._period.day_start <= now < self._period.day_end:
            self._period = Period.at(now)
            self._senders.clear()  # reloaded with the new day (and month) on first use
            self._global = None
        return self._period

    # --- recording -----------------------------------------------------------------------

    async def add(self, tx: Transaction, *, session_id: str, sender: str, model: str,
                  usage: Mapping[str, int], cost: float | None = None) -> float | None:
        """Insert one call's row inside the caller's transaction; the totals follow when it
        commits. Returns the call's cost: `cost` when the caller knows it (a service priced
        per minute or character), else `usage` priced from the table."""
        ts = self.clock()
        if cost is None and self.prices is not None:
            cost = self.prices.cost(model, usage)
        values = (ts, session_id, sender, model, usage.get("input_tokens", 0),
                  usage.get("output_tokens", 0), usage.get("cache_read_tokens", 0),
                  usage.get("cache_write_tokens", 0), usage.get("characters", 0), cost)
        if cost is not None and cost > 0:   # a row without a cost adds nothing to a total
            await tx.lock(_sender_key(sender))   # see the module docstring
            # Other processes hear of it with its id (see `_written_elsewhere`).
            await tx.insert_announced(USAGE_SQL, values, TOPIC, f"\x1f{ts!r}\x1f{cost!r}\x1f{sender}")
        else:
            await tx.defer(USAGE_SQL, values)
        tx.on_commit(lambda: self.committed(sender, ts, cost))
        return cost

    def committed(self, sender: str, ts: float, cost: float | None) -> None:
        """Add a committed row to the totals that are loaded (the others will read it)."""
        period = self.period()
        if cost is None or cost <= 0 or not period.day_start <= ts < period.day_end:
            return
        if self._global is not None:
            self._global += cost
        totals = self._senders.get(sender)
        if totals is not None:
            totals.day += cost
            totals.month += cost

    def _written_elsewhere(self, key: str | None) -> None:
        """Another process committed a priced row (None: rows may have been missed)."""
        if key is None:
            self._senders.clear()
            self._global = None
            return
        row_id, ts, cost, sender = key.split("\x1f", 3)
        period = self.period()
        if not period.day_start <= float(ts) < period.day_end:
            return
        if self._global is not None and int(row_id) > self._global_seen:
            self._global += float(cost)
        totals = self._senders.get(sender)
        if totals is not None and int(row_id) > totals.seen:
            totals.day += float(cost)
            totals.month += float(cost)

    async def record(self, *, session_id: str, sender: str, model: str,
                     usage: Mapping[str, int], cost: float | None = None) -> float | None:
        """Record a call made outside a turn's step (summaries, side calls); returns its cost."""
        async with self.store.transaction() as tx:
            return await self.add(tx, session_id=session_id, sender=sender, model=model,
                                  usage=usage, cost=cost)

    # --- reading -------------------------------------------------------------------------

    async def totals(self, sender: str) -> Totals:
        """Today's and this month's spend of `sender`, and today's of everyone."""
        period = self.period()
        totals = self._senders.get(sender)
        if totals is None or self._global is None:
            await self._load(sender, period)
            totals = self._senders[sender]
        return Totals(totals.day, totals.month, self._global or 0.0)

    async def _load(self, sender: str, period: Period) -> None:
        with_global = self._global is None
        # Concurrent-safe once the global total is loaded: the sender's lock keeps out every
        # row of theirs not committed yet (`add` takes it before inserting).
        async with self.store.transaction(serial=with_global, lock=[_sender_key(sender)]) as tx:
            row = await tx.fetchone(_SENDER_SQL, (period.day_start, sender, period.month_start))
            seen = int((await tx.fetchone(_SEEN_SQL))["seen"])
            if with_global:
                global_row = await tx.fetchone(_GLOBAL_SQL, (period.day_start,))
            if period is self._period:  # the day did not change while we read
                self._senders[sender] = _SenderTotals(float(row["day"]), float(row["month"]), seen)
                if with_global:
                    self._global, self._global_seen = float(global_row["day"]), seen
        if sender not in self._senders:  # the day changed under us: read the new one
            await self._load(sender, self.period())

    async def spoken_today(self, sender: str) -> tuple[int, float]:
        """The characters a priced speech engine spoke for `sender` today, and their cost."""
        row = await self.store.fetchone(
            "SELECT COALESCE(SUM(characters), 0) AS chars, COALESCE(SUM(cost), 0) AS cost"
            " FROM usage WHERE sender = ? AND ts >= ? AND characters > 0",
            (sender, self.period().day_start))
        return (int(row["chars"]), float(row["cost"])) if row else (0, 0.0)

    async def by_sender(self) -> dict[str, tuple[float, float]]:
        """Every sender's (today, this month) spend, read from the store (for `/usage all`)."""
        period = self.period()
        rows = await self.store.fetchall(
            "SELECT sender, COALESCE(SUM(cost), 0) AS month,"
            " COALESCE(SUM(CASE WHEN ts >= ? THEN cost ELSE 0 END), 0) AS day"
            " FROM usage WHERE ts >= ? GROUP BY sender ORDER BY month DESC",
            (period.day_start, period.month_start))
        return {r["sender"]: (float(r["day"]), float(r["month"])) for r in rows}


async def usage_since(store: Store, since: float) -> list[dict[str, Any]]:
    """Every usage row from `since` on, oldest first. Whole rows: a store whose rows have no
    cost column yet (priced later) still gives its tokens."""
    rows = await store.fetchall("SELECT * FROM usage WHERE ts >= ? ORDER BY ts", (since,))
    return [dict(row) for row in rows]


def _sender_key(sender: str) -> str:
    """The lock that keeps a sender's rows out while their totals are read."""
    return f"usage\x1f{sender}"
