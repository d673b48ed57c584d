"""Messages per minute per sender: a token bucket, with one polite notice per burst.

A sender starts with a full bucket (their level's rate: `[rate_limits] levels`, else
`messages_per_minute`) that refills continuously at that rate. A message that finds the bucket
empty is not processed; the first one of a burst gets a notice saying when to write again, and
the rest of the burst get nothing: the burst ends once the bucket has filled up again (the
sender kept within the rate for a while), so a sender hovering at the limit is not told again
with every other message. A rate of 0 is no limit: by default `full` senders are not limited,
`supervised` and `read_only` ones (strangers let in at a level, too) are. Terminal senders
(`cli:*`) are the operator and are never limited; strangers waiting for pairing never get here
(pairing has its own limits). The clock is injectable so tests drive time by hand.

Where the buckets live follows the store: an SQLite store serves one process, which keeps them
in memory (`MessageRateLimiter`); replicas sharing a PostgreSQL store keep them in the store
(`StoredRateLimiter`), so a sender whose messages land on several replicas is still held to one
rate and told once. Both take the same step (`take`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bot.core.identity import is_operator

MAX_TRACKED = 10_000  # buckets kept in memory; past it, full ones (same as a fresh one) are dropped
TOPIC = "rate"
_READ_SQL = "SELECT tokens, updated, noticed FROM rate_buckets WHERE sender = ?"
_WRITE_SQL = ("INSERT INTO rate_buckets(sender, tokens, updated, noticed) VALUES (?, ?, ?, ?)"
              " ON CONFLICT(sender) DO UPDATE SET tokens = excluded.tokens,"
              " updated = excluded.updated, noticed = excluded.noticed")


@dataclass(frozen=True)
class Bucket:
    tokens: float
    updated: float
    noticed: bool = False  # the current burst was already told


@dataclass(frozen=True)
class RateDecision:
    allowed: bool
    notice: str | None = None  # said once per burst when not allowed


def take(bucket: Bucket | None, now: float, per_minute: int) -> tuple[Bucket, RateDecision]:
    """One message against `bucket` (None: the sender's first, a full bucket): the bucket after
    it and whether the message may go through. Time running backwards refills nothing."""
    if bucket is None:
        bucket = Bucket(float(per_minute), now)
    elapsed = max(0.0, now - bucket.updated)
    tokens = min(float(per_minute), bucket.tokens + elapsed * per_minute / 60)
    noticed = bucket.noticed and tokens < per_minute   # a full minute's calm ends the burst
    if tokens >= 1:
        return Bucket(tokens - 1, now, noticed), RateDecision(True)
    if noticed:
        return Bucket(tokens, now, True), RateDecision(False)
    wait = math.ceil((1 - tokens) * 60 / per_minute)
    return Bucket(tokens, now, True), RateDecision(False, (
        f"You are sending messages faster than I can take them (at most {per_minute} "
        f"a minute). I skipped that message; please wait about {wait} s and send it again. "
        "Until you slow down, further messages are skipped without another notice."))


@dataclass(frozen=True)
class Rates:
    """Messages a minute by autonomy level (0: not limited); `default` for a level not named."""

    default: int
    levels: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def from_config(cls, table: Mapping[str, Any]) -> Rates:
        return cls(int(table["messages_per_minute"]),
                   {str(level): int(rate) for level, rate in table["levels"].items()})

    def per_minute(self, sender: str, level: str) -> int:
        """The sender's rate; 0 for the terminal operator, who is never limited."""
        return 0 if is_operator(sender) else int(self.levels.get(level, self.default))


class MessageRateLimiter:
    """The buckets of one process, in memory."""

    def __init__(self, rates: Rates | int, clock: Callable[[], float] = time.monotonic):
        self.rates = rates if isinstance(rates, Rates) else Rates(rates)
        self.clock = clock
        self._buckets: dict[str, Bucket] = {}

    async def admit(self, sender: str, level: str = "") -> RateDecision:
        per_minute = self.rates.per_minute(sender, level)
        if per_minute <= 0:
            return RateDecision(True)
        now = self.clock()
        if sender not in self._buckets and len(self._buckets) >= MAX_TRACKED:
            self._drop_full(now)
        self._buckets[sender], decision = take(self._buckets.get(sender), now, per_minute)
        return decision

    def _drop_full(self, now: float) -> None:
        """Forget the buckets a fresh one would equal (full at the highest rate any level has),
        or else the older half."""
        top = max([self.rates.default, *self.rates.levels.values()])
        full = [s for s, b in self._buckets.items() if b.tokens + (now - b.updated) * top / 60 >= top]
        for sender in full or list(self._buckets)[: len(self._buckets) // 2]:
            del self._buckets[sender]


class StoredRateLimiter:
    """The buckets in the store, one row per sender, shared by every process serving from it.
    The clock is wall time (the processes share it; a monotonic clock is per machine)."""

    def __init__(self, store: Any, rates: Rates | int, clock: Callable[[], float] = time.time):
        self.store = store
        self.rates = rates if isinstance(rates, Rates) else Rates(rates)
        self.clock = clock

    async def admit(self, sender: str, level: str = "") -> RateDecision:
        per_minute = self.rates.per_minute(sender, level)
        if per_minute <= 0:
            return RateDecision(True)
        # The sender's key lock orders two processes taking from the same bucket at once.
        async with self.store.transaction(serial=False, lock=[f"{TOPIC}\x1f{sender}"]) as tx:
            row = await tx.fetchone(_READ_SQL, (sender,))
            stored = None if row is None else Bucket(
                float(row["tokens"]), float(row["updated"]), bool(row["noticed"]))
            bucket, decision = take(stored, self.clock(), per_minute)
            await tx.execute(_WRITE_SQL, (sender, bucket.tokens, bucket.updated, int(bucket.noticed)))
        return decision


def rate_limiter(config: Any, store: Any) -> MessageRateLimiter | StoredRateLimiter:
    """The limiter `[rate_limits]` asks for, kept where the store's other processes see it."""
    rates = Rates.from_config(config["rate_limits"])
    if store.dialect == "sqlite":
        return MessageRateLimiter(rates)
    return StoredRateLimiter(store, rates)
