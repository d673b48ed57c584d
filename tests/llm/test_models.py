"""Models by alias in the config: what an alias resolves to, the capability defaults per
provider and their overrides, what the aliases cost, and the one-line errors of a wrong table.
Bare Anthropic ids resolve as before, and their requests go out untouched."""

from __future__ import annotations

import pytest

from bot.config.prices import PriceTable
from bot.core.errors import ConfigError
from bot.llm.capabilities import ANTHROPIC, LOCAL, OPENAI
from bot.llm.degrade import Degrader
from bot.llm.models import Models
from tests.conftest import make_config

OLLAMA = {"provider": "openai", "base_url": "http://127.0.0.1:11434/v1", "model": "qwen3:14b",
          "api_key_env": "OLLAMA_API_KEY"}


def models_of(tmp_path, **overrides):
    return Models(make_config(tmp_path, overrides))


def test_a_bare_anthropic_id_is_the_anthropic_model_with_its_full_capabilities(tmp_path):
    spec = models_of(tmp_path).resolve("claude-sonnet-5-5")
    assert (spec.provider, spec.model, spec.api_key_env) == ("anthropic", "claude-sonnet-5-5",
                                                             "ANTHROPIC_API_KEY")
    assert spec.capabilities == ANTHROPIC and spec.capabilities.full


async def test_a_request_to_a_model_that_can_take_it_all_is_the_same_object(tmp_path):
    params = {"model": "claude-sonnet-5-5", "max_tokens": 10, "tools": [{}],
              "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}
    fitted, told = await Degrader().fit(params, ANTHROPIC, "claude-sonnet-5-5")
    assert fitted is params and told == []


def test_an_ollama_alias_gets_local_capabilities_and_costs_nothing(tmp_path):
    models = models_of(tmp_path, models={"local": OLLAMA})
    spec = models.resolve("local")
    assert (spec.provider, spec.model) == ("openai", "qwen3:14b")
    assert spec.capabilities == LOCAL and not spec.capabilities.vision
    prices = PriceTable.from_config(make_config(tmp_path), models.price_tables())
    assert prices.cost("qwen3:14b", {"input_tokens": 10**6, "output_tokens": 10**6}) == 0.0


def test_capabilities_and_prices_are_overridden_key_by_key(tmp_path):
    table = {**OLLAMA, "capabilities": {"vision": True, "context_tokens": 128_000},
             "prices": {"input": 0.5, "output": 1.5}}
    models = models_of(tmp_path, models={"local": table})
    caps = models.resolve("local").capabilities
    assert caps.vision and caps.context_tokens == 128_000 and not caps.parallel_tool_calls
    prices = PriceTable.from_config(make_config(tmp_path), models.price_tables())
    assert prices.price("qwen3:14b").output == 1.5 and prices.price("qwen3:14b").cache_read == 0.5


def test_well_known_providers_have_their_own_defaults(tmp_path):
    models = models_of(tmp_path, models={
        "gpt": {"provider": "openai", "model": "gpt-4.1"},
        "routed": {"provider": "openai", "base_url": "https://openrouter.ai/api/v1",
                   "model": "anthropic/claude-sonnet-4.5", "api_key_env": "OPENROUTER_API_KEY"}})
    assert models.resolve("gpt").capabilities == OPENAI
    assert models.resolve("gpt").api_key_env == "OPENAI_API_KEY"
    # Anthropic models through OpenRouter read cache_control markers.
    assert models.resolve("routed").capabilities.prompt_caching == "explicit"


def test_an_unpriced_remote_model_is_charged_at_the_highest_listed_rate(tmp_path):
    models = models_of(tmp_path, models={"gpt": {"provider": "openai", "model": "gpt-x"}})
    prices = PriceTable.from_config(make_config(tmp_path), models.price_tables())
    assert prices.price("gpt-x").output == 25.0     # the Opus rate, the highest configured


def test_fallbacks_follow_the_model_asked_without_repeating_it(tmp_path):
    models = models_of(tmp_path, models={"local": OLLAMA},
                       agent={"model": "local", "fallbacks": ["local", "claude-haiku-5-5"]})
    assert [s.alias for s in models.chain("local")] == ["local", "claude-haiku-5-5"]
    assert models.chain("local") is models.chain("local")   # resolved once


def test_a_profiles_model_wins_over_the_agents(tmp_path):
    config = make_config(tmp_path, {"models": {"local": OLLAMA}, "agent": {"profile": "cheap"},
                                    "profiles": {"cheap": {"model": "local"}}})
    assert config.main_model == "local"
    assert make_config(tmp_path).main_model == "claude-sonnet-5-5"


@pytest.mark.parametrize(("table", "says"), [
    ({"provider": "gemini", "model": "x"}, "[models] local.provider = 'gemini': expected one of"),
    ({"provider": "openai"}, "'model' is a required property"),
    ({**OLLAMA, "api_key_env": "not a name"}, "api_key_env"),
    ({**OLLAMA, "capabilities": {"telepathy": True}}, "'telepathy': unknown key"),
    ({**OLLAMA, "prices": {"input": 1.0}}, "'output' is a required property"),
], ids=["provider", "model", "key-env", "capability", "prices"])
def test_a_wrong_models_table_is_one_clear_line(tmp_path, table, says):
    with pytest.raises(ConfigError) as raised:
        make_config(tmp_path, {"models": {"local": table}})
    assert says in str(raised.value) and "\n" not in str(raised.value)
