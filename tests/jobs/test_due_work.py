"""Due work waits for its channel: a run is delivered only through a channel connected in the
process that claims it; one that cannot reach its chat is deferred (tried again with backoff),
reported as missed once it is past the grace period and the owner can be told, and a one-time
job ends only when its run was delivered or reported — on both backends, on one process and
on two replicas sharing the store (an injected clock; no test sleeps)."""

from __future__ import annotations

import asyncio
from typing import Any

from bot.conversation.delivery import Delivery
from bot.core.events import CollectingSink, Notice
from bot.jobs.jobs import Job, JobLimits, Jobs
from bot.jobs.runner import AgentJobRunner
from bot.jobs.schedule import parse_at, parse_cron
from bot.jobs.scheduler import Scheduler
from tests.support.pg_support import on_both_backends

backend_name = on_both_backends()

START = 1_796_126_400.0  # 2026-12-01 12:00 UTC


class Clock:
    def __init__(self, now: float = START):
        self.now = now

    def __call__(self) -> float:
        return self.now


class Outlet:
    """A connected channel: every sink it hands out collects into one list."""

    def __init__(self) -> None:
        self.sinks: list[CollectingSink] = []

    def sink_for(self, chat: str, sender: str) -> CollectingSink:
        self.sinks.append(CollectingSink())
        return self.sinks[-1]

    def private_sink_for(self, sender: str) -> CollectingSink:
        return self.sink_for(sender, sender)

    def notices(self) -> list[str]:
        return [n.text for sink in self.sinks for n in sink.of(Notice)]


class Owners:
    async def level_of(self, owner: str, recorded: str = "") -> str:
        return "full"


def a_process(jobs: Jobs, clock: Clock) -> tuple[Scheduler, Delivery]:
    """The scheduler of one process, as the app builds it: it claims runs of the channels
    connected in it."""
    delivery = Delivery()
    runner = AgentJobRunner(None, delivery, Owners())
    return Scheduler(jobs, runner, clock, channels=runner.channels), delivery


def reminder(clock: Clock, at: str = "in 2 minutes", name: str = "stretch") -> Job:
    return Job(id="", owner="telegram:1", channel="telegram", chat="1", name=name,
               schedule=parse_at(at, now=clock.now, timezone="UTC"), level="full",
               message="Time to stretch!")


async def tick(*schedulers: Scheduler) -> int:
    started = sum(await asyncio.gather(*(s.tick() for s in schedulers)))
    for scheduler in schedulers:
        await scheduler.drain()
    return started


async def run_rows(store: Any) -> list[tuple[str, int]]:
    rows = await store.fetchall("SELECT status, attempts FROM job_runs ORDER BY id")
    return [(row["status"], row["attempts"]) for row in rows]


async def test_a_reminder_due_before_its_channel_connects_is_sent_once_it_connects(store_backend):
    clock = Clock()
    async with store_backend.open() as store:
        jobs = Jobs(store, clock=clock)
        job = await jobs.create(reminder(clock))
        scheduler, delivery = a_process(jobs, clock)
        clock.now = START + 180                      # due while the channel is still connecting
        assert await tick(scheduler) == 0
        assert (await jobs.get(job.id)).status == "active" and await run_rows(store) == []
        outlet = Outlet()
        delivery.register("telegram", outlet)
        clock.now += 1
        assert await tick(scheduler) == 1
        assert outlet.notices() == ["⏰ stretch\nTime to stretch!"]
        assert (await jobs.get(job.id)).status == "done"
        assert await tick(scheduler) == 0 and len(outlet.notices()) == 1


async def test_a_claimed_run_whose_channel_is_gone_is_deferred_and_retried_with_backoff(
        store_backend):
    clock = Clock()
    async with store_backend.open() as store:
        jobs = Jobs(store, clock=clock)
        job = await jobs.create(reminder(clock))
        delivery = Delivery()
        runner = AgentJobRunner(None, delivery, Owners())
        claims_anything = Scheduler(jobs, runner, clock)   # as if the channel dropped meanwhile
        clock.now = START + 121
        assert await tick(claims_anything) == 1
        assert await run_rows(store) == [("deferred", 0)]
        deferred = await jobs.get(job.id)
        assert deferred.status == "active" and deferred.next_run == job.next_run
        clock.now += 4                               # the first retry waits five seconds
        assert await tick(claims_anything) == 0
        clock.now += 2
        assert await tick(claims_anything) == 1
        assert await run_rows(store) == [("deferred", 1)]
        assert await jobs.next_due_at() == clock.now + 10   # then ten
        outlet = Outlet()
        delivery.register("telegram", outlet)
        clock.now += 10
        assert await tick(claims_anything) == 1
        assert outlet.notices() == ["⏰ stretch\nTime to stretch!"]
        assert await run_rows(store) == [("ok", 2)]
        assert (await jobs.get(job.id)).status == "done"


async def test_a_run_still_undeliverable_after_the_grace_period_is_reported_missed_once_it_can_be(
        store_backend):
    clock = Clock()
    async with store_backend.open() as store:
        jobs = Jobs(store, JobLimits(grace_seconds=600), clock)
        job = await jobs.create(reminder(clock))
        scheduler, delivery = a_process(jobs, clock)
        clock.now = START + 121
        assert await tick(scheduler) == 0            # no channel: nothing claimed, nothing lost
        clock.now = START + 3600                     # long past the grace period
        assert await tick(scheduler) == 0
        assert (await jobs.get(job.id)).status == "active"
        outlet = Outlet()
        delivery.register("telegram", outlet)
        assert await tick(scheduler) == 0            # reported, not run
        (notice,) = outlet.notices()
        assert notice.startswith("⏰ stretch: a run was missed while I was offline")
        assert (await jobs.get(job.id)).status == "done"
        assert await tick(scheduler) == 0 and len(outlet.notices()) == 1


async def test_two_replicas_the_one_with_the_channel_delivers_each_run_once(store_backend):
    clock = Clock()
    async with store_backend.open() as first, store_backend.open() as second:
        without = Jobs(first, clock=clock, replica="a")
        holding = Jobs(second, clock=clock, replica="b")
        for n in range(5):
            await without.create(reminder(clock, name=f"r{n}"))
        daily = await without.create(Job(
            id="", owner="telegram:1", channel="telegram", chat="1", name="daily",
            schedule=parse_cron("0 13 * * *", timezone="UTC"), level="full", message="hi"))
        a, _ = a_process(without, clock)
        b, delivery = a_process(holding, clock)
        outlet = Outlet()
        delivery.register("telegram", outlet)
        clock.now = START + 3601
        assert await tick(a, b, a, b) == 6
        assert sorted(outlet.notices()) == sorted(
            ["⏰ daily\nhi", *(f"⏰ r{n}\nTime to stretch!" for n in range(5))])
        assert [j.name for j in await holding.listing()] == ["daily"]
        assert (await holding.get(daily.id)).next_run == START + 86400 + 3600


async def test_a_reminder_cut_off_by_a_kill_is_sent_again_at_once_by_the_restarted_replica(
        store_backend):
    clock = Clock()
    async with store_backend.open() as store:
        before = Jobs(store, clock=clock, replica="r")
        job = await before.create(reminder(clock))
        clock.now = START + 121
        assert await before.claim((await before.due(clock.now))[0], clock.now) is not None
        # Killed here, mid-send: the job is not done, its run is left "running".
        assert (await before.get(job.id)).status == "active"
        after = Jobs(store, clock=clock, replica="r")   # the same replica, started again
        scheduler, delivery = a_process(after, clock)
        outlet = Outlet()
        delivery.register("telegram", outlet)
        clock.now += 1
        await tick(scheduler)                       # finds the cut-off run, defers it at once
        await tick(scheduler)
        assert outlet.notices() == ["⏰ stretch\nTime to stretch!"]
        assert (await after.get(job.id)).status == "done"


async def test_a_one_time_job_cut_off_by_a_kill_is_done_only_once_its_owner_was_told(
        store_backend):
    clock = Clock()
    async with store_backend.open() as store:
        before = Jobs(store, clock=clock, replica="r")
        job = await before.create(Job(
            id="", owner="telegram:1", channel="telegram", chat="1", name="digest",
            schedule=parse_at("in 2 minutes", now=clock.now, timezone="UTC"), level="full",
            prompt="summarise the news"))
        clock.now = START + 121
        assert await before.claim((await before.due(clock.now))[0], clock.now) is not None
        after = Jobs(store, clock=clock, replica="r")
        scheduler, delivery = a_process(after, clock)
        assert await tick(scheduler) == 0
        assert (await after.get(job.id)).status == "active"   # nobody could be told yet
        outlet = Outlet()
        delivery.register("telegram", outlet)
        clock.now += 1
        assert await tick(scheduler) == 0
        (notice,) = outlet.notices()
        assert "digest: the run was cut off by a restart and was not repeated" in notice
        assert (await after.get(job.id)).status == "done"
