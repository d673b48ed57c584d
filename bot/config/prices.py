"""What a model call costs: the `[prices."<model>"]` tables of the config, per million tokens.

The shipped defaults are Anthropic's list prices for the configured models at the time of
writing; they are plain config and meant to be edited (a negotiated rate, another currency).
A response names the exact model that answered, which may be a dated id
("claude-sonnet-5-5-20261001"): the longest configured name it starts with prices it. A model
with no price at all is charged at the most expensive configured rate, so a budget errs on the
side of stopping early rather than never, and the operator's log says so once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.core.errors import ConfigError

log = logging.getLogger(__name__)

PRICE_KEYS = ("input", "output", "cache_write", "cache_read")
SPEECH_KEY = "characters"   # a speech model's row: per million characters spoken
PER_TOKENS = 1_000_000


@dataclass(frozen=True)
class Price:
    """Currency units per million tokens of each kind."""

    input: float
    output: float
    cache_write: float
    cache_read: float
    characters: float = 0.0     # per million characters spoken (speech models)

    def cost(self, usage: Mapping[str, int]) -> float:
        """The cost of one call from its usage numbers (bot.llm.client's names)."""
        return (usage.get("input_tokens", 0) * self.input
                + usage.get("output_tokens", 0) * self.output
                + usage.get("cache_write_tokens", 0) * self.cache_write
                + usage.get("cache_read_tokens", 0) * self.cache_read
                + usage.get("characters", 0) * self.characters) / PER_TOKENS


class PriceTable:
    def __init__(self, prices: Mapping[str, Price]):
        self._prices = dict(prices)
        # Longest names first, so "claude-opus-5-5-mini" is not priced as "claude-opus-5-5".
        self._names = sorted(self._prices, key=len, reverse=True)
        fallback = max(self._prices.values(), key=lambda p: (p.output, p.input),
                       default=Price(0.0, 0.0, 0.0, 0.0))
        dearest_speech = max((p.characters for p in self._prices.values()), default=0.0)
        self._fallback = Price(fallback.input, fallback.output, fallback.cache_write,
                               fallback.cache_read, dearest_speech)
        self._unpriced_logged: set[str] = set()

    @classmethod
    def from_config(cls, config: Any,
                    extra: Mapping[str, Mapping[str, float]] | None = None) -> PriceTable:
        """`[prices]`, plus `extra` rows (the prices `[models.*]` aliases give their models;
        an explicit `[prices]` row wins)."""
        rows = {**(extra or {}), **config["prices"]}
        return cls(parse(rows, getattr(config, "origin", "(config)")))

    def price(self, model: str) -> Price:
        exact = self._prices.get(model)
        if exact is not None:
            return exact
        for name in self._names:
            if model.startswith(name):
                return self._prices[name]
        if model not in self._unpriced_logged and len(self._unpriced_logged) < 100:
            self._unpriced_logged.add(model)
            log.warning("no [prices.%r] in the config: its calls are charged at the highest "
                        "configured rate; add its prices to count them exactly", model)
        return self._fallback

    def cost(self, model: str, usage: Mapping[str, int]) -> float:
        return self.price(model).cost(usage)


def parse(raw: Mapping[str, Any], origin: str = "(config)") -> dict[str, Price]:
    """The [prices] tables as values; a table missing one of the four rates is a ConfigError,
    unless it is a speech model's, which has only `characters`."""
    prices = {}
    for model, table in raw.items():
        if SPEECH_KEY in table and not any(key in table for key in PRICE_KEYS):
            prices[model] = Price(0.0, 0.0, 0.0, 0.0, float(table[SPEECH_KEY]))
            continue
        missing = [key for key in PRICE_KEYS if key not in table]
        if missing:
            raise ConfigError(f"{origin}: [prices.{model!r}] is missing {', '.join(missing)} "
                              f"(every model needs {', '.join(PRICE_KEYS)}, per million tokens)")
        prices[model] = Price(*(float(table[key]) for key in PRICE_KEYS),
                              float(table.get(SPEECH_KEY, 0.0)))
    return prices
