"""Failover: when the model asked is overloaded, rate limited, failing or too slow, the next of
`[agent] fallbacks` takes the same step; the person is told once per turn which model
answered, and the usage row and the audit log name the model that did. Run with either
provider first; the fallback is a second OpenAI-compatible endpoint."""

from __future__ import annotations

import pytest

from bot.core.events import ErrorEvent, Notice
from bot.llm.client import ANSWERED_BY
from tests.fakes.anthropic_server import error, reply, text, tool_use
from tests.fakes.openai_server import FakeOpenAI
from tests.runtime.test_runtime import say
from tests.support.providers import model_id, on_both_providers, openai_model
from tests.support.runtime_tools import Recorder

provider_name = on_both_providers()
PRIMARY = {"anthropic": "claude-sonnet-5-5", "openai": "main"}


@pytest.fixture
async def backup():
    async with FakeOpenAI() as fake:
        yield fake


async def app_with_backup(app_factory, backup, provider_name):
    return await app_factory({
        "models": {"backup": openai_model(backup, "backup-model")},
        "agent": {"fallbacks": ["backup"], "llm_max_retries": 0}})


@pytest.mark.parametrize("failure", [
    error(529, "overloaded_error", "Overloaded"),
    error(429, "rate_limit_error", "slow down"),
    error(500, "api_error", "boom"),
], ids=["overloaded", "rate-limited", "5xx"])
async def test_the_fallback_answers_the_step_and_the_person_is_told_which_model(
        app_factory, fake_model, backup, provider_name, failure):
    app = await app_with_backup(app_factory, backup, provider_name)
    fake_model.script(failure)
    backup.script(text("From the backup."))
    sink = await say(app, "hello")
    assert sink.text == "From the backup."
    assert [n.text for n in sink.of(Notice)] == [
        ANSWERED_BY.format(failed=PRIMARY[provider_name], model="backup")]
    rows = await app.services.store.fetchall("SELECT model FROM usage")
    assert [r["model"] for r in rows] == ["backup-model"]
    (audit,) = await app.services.store.fetchall(
        "SELECT sender, outcome, detail FROM audit WHERE decision = 'model'")
    assert audit["outcome"] == "failover" and "answered by backup (backup-model)" in audit["detail"]


async def test_two_failovers_in_one_turn_are_said_once(app_factory, fake_model, backup,
                                                       provider_name):
    app = await app_with_backup(app_factory, backup, provider_name)
    app.services.registry.register(Recorder(), "tests")
    fake_model.script(error(529, "overloaded_error"), error(529, "overloaded_error"))
    backup.script(reply(text("Recording."), tool_use("recorder", {"value": "a"})), text("Done."))
    sink = await say(app, "record a")
    assert sink.text == "Done."
    assert len([n for n in sink.of(Notice) if "answered instead" in n.text]) == 1
    assert len(fake_model.requests) == 2 and len(backup.requests) == 2  # each step asked first


async def test_an_error_another_model_cannot_fix_is_not_failed_over(app_factory, fake_model,
                                                                    backup, provider_name):
    app = await app_with_backup(app_factory, backup, provider_name)
    fake_model.script(error(401, "authentication_error", "bad key"))
    sink = await say(app, "hello")
    (failure,) = sink.of(ErrorEvent)
    assert "API key" in failure.message and backup.requests == []


async def test_when_every_model_fails_the_last_error_is_said(app_factory, fake_model, backup,
                                                             provider_name):
    app = await app_with_backup(app_factory, backup, provider_name)
    fake_model.script(error(529, "overloaded_error"))
    backup.script(error(429, "rate_limit_exceeded", "slow down"))
    sink = await say(app, "hello")
    (failure,) = sink.of(ErrorEvent)
    assert "rate-limiting" in failure.message
    assert await app.services.store.fetchall("SELECT * FROM usage") == []


async def test_without_fallbacks_the_model_asked_is_the_model_recorded(app_factory, fake_model,
                                                                       provider_name):
    app = await app_factory()
    fake_model.script(text("hi"))
    await say(app, "hello")
    rows = await app.services.store.fetchall("SELECT model FROM usage")
    assert [r["model"] for r in rows] == [model_id(provider_name)]
