"""Scheduled jobs of every owner: Pause, Resume or Cancel one (as `myclaw jobs cancel`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from bot.jobs.jobs import Job, JobError, Jobs
from bot.ops.console.auth import OPERATOR
from bot.ops.console.web import Action, ConsoleContext, Outcome, Page

ENDED_SHOWN = 20


async def load(ctx: ConsoleContext, query: Mapping[str, str]) -> dict[str, Any]:
    jobs: Jobs = ctx.services.jobs
    every = await jobs.listing(include_ended=True)
    live = [job for job in every if job.status in ("active", "paused")]
    ended = [job for job in reversed(every) if job.status not in ("active", "paused")]
    return {"jobs": live, "ended": ended[:ENDED_SHOWN]}


def _change(verb: str, change: Callable[[Jobs, str], Awaitable[Job]]) -> Any:
    async def run(ctx: ConsoleContext, route: Mapping[str, str], form: Mapping[str, str]) -> Outcome:
        try:
            job = await change(ctx.services.jobs, route["id"])
        except JobError as exc:
            return Outcome(False, str(exc))
        return Outcome(True, f"{verb} job {job.id} ({job.name}) of {job.owner}.")
    return run


PAGE = Page("/jobs", "Jobs", "jobs.html", load, actions=(
    Action("/jobs/{id}/pause", "job-pause",
           _change("Paused", lambda jobs, job_id: jobs.pause(job_id, OPERATOR, any_owner=True))),
    Action("/jobs/{id}/resume", "job-resume",
           _change("Resumed", lambda jobs, job_id: jobs.resume(job_id, OPERATOR, any_owner=True))),
    Action("/jobs/{id}/cancel", "job-cancel",
           _change("Cancelled", lambda jobs, job_id: jobs.cancel(job_id, OPERATOR, any_owner=True))),
))
