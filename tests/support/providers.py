"""Running a test module (or one test) on both model providers: the Anthropic API and an
OpenAI-compatible endpoint, each through its real SDK against its fake on 127.0.0.1.

    provider_name = on_both_providers()          # every test of the module, on both
    @pytest.mark.parametrize("provider_name", PROVIDERS)   # or one test

The `fake_model` fixture (tests/conftest.py) is then the fake of that provider (both share one
API: `script`, `requests`, `responder`, `wait_for_requests`), and `app_factory` configures the
app to talk to it: a bare Anthropic id as today, or a `[models.main]` alias of the OpenAI
endpoint priced like Sonnet, so costs and budgets read the same on both.
"""

from __future__ import annotations

from typing import Any

import pytest

PROVIDERS = ("anthropic", "openai")
ALIAS = "main"
SMALL_ALIAS = "small"
OPENAI_MODEL = "fake-gpt-1"
OPENAI_SMALL_MODEL = "fake-gpt-mini"
OPENAI_KEY_ENV = "FAKE_OPENAI_KEY"
SONNET_PRICES = {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.30}


def on_both_providers() -> Any:
    """A `provider_name` fixture for a module: `provider_name = on_both_providers()`."""
    @pytest.fixture(params=PROVIDERS)
    def provider_name(request: pytest.FixtureRequest) -> str:
        return request.param
    return provider_name


def openai_model(fake: Any, model: str = OPENAI_MODEL, **capabilities: Any) -> dict[str, Any]:
    """The `[models.x]` table of an OpenAI-compatible model served by `fake`."""
    caps = {"vision": True, "pdfs": False, "parallel_tool_calls": True, **capabilities}
    return {"provider": "openai", "base_url": fake.api_url, "model": model,
            "api_key_env": OPENAI_KEY_ENV, "capabilities": caps, "prices": dict(SONNET_PRICES)}


def provider_overrides(provider: str, fake: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """Config overrides and environment for an app whose every model is `fake`'s."""
    if provider == "anthropic":
        return {}, {"ANTHROPIC_BASE_URL": fake.base_url}
    agent = {"model": ALIAS, "small_model": SMALL_ALIAS, "supra_model": ALIAS}
    models = {ALIAS: openai_model(fake), SMALL_ALIAS: openai_model(fake, OPENAI_SMALL_MODEL)}
    return ({"models": models, "agent": agent},
            {OPENAI_KEY_ENV: "sk-test-openai-000000000000"})


def model_id(provider: str) -> str:
    """The model id usage rows name for the app's main model."""
    return "claude-sonnet-5-5" if provider == "anthropic" else OPENAI_MODEL


def limited(provider: str, fake: Any, **capabilities: Any) -> dict[str, Any]:
    """Overrides making the app's main model one that lacks something (vision, tools…), on
    either provider: an alias of the Anthropic model, or the OpenAI-compatible one."""
    if provider == "anthropic":
        table = {"provider": "anthropic", "model": "claude-sonnet-5-5",
                 "capabilities": capabilities}
    else:
        table = openai_model(fake, **capabilities)
    return {"models": {"limited": table}, "agent": {"model": "limited"}}


def is_error_text(content: str) -> bool:
    """Tool errors reach the model as "<kind>: <message>" (bot.runtime.dispatch.error_block)."""
    from bot.core.tool import ERROR_KINDS

    return content.partition(":")[0] in ERROR_KINDS


def tool_result_texts(fake: Any, request: Any) -> list[str]:
    """The tool results a request carried back to the model, as text, on either wire."""
    if getattr(fake, "provider", "anthropic") == "openai":
        return [content for _, content in fake.results_of(request)]
    return [b["content"] if isinstance(b["content"], str) else
            "".join(p.get("text", "") for p in b["content"])
            for m in request.json["messages"] if m["role"] == "user" and isinstance(m["content"], list)
            for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]
