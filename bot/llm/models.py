"""Models by name: `[models.<alias>]` tables, and bare Anthropic model ids as before.

`agent.model`, `supra_model`, `small_model`, `[jobs] model` and a profile's `model` each name
an alias or a bare id; a bare id is an Anthropic model with Anthropic's capabilities, reached
with `ANTHROPIC_API_KEY` (and `ANTHROPIC_BASE_URL` when set), exactly as before aliases existed.
`[agent] fallbacks` lists the models that take a step over, in order, when the one asked is
overloaded, rate limited, failing (5xx) or too slow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.llm.capabilities import ANTHROPIC as ANTHROPIC_CAPS
from bot.llm.capabilities import FREE, Capabilities, defaults, is_local

ANTHROPIC_KEY = "ANTHROPIC_API_KEY"
OPENAI_KEY = "OPENAI_API_KEY"
PROVIDERS = ("anthropic", "openai")


@dataclass(frozen=True)
class ModelSpec:
    alias: str          # the name the config uses (a bare id names itself)
    provider: str       # "anthropic" | "openai"
    model: str          # the id sent to the API
    base_url: str = ""  # "" = the provider's default (ANTHROPIC_BASE_URL for Anthropic)
    api_key_env: str = ANTHROPIC_KEY
    capabilities: Capabilities = ANTHROPIC_CAPS
    prices: dict[str, float] | None = None   # per million tokens; None = [prices] decides

    @property
    def endpoint(self) -> tuple[str, str, str]:
        """Models sharing this share one SDK client (and its connection pool)."""
        return (self.provider, self.base_url, self.api_key_env)


def spec_of(alias: str, table: dict[str, Any]) -> ModelSpec:
    provider = table.get("provider", "anthropic")
    base_url = table.get("base_url", "")
    model = table.get("model", alias)
    key_env = table.get("api_key_env") or (ANTHROPIC_KEY if provider == "anthropic"
                                           else OPENAI_KEY)
    caps = defaults(provider, base_url, model).overridden(table.get("capabilities", {}))
    prices = table.get("prices")
    if prices is not None:
        prices = {"cache_write": prices["input"], "cache_read": prices["input"], **prices}
    elif provider == "openai" and is_local(base_url):
        prices = dict(FREE)
    return ModelSpec(alias, provider, model, base_url, key_env, caps, prices)


class Models:
    """The configured aliases, resolved once; `resolve` is a dictionary lookup per call."""

    def __init__(self, config: Any):
        self.specs = {alias: spec_of(alias, table)
                      for alias, table in config["models"].items()}
        self.fallbacks: tuple[str, ...] = tuple(config["agent"]["fallbacks"])
        self._bare: dict[str, ModelSpec] = {}
        self._chains: dict[str, list[ModelSpec]] = {}

    def resolve(self, name: str) -> ModelSpec:
        spec = self.specs.get(name)
        if spec is None:
            spec = self._bare.get(name)
            if spec is None:
                spec = self._bare.setdefault(name, ModelSpec(name, "anthropic", name))
        return spec

    def chain(self, name: str) -> list[ModelSpec]:
        """The model asked for, then each fallback that is a different model. Do not mutate."""
        chain = self._chains.get(name)
        if chain is None:
            if len(self._chains) > 256:   # names come from the config, but stay bounded
                self._chains.clear()
            chain = self._chains[name] = self._chain(name)
        return chain

    def _chain(self, name: str) -> list[ModelSpec]:
        first = self.resolve(name)
        chain = [first]
        for fallback in self.fallbacks:
            spec = self.resolve(fallback)
            if all(spec is not known for known in chain):
                chain.append(spec)
        return chain

    def missing_keys(self, names: list[tuple[str, str]], env: Any) -> list[tuple[str, str, str]]:
        """(key variable, model, where it is named) for each model that needs a key not set."""
        missing = []
        for where, name in names:
            for spec in self.chain(name):
                local = spec.provider == "openai" and is_local(spec.base_url)
                if not local and not env.secret(spec.api_key_env):
                    missing.append((spec.api_key_env, spec.alias, where))
        return missing

    def price_tables(self) -> dict[str, dict[str, float]]:
        """The `[prices]` rows the aliases add, keyed by the model id usage records."""
        return {spec.model: spec.prices for spec in self.specs.values() if spec.prices is not None}
