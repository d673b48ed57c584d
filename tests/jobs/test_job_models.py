"""A job may name its own model: a local one for private notes while the agent chats on
Anthropic, say. Its runs ask that model — and so does the step after an approval tap, and a
restart in the middle — and only a model the operator configured can be named."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.app import App
from bot.conversation import turns
from bot.core.approval_cards import ApprovalNeeded
from bot.core.events import CollectingSink, Done
from bot.jobs.jobs import Job
from bot.jobs.runner import AgentJobRunner
from bot.jobs.schedule import parse_cron
from bot.jobs.scheduler import Scheduler
from tests.conftest import FAKE_ENV, make_config
from tests.fakes.anthropic_server import reply, text, tool_results, tool_use
from tests.fakes.openai_server import FakeOpenAI
from tests.jobs.test_jobs import START, Clock, Outlet, said, tick
from tests.support.pg_support import on_both_backends
from tests.support.providers import OPENAI_KEY_ENV, openai_model
from tests.support.runtime_tools import Writer, answer

backend_name = on_both_backends()
LOCAL_MODEL = "fake-gpt-1"


@pytest.fixture
async def local_model():
    async with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
async def world(tmp_path: Path, fake_anthropic, local_model, store_backend):
    """The agent on (fake) Anthropic, with a `local` alias on a second, OpenAI-compatible fake
    that only jobs use."""
    clock = Clock()
    overrides = {"models": {"local": openai_model(local_model)},
                 "agent": {"llm_max_retries": 0, "llm_timeout_seconds": 10},
                 "senders": {"telegram:1": "full", "telegram:2": "supervised"}}
    env = {**FAKE_ENV, "ANTHROPIC_BASE_URL": fake_anthropic.base_url,
           OPENAI_KEY_ENV: "sk-test-openai-000000000000", **store_backend.env}
    app = await App.open(make_config(tmp_path, overrides, env=env), clock=clock)
    outlet = Outlet()
    app.services.delivery.register("telegram", outlet)
    scheduler = Scheduler(app.services.jobs,
                          AgentJobRunner(app.agent, app.services.delivery, app.services.senders),
                          clock)
    yield app, clock, outlet, scheduler
    await scheduler.drain()
    await app.close()


def create(model: str, **more) -> dict:
    return {"action": "create", "name": "digest", "cron": "0 8 * * *",
            "prompt": "summarise my notes", "model": model, **more}


async def test_a_job_created_with_a_configured_model_runs_on_it_not_on_the_agents(
        world, fake_anthropic, local_model):
    app, clock, outlet, scheduler = world
    fake_anthropic.script(reply(tool_use("schedule", create("local"))), text("Scheduled."))
    chat = CollectingSink()
    await app.agent.handle(said("telegram:1", "every morning, summarise my notes locally"), chat)
    assert chat.text == "Scheduled."
    (job,) = await app.services.jobs.for_owner("telegram:1")
    assert job.model == "local"
    created = str(tool_results(fake_anthropic.requests[-1].json)[0]["content"])
    assert "'model': 'local'" in created or '"model": "local"' in created
    chatted = len(fake_anthropic.requests)

    local_model.script(text("Three notes, all about bread."))
    clock.now = job.next_run + 1
    assert await tick(scheduler, app) == 1
    (call,) = local_model.requests
    assert call.json["model"] == LOCAL_MODEL
    assert len(fake_anthropic.requests) == chatted         # the agent's model was not asked
    assert [d.text for d in outlet.events(Done)] == ["Three notes, all about bread."]


async def test_an_unknown_model_or_a_model_for_a_plain_reminder_is_refused_with_the_choices(
        world, fake_anthropic):
    app, _, _, _ = world
    fake_anthropic.script(
        reply(tool_use("schedule", create("gpt-9-ultra"))),
        reply(tool_use("schedule", {"action": "create", "name": "tea", "at": "in 5 minutes",
                                    "message": "Tea!", "model": "local"})),
        text("Neither worked."))
    await app.agent.handle(said("telegram:1", "schedule it on gpt-9-ultra"), CollectingSink())
    first, second = (str(tool_results(r.json)[0]["content"])
                     for r in fake_anthropic.requests[1:3])
    assert "No model 'gpt-9-ultra' is configured" in first and "local" in first
    assert "claude-sonnet-5-5" in first                       # bare ids the config names
    assert "uses no model" in second
    assert await app.services.jobs.for_owner("telegram:1") == []


async def test_the_step_after_a_tap_and_a_restart_mid_run_stay_on_the_jobs_model(
        world, fake_anthropic, local_model):
    app, clock, outlet, scheduler = world
    writer = Writer()
    app.services.registry.register(writer, "tests")
    job = await app.services.jobs.create(Job(
        id="", owner="telegram:2", channel="telegram", chat="2", name="notes",
        schedule=parse_cron("0 8 * * *", timezone="UTC"), level="supervised",
        prompt="write a note", tools=("writer",), model="local"))
    local_model.script(reply(tool_use("writer", {"note": "one"})))
    clock.now = job.next_run + 1
    assert await tick(scheduler, app) == 1
    (needed,) = outlet.events(ApprovalNeeded)
    request = await app.services.approvals.get(needed.approval.id)
    row = await turns.open_in_session(app.services.store, request.session_id)
    assert row.model == "local"                      # a restart reads the turn back with it
    stored = await app.agent.stored_turn(row, CollectingSink())
    assert app.agent.prompt.model_for(stored) == "local"

    local_model.script(text("Written."))
    resumed = CollectingSink()
    assert (await answer(app.agent, needed.approval.id, "telegram:2", "approve", resumed)).ok
    await app.agent.queue.drain(5)
    assert writer.executed == ["one"] and resumed.text == "Written."
    assert [r.json["model"] for r in local_model.requests] == [LOCAL_MODEL, LOCAL_MODEL]
    assert fake_anthropic.requests == []


async def test_a_job_without_a_model_still_runs_on_the_agents_model(world, fake_anthropic,
                                                                     local_model):
    app, clock, _, scheduler = world
    job = await app.services.jobs.create(Job(
        id="", owner="telegram:1", channel="telegram", chat="1", name="plain",
        schedule=parse_cron("0 8 * * *", timezone="UTC"), level="full", prompt="hello",
        tools=("time_now",)))
    fake_anthropic.script(text("Hi."))
    clock.now = job.next_run + 1
    assert await tick(scheduler, app) == 1
    assert fake_anthropic.requests[-1].json["model"] == app.config.main_model
    assert local_model.requests == []
    assert START < clock.now
