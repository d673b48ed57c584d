"""Scheduled jobs of every owner: Pause, Resume or Cancel one (as `myclaw jobs cancel`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from bot.core.errors import reason_of
from bot.jobs.jobs import Job, JobError, Jobs
from bot.language.catalogs import N_
from bot.language.phrase import Phrase
from bot.ops.console.auth import OPERATOR
from bot.ops.console.web import Action, ConsoleContext, Outcome, Page

ENDED_SHOWN = 20


async def load(ctx: ConsoleContext, query: Mapping[str, str]) -> dict[str, Any]:
    jobs: Jobs = ctx.services.jobs
    every = await jobs.listing(include_ended=True)
    live = [job for job in every if job.status in ("active", "paused")]
    ended = [job for job in reversed(every) if job.status not in ("active", "paused")]
    return {"jobs": live, "ended": ended[:ENDED_SHOWN]}


def _change(done: str, change: Callable[[Jobs, str], Awaitable[Job]]) -> Any:
    async def run(ctx: ConsoleContext, route: Mapping[str, str], form: Mapping[str, str]) -> Outcome:
        try:
            job = await change(ctx.services.jobs, route["id"])
        except JobError as exc:
            return Outcome(False, reason_of(exc))
        return Outcome(True, Phrase(done, id=job.id, name=job.name, owner=job.owner))
    return run


PAUSED = N_("Paused job {id} ({name}) of {owner}.")
RESUMED = N_("Resumed job {id} ({name}) of {owner}.")
CANCELLED = N_("Cancelled job {id} ({name}) of {owner}.")

PAGE = Page("/jobs", N_("Jobs"), "jobs.html", load, actions=(
    Action("/jobs/{id}/pause", "job-pause",
           _change(PAUSED, lambda jobs, job_id: jobs.pause(job_id, OPERATOR, any_owner=True))),
    Action("/jobs/{id}/resume", "job-resume",
           _change(RESUMED, lambda jobs, job_id: jobs.resume(job_id, OPERATOR, any_owner=True))),
    Action("/jobs/{id}/cancel", "job-cancel",
           _change(CANCELLED, lambda jobs, job_id: jobs.cancel(job_id, OPERATOR, any_owner=True))),
))
