"""Messages per minute per sender: a token bucket, with one polite notice per burst.

A sender starts with a full bucket (`[rate_limits] messages_per_minute` messages) that refills
continuously at that rate. A message that finds the bucket empty is not processed; the first
one of a burst gets a notice saying when to write again, and the rest of the burst get nothing:
the burst ends once the bucket has filled up again (the sender kept within the rate for a
while), so a sender hovering at the limit is not told again with every other message.
Terminal senders (`cli:*`) are the operator and are not limited; unknown senders never get here
(pairing has its own limits). The clock is injectable so tests drive time by hand.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

MAX_TRACKED = 10_000  # buckets kept; past it, full ones (same as a fresh one) are dropped


@dataclass
class _Bucket:
    tokens: float
    updated: float
    noticed: bool = False  # the current burst was already told


@dataclass(frozen=True)
class RateDecision:
    allowed: bool
    notice: str | None = None  # said once per burst when not allowed


class MessageRateLimiter:
    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic):
        self.per_minute = per_minute
        self.clock = clock
        self._buckets: dict[str, _Bucket] = {}

    @classmethod
    def from_config(cls, config: object,
                    clock: Callable[[], float] = time.monotonic) -> MessageRateLimiter:
        return cls(int(config["rate_limits"]["messages_per_minute"]), clock)  # type: ignore[index]

    def admit(self, sender: str) -> RateDecision:
        if self.per_minute <= 0 or sender.startswith("cli:"):
            return RateDecision(True)
        now = self.clock()
        bucket = self._bucket(sender, now)
        if bucket.tokens >= self.per_minute:
            bucket.noticed = False  # a full minute's calm ends the burst
        if bucket.tokens >= 1:
            bucket.tokens -= 1
            return RateDecision(True)
        if bucket.noticed:
            return RateDecision(False)
        bucket.noticed = True
        wait = math.ceil((1 - bucket.tokens) * 60 / self.per_minute)
        return RateDecision(False, (
            f"You are sending messages faster than I can take them (at most {self.per_minute} "
            f"a minute). I skipped that message; please wait about {wait} s and send it again. "
            "Until you slow down, further messages are skipped without another notice."))

    def _bucket(self, sender: str, now: float) -> _Bucket:
        bucket = self._buckets.get(sender)
        if bucket is None:
            if len(self._buckets) >= MAX_TRACKED:
                self._drop_full(now)
            bucket = self._buckets[sender] = _Bucket(float(self.per_minute), now)
            return bucket
        elapsed = max(0.0, now - bucket.updated)
        bucket.tokens = min(float(self.per_minute), bucket.tokens + elapsed * self.per_minute / 60)
        bucket.updated = now
        return bucket

    def _drop_full(self, now: float) -> None:
        rate = self.per_minute / 60
        full = [s for s, b in self._buckets.items()
                if b.tokens + (now - b.updated) * rate >= self.per_minute]
        for sender in full or list(self._buckets)[: len(self._buckets) // 2]:
            del self._buckets[sender]
