"""A model's context window bounds the history: a conversation on a model with a small window
(a local one, say 16k tokens) is compacted before it outgrows that window, even though the
configured `[agent] context_budget_tokens` is far larger; a large window keeps the configured
budget. On both providers, through their real SDKs against the fakes."""

from __future__ import annotations

import pytest

from tests.fakes.anthropic_server import text
from tests.runtime.test_runtime import message, say
from tests.support.providers import PROVIDERS, limited

SUMMARY = "SUMMARY: the user said many long things"
WORDS = "words " * 600       # about 900 tokens a message, by the store's estimate


def small_window(provider: str, fake, **capabilities) -> dict:
    overrides = limited(provider, fake, **capabilities)
    overrides["agent"] = {**overrides["agent"], "context_budget_tokens": 150_000}
    return overrides


def summarising(body) -> object:
    prompt = str(body["messages"][-1]["content"])
    return text(SUMMARY) if "summar" in prompt.lower() and "compacted" not in prompt else text("noted")


@pytest.mark.parametrize("provider_name", PROVIDERS)
async def test_a_small_context_window_compacts_before_the_history_outgrows_it(
        app_factory, fake_model, provider_name):
    app = await app_factory(small_window(provider_name, fake_model, context_tokens=16_000,
                                         max_output_tokens=2_000))
    budget = app.services.llm.history_budget("limited", 150_000, 4096)
    assert budget == 16_000 - 2_000 - 6_000
    fake_model.responder = summarising
    for i in range(14):                 # ~12,600 tokens in all: more than the window allows
        await say(app, f"message {i}: {WORDS}")
    prompts = [str(r.json["messages"]) for r in fake_model.requests]
    assert any(SUMMARY in p for p in prompts), "the history was never compacted"
    stored, _ = await app.agent.journal.stored(await app.agent.session_id(message("x")))
    assert len(stored) < 28


@pytest.mark.parametrize("provider_name", PROVIDERS)
async def test_a_large_context_window_keeps_the_configured_budget(app_factory, fake_model,
                                                                  provider_name):
    app = await app_factory(small_window(provider_name, fake_model, context_tokens=1_000_000))
    assert app.services.llm.history_budget("limited", 150_000, 4096) == 150_000
