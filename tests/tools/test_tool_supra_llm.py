"""supra_llm through the real LLMClient and anthropic SDK, against the fake Messages API."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from bot.app import build_services
from bot.core.tool import (
    CallContext,
    ToolExternalError,
    ToolNetworkError,
    ToolQuotaError,
    ToolUnsupportedError,
)
from bot.llm.client import LLMClient
from bot.store.sqlite import Store
from bot.toolbox.registry import Registry
from tests.conftest import FAKE_ENV, make_config
from tests.fakes.anthropic_server import FakeAnthropic, error, text
from tools import supra_llm
from tools.supra_llm import SYSTEM_PROMPT


@pytest.fixture
async def fake():
    async with FakeAnthropic() as running:
        yield running


@pytest.fixture
async def supra(tmp_path: Path, fake: FakeAnthropic):
    """A call context wired like production: real store, real LLMClient aimed at the fake."""

    async def build(daily_quota: int = 20) -> CallContext:
        config = make_config(
            tmp_path,
            {"tools": {"supra_llm": {"daily_quota": daily_quota}},
             "agent": {"llm_max_retries": 0, "supra_model": "claude-opus-5-5", "max_tokens": 700}},
            env={**FAKE_ENV, "ANTHROPIC_BASE_URL": fake.base_url},
        )
        store = await Store(config.store_path).open()
        services = build_services(config, store, Registry())
        opened.append((store, services.llm))
        stores.append(store)
        return services.call_context(sender="telegram:7", level="full", session_id="s1",
                                     chat="c", workspace=config.workspace)

    opened: list[tuple[Store, LLMClient]] = []
    yield build
    for store, llm in opened:
        await llm.close()
        await store.close()


stores: list[Store] = []   # the store of the context built last


async def quota_used(ctx: CallContext) -> int:
    row = await stores[-1].fetchone(
        "SELECT count FROM tool_quota WHERE sender = ? AND tool = 'supra_llm'", (str(ctx.sender),))
    return 0 if row is None else row["count"]


async def test_supra_llm_asks_the_supra_model_and_returns_its_answer(supra, fake):
    ctx = await supra()
    progress: list[str] = []
    ctx.progress_sink = progress.append
    fake.script(text("42, because 6 × 7."))
    result = await supra_llm.build().execute(ctx, question="What is 6 × 7?",
                                             context="We are multiplying.")
    assert result == {"answer": "42, because 6 × 7.", "model": "claude-opus-5-5",
                      "quota": {"used_today": 1, "daily_limit": 20}}
    sent = fake.last_request.json
    assert sent["model"] == "claude-opus-5-5"
    assert sent["max_tokens"] == 700
    assert sent["system"] == SYSTEM_PROMPT
    assert sent["messages"] == [{"role": "user", "content":
                                 "<context>\nWe are multiplying.\n</context>\n\nWhat is 6 × 7?"}]
    assert progress == ["Asking claude-opus-5-5…"]


async def test_the_supra_call_is_accounted_in_the_usage_table(supra, fake):
    ctx = await supra()
    fake.script(text("fine"))
    await supra_llm.build().execute(ctx, question="ok?")
    row = await stores[-1].fetchone("SELECT * FROM usage WHERE sender = 'telegram:7'")
    assert row["model"] == "claude-opus-5-5" and row["session_id"] == "s1"
    assert row["input_tokens"] == fake.last_request.usage["input_tokens"] > 0
    assert row["output_tokens"] > 0


async def test_the_call_after_the_daily_quota_is_refused_without_reaching_the_model(supra, fake):
    ctx = await supra(daily_quota=2)
    tool = supra_llm.build()
    await tool.execute(ctx, question="one")
    await tool.execute(ctx, question="two")
    with pytest.raises(ToolQuotaError) as caught:
        await tool.execute(ctx, question="three")
    assert caught.value.to_error().kind == "quota_exceeded"
    assert "own reasoning" in caught.value.llm_hint
    assert len(fake.requests) == 2


async def test_the_quota_is_counted_per_sender(supra, fake):
    ctx = await supra(daily_quota=1)
    await supra_llm.build().execute(ctx, question="mine")
    other = dataclasses.replace(ctx, sender="discord:9")
    result = await supra_llm.build().execute(other, question="theirs")
    assert result["quota"]["used_today"] == 1
    with pytest.raises(ToolQuotaError):
        await supra_llm.build().execute(ctx, question="again")


async def test_concurrent_calls_never_overshoot_the_quota(supra, fake):
    ctx = await supra(daily_quota=3)
    tool = supra_llm.build()
    outcomes = await asyncio.gather(*(tool.execute(ctx, question=f"q{i}") for i in range(7)),
                                    return_exceptions=True)
    answered = [o for o in outcomes if isinstance(o, dict)]
    refused = [o for o in outcomes if isinstance(o, ToolQuotaError)]
    assert (len(answered), len(refused)) == (3, 4)
    assert len(fake.requests) == 3
    assert await quota_used(ctx) == 3


async def test_a_zero_quota_disables_the_tool_without_any_request(supra, fake):
    ctx = await supra(daily_quota=0)
    with pytest.raises(ToolQuotaError):
        await supra_llm.build().execute(ctx, question="anything")
    assert fake.requests == []


async def test_a_refused_request_is_an_external_error_and_gives_the_quota_back(supra, fake):
    ctx = await supra(daily_quota=1)
    fake.script(error(400, "invalid_request_error", "prompt is too long"))
    with pytest.raises(ToolExternalError, match="claude-opus-5-5 refused") as caught:
        await supra_llm.build().execute(ctx, question="huge")
    assert "quota was not used" in caught.value.llm_hint
    assert await quota_used(ctx) == 0
    fake.script(text("now it works"))
    assert (await supra_llm.build().execute(ctx, question="small"))["answer"] == "now it works"


async def test_an_overloaded_model_is_a_network_error_and_gives_the_quota_back(supra, fake):
    ctx = await supra()
    fake.script(error(529, "overloaded_error", "Overloaded"))
    with pytest.raises(ToolNetworkError, match="overloaded"):
        await supra_llm.build().execute(ctx, question="hard one")
    assert await quota_used(ctx) == 0


async def test_an_empty_answer_is_reported_instead_of_returned(supra, fake):
    ctx = await supra()
    fake.script(text(""))
    with pytest.raises(ToolExternalError, match="empty answer"):
        await supra_llm.build().execute(ctx, question="say nothing")


async def test_where_no_model_is_wired_both_execute_and_dry_run_say_it_is_not_available(config):
    tool, bare = supra_llm.build(), CallContext(settings=config)
    for method in (tool.execute, tool.dry_run):
        with pytest.raises(ToolUnsupportedError, match="not available here"):
            await method(bare, question="anything")
