"""Scheduled jobs end to end: created by the agent or by command, run unattended under the
policy, exactly once, with an injected clock (no test sleeps for time to pass)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from bot.app import App
from bot.approvals.expiry import ExpirySweeper
from bot.core.approval_cards import ApprovalNeeded
from bot.core.events import CollectingSink, Done, IncomingMessage, Notice
from bot.jobs.jobs import Job, JobError, JobLimits, Jobs
from bot.jobs.runner import AgentJobRunner
from bot.jobs.schedule import parse_at, parse_cron
from bot.jobs.scheduler import NotDelivered, Scheduler
from tests.conftest import FAKE_ENV, make_config
from tests.fakes.anthropic_server import reply, text, tool_results, tool_use
from tests.support.pg_support import on_both_backends
from tests.support.providers import PROVIDERS, provider_overrides
from tests.support.runtime_tools import Recorder, Writer, answer

backend_name = on_both_backends()

START = 1_796_126_400.0  # 2026-12-01 12:00 UTC


class Clock:
    def __init__(self, now: float = START):
        self.now = now

    def __call__(self) -> float:
        return self.now


class Outlet:
    """The delivery side of a channel: every sink it hands out collects into one list."""

    def __init__(self) -> None:
        self.sinks: list[tuple[str, str, CollectingSink]] = []

    def sink_for(self, chat: str, sender: str) -> CollectingSink:
        sink = CollectingSink()
        self.sinks.append((chat, sender, sink))
        return sink

    def events(self, kind: type) -> list[Any]:
        return [e for _, _, sink in self.sinks for e in sink.of(kind)]


@pytest.fixture
async def world(tmp_path: Path, fake_anthropic, provider_name):
    clock = Clock()
    models, model_env = provider_overrides(provider_name, fake_anthropic)
    overrides = {**models,
                 "agent": {**models.get("agent", {}), "llm_max_retries": 0,
                           "llm_timeout_seconds": 10},
                 "senders": {"telegram:1": "full", "telegram:2": "supervised"}}
    env = {**FAKE_ENV, **model_env}
    app = await App.open(make_config(tmp_path, overrides, env=env), clock=clock)
    outlet = Outlet()
    app.services.delivery.register("telegram", outlet)
    runner = AgentJobRunner(app.agent, app.services.delivery, app.services.senders)
    scheduler = Scheduler(app.services.jobs, runner, clock)
    yield app, clock, outlet, scheduler
    await scheduler.drain()
    await app.close()


def said(sender: str, words: str) -> IncomingMessage:
    return IncomingMessage(sender=sender, chat=sender.partition(":")[2], text=words,
                           channel="telegram")


async def tick(scheduler: Scheduler, app: App) -> int:
    started = await scheduler.tick()
    await scheduler.drain()
    await app.agent.queue.drain(5)
    return started


async def test_remind_me_in_two_minutes_sends_the_reminder_on_time_and_then_the_job_is_gone(
        world, fake_anthropic):
    app, clock, outlet, scheduler = world
    fake_anthropic.script(
        reply(tool_use("schedule", {"action": "create", "name": "stretch", "at": "in 2 minutes",
                                    "message": "Time to stretch!"})),
        text("I'll remind you in 2 minutes."))
    chat = CollectingSink()
    await app.agent.handle(said("telegram:1", "remind me in 2 minutes to stretch"), chat)
    assert chat.text == "I'll remind you in 2 minutes."
    (job,) = await app.services.jobs.for_owner("telegram:1")
    assert job.is_reminder and job.next_run == pytest.approx(START + 120)
    requests = len(fake_anthropic.requests)

    clock.now = START + 119
    assert await tick(scheduler, app) == 0 and outlet.sinks == []
    clock.now = START + 121
    assert await tick(scheduler, app) == 1
    assert [n.text for n in outlet.events(Notice)] == ["⏰ stretch\nTime to stretch!"]
    assert outlet.sinks[0][:2] == ("1", "telegram:1")
    assert len(fake_anthropic.requests) == requests  # a plain reminder costs no model call
    assert await app.services.jobs.for_owner("telegram:1") == []
    clock.now = START + 10_000
    assert await tick(scheduler, app) == 0


async def test_a_supervised_owners_job_runs_low_risk_tools_asks_for_medium_and_refuses_others(
        world, fake_anthropic):
    app, clock, outlet, scheduler = world
    recorder, writer, other = Recorder(), Writer(), Recorder("other")
    for tool in (recorder, writer, other):
        app.services.registry.register(tool, "tests")
    jobs = app.services.jobs
    job = await jobs.create(Job(id="", owner="telegram:2", channel="telegram", chat="2",
                                name="notes", schedule=parse_cron("0 8 * * *", timezone="UTC"),
                                level="supervised", prompt="tidy my notes",
                                tools=("recorder", "writer")))
    fake_anthropic.script(
        reply(tool_use("recorder", {"value": "x"}), tool_use("other", {"value": "y"}),
              tool_use("writer", {"note": "tidy"})))
    clock.now = job.next_run + 1
    assert await tick(scheduler, app) == 1
    assert recorder.calls == [{"value": "x"}] and other.calls == [] and writer.executed == []
    (needed,) = outlet.events(ApprovalNeeded)
    assert needed.approval.tool == "writer" and needed.approval.chat == "2"
    assert outlet.events(Notice)[0].text == "⏰ notes"
    catalog = {t["name"] for t in fake_anthropic.requests[-1].json["tools"]}
    assert catalog == {"recorder", "writer"}  # the job's allowlist, never "schedule"
    # The owner approves in the chat; the resumed turn keeps the job's allowlist.
    fake_anthropic.script(text("Tidied."))
    resumed = CollectingSink()
    resolution = await answer(app.agent, needed.approval.id, "telegram:2", "approve", resumed)
    await app.agent.queue.drain(5)
    assert resolution.ok and writer.executed == ["tidy"] and resumed.text == "Tidied."
    assert {t["name"] for t in fake_anthropic.requests[-1].json["tools"]} == {"recorder", "writer"}
    results = tool_results(fake_anthropic.requests[-1].json)
    refused = [r for r in results if r.get("is_error")]
    assert len(results) == 3 and len(refused) == 1 and "allowlist" in str(refused[0]["content"])


async def test_an_approval_inside_a_capped_job_resumes_at_the_jobs_level_not_the_owners(
        world, fake_anthropic):
    app, clock, outlet, scheduler = world
    writer = Writer()
    app.services.registry.register(writer, "tests")
    # The owner is full now; the job was made at supervised: every step stays supervised.
    job = await app.services.jobs.create(Job(
        id="", owner="telegram:1", channel="telegram", chat="1", name="capped",
        schedule=parse_cron("0 8 * * *", timezone="UTC"), level="supervised",
        prompt="write two notes", tools=("writer",)))
    fake_anthropic.script(reply(tool_use("writer", {"note": "one"})))
    clock.now = job.next_run + 1
    assert await tick(scheduler, app) == 1
    (first,) = outlet.events(ApprovalNeeded)
    # After the tap, the model asks for another medium call: asked again, not run unasked.
    fake_anthropic.script(reply(tool_use("writer", {"note": "two"})), text("done"))
    resumed = CollectingSink()
    await answer(app.agent, first.approval.id, "telegram:1", "approve", resumed)
    await app.agent.queue.drain(5)
    assert writer.executed == ["one"]
    (second,) = resumed.of(ApprovalNeeded)
    assert second.approval.args == {"note": "two"}
    request = await app.services.approvals.get(second.approval.id)
    assert request.autonomy == "supervised" and request.allowlist == frozenset({"writer"})


@pytest.mark.parametrize("provider_name", PROVIDERS)
async def test_a_job_allowed_no_tools_costs_one_call_of_the_small_model(world, fake_anthropic):
    app, clock, outlet, scheduler = world
    await app.services.jobs.create(Job(
        id="", owner="telegram:1", channel="telegram", chat="1", name="quote",
        schedule=parse_at("in 1 minute", now=START, timezone="UTC"), level="full",
        prompt="a short quote to start the day"))
    fake_anthropic.script(text("Well begun is half done."))
    requests = len(fake_anthropic.requests)
    clock.now = START + 61
    assert await tick(scheduler, app) == 1
    (call,) = fake_anthropic.requests[requests:]
    models = app.services.llm.models
    small, main = (models.resolve(app.config["agent"][k]).model for k in ("small_model", "model"))
    assert call.json["model"] == small != main
    assert "tools" not in call.json
    assert [d.text for d in outlet.events(Done)] == ["Well begun is half done."]


async def test_a_job_run_whose_approval_lapses_ends_with_a_note_to_its_owner(
        world, fake_anthropic):
    app, clock, outlet, scheduler = world
    writer = Writer()
    app.services.registry.register(writer, "tests")
    await app.services.jobs.create(Job(
        id="", owner="telegram:2", channel="telegram", chat="2", name="w",
        schedule=parse_at("in 1 minute", now=START, timezone="UTC"), level="supervised",
        prompt="write", tools=("writer",)))
    fake_anthropic.script(reply(tool_use("writer", {"note": "n"})))
    clock.now = START + 61
    await tick(scheduler, app)
    (needed,) = outlet.events(ApprovalNeeded)
    clock.now = needed.approval.expires_at + 1
    assert await ExpirySweeper(app.agent).sweep() == 1
    await app.agent.queue.drain(5)
    assert writer.executed == []
    (note,) = [n for n in outlet.events(Notice) if n.text.startswith("⌛")]
    assert "writer expired — nothing ran" in note.text
    row = await app.services.store.fetchone("SELECT state FROM turns WHERE sender = ?",
                                            ("telegram:2",))
    assert row["state"] == "expired"


async def test_a_job_never_runs_above_the_owners_level_now(world, fake_anthropic):
    app, clock, outlet, scheduler = world
    writer = Writer()
    app.services.registry.register(writer, "tests")
    # Created at "full" by someone whose configured level is now "supervised".
    await app.services.jobs.create(Job(
        id="", owner="telegram:2", channel="telegram", chat="2", name="w",
        schedule=parse_at("in 1 minute", now=START, timezone="UTC"), level="full",
        prompt="write", tools=("writer",)))
    fake_anthropic.script(reply(tool_use("writer", {"note": "n"})))
    clock.now = START + 61
    await tick(scheduler, app)
    assert writer.executed == [] and len(outlet.events(ApprovalNeeded)) == 1


async def test_a_job_of_a_revoked_owner_is_skipped_and_the_owner_told(world, fake_anthropic):
    app, clock, outlet, scheduler = world
    await app.services.jobs.create(Job(
        id="", owner="telegram:9", channel="telegram", chat="9", name="ghost",
        schedule=parse_at("in 1 minute", now=START, timezone="UTC"), level="full",
        prompt="anything"))
    clock.now = START + 61
    await tick(scheduler, app)
    assert "no longer have access" in outlet.events(Notice)[0].text
    assert fake_anthropic.requests == []


async def test_a_job_over_its_owners_budget_is_skipped_and_the_owner_told(world, fake_anthropic):
    app, clock, outlet, scheduler = world
    await app.services.spend.record(session_id="s", sender="telegram:1",
                                    model="claude-sonnet-5-5", usage={"output_tokens": 200_000})
    await app.services.jobs.create(Job(
        id="", owner="telegram:1", channel="telegram", chat="1", name="digest",
        schedule=parse_at("in 1 minute", now=START, timezone="UTC"), level="full",
        prompt="summarise my notes"))
    clock.now = START + 61
    await tick(scheduler, app)
    (notice,) = outlet.events(Notice)
    assert notice.text.startswith("⏰ digest: skipped — You have used today's model budget "
                                  "($3.00 of $2.00)")
    assert "resets at midnight UTC (in 11 h 58 min)" in notice.text  # the injected clock
    assert fake_anthropic.requests == []


async def test_two_stores_on_one_database_run_each_due_run_exactly_once(store_backend):
    clock = Clock()
    async with store_backend.open() as first, store_backend.open() as second:
        a, b = Jobs(first, clock=clock), Jobs(second, clock=clock)
        for n in range(20):
            await a.create(Job(id="", owner=f"telegram:{n}", channel="telegram", chat=str(n),
                               name=f"j{n}", schedule=parse_cron("0 * * * *", timezone="UTC"),
                               level="full", message="hi"))
        ran: list[str] = []

        class Runner:
            async def run(self, claim: Any) -> tuple[bool, str]:
                ran.append(claim.job.id)
                return True, "ok"

            async def tell_owner(self, job: Any, words: str, buttons: Any = ()) -> None:
                raise AssertionError(words)

        one, two = Scheduler(a, Runner(), clock), Scheduler(b, Runner(), clock)
        for hour in (1, 2):
            clock.now = START + hour * 3600 + 1
            await asyncio.gather(one.tick(), two.tick(), one.tick(), two.tick())
            await one.drain()
            await two.drain()
        assert len(ran) == 40 and len(set(ran)) == 20
        rows = await first.fetchall("SELECT job_id, COUNT(*) AS n FROM job_runs GROUP BY job_id")
        assert {row["n"] for row in rows} == {2}


async def test_a_run_cut_off_by_a_crash_is_reported_and_never_repeated(store_backend):
    clock = Clock()
    told: list[str] = []

    class Runner:
        async def run(self, claim: Any) -> tuple[bool, str]:
            raise AssertionError("the interrupted run must not start again")

        async def tell_owner(self, job: Any, words: str, buttons: Any = ()) -> None:
            told.append(words)

    async with store_backend.open() as store:
        jobs = Jobs(store, JobLimits(run_lease_seconds=600), clock)
        job = await jobs.create(Job(id="", owner="telegram:1", channel="telegram", chat="1",
                                    name="daily", schedule=parse_cron("0 9 * * *", timezone="UTC"),
                                    level="full", prompt="summarise the news"))
        clock.now = job.next_run + 1
        assert await jobs.claim((await jobs.due(clock.now))[0], clock.now) is not None
        # The process dies here, mid-run. A new one starts on the same store:
        clock.now += 601
        assert await Scheduler(jobs, Runner(), clock).tick() == 0
    assert len(told) == 1 and "cut off by a restart" in told[0]


class Teller:
    """A runner that never runs (a cut-off run must not start again) and tells the owner,
    refusing the first `unreachable` times as a channel not connected yet would."""

    def __init__(self, unreachable: int = 0):
        self.told: list[str] = []
        self.unreachable = unreachable

    async def run(self, claim: Any) -> tuple[bool, str]:
        raise AssertionError("the interrupted run must not start again")

    async def tell_owner(self, job: Any, words: str, buttons: Any = ()) -> None:
        if self.unreachable:
            self.unreachable -= 1
            raise NotDelivered("the telegram channel is not connected")
        self.told.append(words)


async def _cut_off_once(store: Any, clock: Clock) -> tuple[Jobs, Job]:
    """A one-time job whose run was cut off: claimed, then its process died."""
    jobs = Jobs(store, JobLimits(run_lease_seconds=600), clock)
    job = await jobs.create(Job(id="", owner="telegram:1", channel="telegram", chat="1",
                                name="digest", level="full", prompt="summarise the news",
                                schedule=parse_at("in 1 minute", now=START, timezone="UTC")))
    clock.now = job.next_run + 1
    assert await jobs.claim((await jobs.due(clock.now))[0], clock.now) is not None
    clock.now += 601
    return jobs, job


async def test_a_cut_off_run_whose_report_died_with_its_process_is_reported_by_the_next(
        store_backend):
    clock = Clock()
    async with store_backend.open() as store:
        jobs, job = await _cut_off_once(store, clock)
        # The next process marks the run cut off and dies before telling anyone:
        assert [cut.job.id for cut in await jobs.interrupted(clock.now)] == [job.id]
        again, teller = Jobs(store, JobLimits(run_lease_seconds=600), clock), Teller()
        assert await Scheduler(again, teller, clock).tick() == 0
        assert len(teller.told) == 1 and "cut off by a restart" in teller.told[0]
        assert (await again.get(job.id)).status == "done"
        await Scheduler(again, teller, clock).tick()
        assert len(teller.told) == 1   # told once: the report is recorded


async def test_a_cut_off_run_is_reported_once_its_chat_can_be_reached(store_backend):
    clock = Clock()
    async with store_backend.open() as store:
        jobs, job = await _cut_off_once(store, clock)
        teller = Teller(unreachable=1)
        scheduler = Scheduler(Jobs(store, JobLimits(run_lease_seconds=600), clock), teller, clock)
        await scheduler.tick()
        assert teller.told == [] and (await jobs.get(job.id)).status == "active"
        await scheduler.tick()
        assert len(teller.told) == 1 and (await jobs.get(job.id)).status == "done"


async def test_runs_missed_while_down_run_once_within_the_grace_period_else_are_reported(store_backend):
    clock = Clock()
    ran, told = [], []

    class Runner:
        async def run(self, claim: Any) -> tuple[bool, str]:
            ran.append(claim.scheduled_for)
            return True, "ok"

        async def tell_owner(self, job: Any, words: str, buttons: Any = ()) -> None:
            told.append(words)

    async with store_backend.open() as store:
        jobs = Jobs(store, JobLimits(grace_seconds=1800), clock)
        hourly = parse_cron("0 * * * *", timezone="UTC")
        job = await jobs.create(Job(id="", owner="telegram:1", channel="telegram", chat="1",
                                    name="hourly", schedule=hourly, level="full", message="m"))
        scheduler = Scheduler(jobs, Runner(), clock)
        clock.now = job.next_run + 3 * 3600 + 600   # down for four runs; the last is 10 min late
        await scheduler.tick()
        await scheduler.drain()
        assert told == [] and len(ran) == 1          # caught up once, not four times
        daily = await jobs.create(Job(id="", owner="telegram:1", channel="telegram", chat="1",
                                      name="daily", schedule=parse_cron("0 9 * * *", timezone="UTC"),
                                      level="full", message="m"))
        await jobs.cancel(job.id, "telegram:1")
        clock.now = daily.next_run + 7200            # down across 09:00 until 11:00
        await scheduler.tick()
        await scheduler.drain()
        assert len(ran) == 1 and len(told) == 1 and "missed" in told[0]
        (current,) = await jobs.for_owner("telegram:1")
        assert current.next_run > clock.now


async def test_three_failures_in_a_row_pause_the_job_and_the_owner_can_resume_it(store_backend):
    clock = Clock()
    told: list[str] = []

    pressed: list[str] = []

    class Failing:
        async def run(self, claim: Any) -> tuple[bool, str]:
            return False, "model down"

        async def tell_owner(self, job: Any, words: str, buttons: Any = ()) -> None:
            told.append(words)
            pressed.extend(b.command for b in buttons)

    async with store_backend.open() as store:
        jobs = Jobs(store, clock=clock)
        job = await jobs.create(Job(id="", owner="telegram:1", channel="telegram", chat="1",
                                    name="flaky", schedule=parse_cron("0 * * * *", timezone="UTC"),
                                    level="full", prompt="p"))
        scheduler = Scheduler(jobs, Failing(), clock)
        for _ in range(3):
            clock.now = (await jobs.get(job.id)).next_run + 1
            await scheduler.tick()
            await scheduler.drain()
        paused = await jobs.get(job.id)
        assert paused.status == "paused" and f"/jobs resume {job.id}" in told[-1]
        assert pressed == [f"/jobs resume {job.id}"]
        clock.now += 7200
        assert await scheduler.tick() == 0
        resumed = await jobs.resume(job.id, "telegram:1")
        assert resumed.status == "active" and resumed.failures == 0


async def test_limits_refuse_too_many_jobs_and_too_frequent_schedules(store_backend):
    async with store_backend.open() as store:
        jobs = Jobs(store, JobLimits(max_per_sender=2, min_interval_seconds=600), Clock())
        every_5 = Job(id="", owner="telegram:1", channel="telegram", chat="1", name="x",
                      schedule=parse_cron("*/5 * * * *", timezone="UTC"), level="full",
                      message="m")
        with pytest.raises(JobError, match="minimum interval"):
            await jobs.create(every_5)
        hourly = parse_cron("0 * * * *", timezone="UTC")
        for _ in range(2):
            await jobs.create(Job(id="", owner="telegram:1", channel="telegram", chat="1",
                                  name="h", schedule=hourly, level="full", message="m"))
        with pytest.raises(JobError, match="most allowed"):
            await jobs.create(Job(id="", owner="telegram:1", channel="telegram", chat="1",
                                  name="h", schedule=hourly, level="full", message="m"))
        with pytest.raises(JobError, match="of yours"):
            await jobs.cancel((await jobs.for_owner("telegram:1"))[0].id, "telegram:2")


async def test_slash_jobs_lists_with_cancel_buttons_and_cancels(world):
    app = world[0]
    job = await app.services.jobs.create(Job(
        id="", owner="telegram:1", channel="telegram", chat="1", name="standup",
        schedule=parse_cron("0 9 * * 1-5", timezone="UTC"), level="full", message="standup!"))
    listing = CollectingSink()
    await app.agent.handle(said("telegram:1", "/jobs"), listing)
    (notice,) = listing.of(Notice)
    assert "standup" in notice.text and "every weekday at 09:00" in notice.text
    assert [b.command for b in notice.buttons] == [f"/jobs cancel {job.id}"]
    stranger = CollectingSink()
    await app.agent.handle(said("telegram:2", f"/jobs cancel {job.id}"), stranger)
    assert "Cannot cancel" in stranger.of(Notice)[0].text
    done = CollectingSink()
    await app.agent.handle(said("telegram:1", notice.buttons[0].command), done)
    assert "cancelled" in done.of(Notice)[0].text
    assert await app.services.jobs.for_owner("telegram:1") == []


async def test_a_recurring_job_asks_a_supervised_sender_with_the_schedule_in_words(
        world, fake_anthropic):
    app = world[0]
    fake_anthropic.script(reply(tool_use("schedule", {
        "action": "create", "name": "weekly notes", "cron": "0 8 * * 1",
        "prompt": "summarise my notes"})))
    sink = CollectingSink()
    await app.agent.handle(said("telegram:2", "every Monday at 8 summarise my notes"), sink)
    (needed,) = sink.of(ApprovalNeeded)
    summary = needed.approval.summary
    assert "every Monday at 08:00 (UTC)" in summary and "Next runs: Mon 2026-12-07 08:00" in summary
    assert summary.count("Mon 2026-12-") == 3 and sink.of(Done)[-1].waiting_for_approval
    assert await app.services.jobs.for_owner("telegram:2") == []


async def test_timezone_command_sets_the_zone_new_schedules_use(world):
    app = world[0]
    sink = CollectingSink()
    await app.agent.handle(said("telegram:1", "/timezone Europe/Rome"), sink)
    await app.agent.handle(said("telegram:1", "/timezone Mars/Base"), sink)
    await app.agent.handle(said("telegram:1", "/timezone"), sink)
    texts = [n.text for n in sink.of(Notice)]
    assert "set to Europe/Rome" in texts[0] and "unknown time zone" in texts[1]
    assert "Europe/Rome" in texts[2]
