"""The jobs port of `bot.core.ports`: what the schedule tool may do with an owner's jobs.

A job is planned for its owner at the level the owner has in this turn (roles applied) and may
use only tools that owner could use (never the schedule tool: a job does not create jobs). A
job may name one of the configured models (an alias or a model id the config names) for its
runs: a cheap one for a daily digest, a local one for private notes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from bot.access.preferences import Preferences
from bot.core.errors import reason_of
from bot.core.identity import Level, Sender
from bot.core.ports import JobRequest
from bot.core.tool import ToolInvalidArgsError, ToolPermissionError
from bot.jobs.jobs import Job, JobError, Jobs
from bot.jobs.schedule import ScheduleError, local_time, parse_at, parse_cron
from bot.language.phrase import Lines, Phrase

SCHEDULE_TOOL = "schedule"
HINT = ("Use `at` for one time ('in 20 minutes', '2026-12-02 09:00', '09:00', local time) or "
        "`cron` for a repeating schedule ('0 8 * * 1' = Mondays 08:00), and `message` for a "
        "plain reminder or `prompt` for work the agent should do then.")
Catalog = Callable[[Sender, Level], set[str]]   # the tools a sender may use at a level


class JobPlanner:
    def __init__(self, jobs: Jobs, preferences: Preferences, catalog: Catalog,
                 default_timezone: str, models: Collection[str] = ()):
        self.jobs = jobs
        self.models = frozenset(models)
        self.preferences = preferences
        self.catalog = catalog
        self.default_timezone = default_timezone

    async def preview(self, request: JobRequest) -> Phrase:
        job = await self._draft(request)
        runs = job.schedule.upcoming(self.jobs.clock(), 3)
        when = "; ".join(local_time(t, job.schedule.timezone) for t in runs)
        what = (Phrase("send the reminder: {message}", message=job.message) if job.is_reminder
                else Phrase("run: {prompt}", prompt=job.prompt))
        tools = ", ".join(job.tools) if job.tools else Phrase("none")
        lines = [Phrase("Schedule '{name}' {when} in this chat, to {what}", name=job.name,
                        when=job.schedule.describe(), what=what),
                 Phrase("Tools it may use: {tools}", tools=tools)]
        if job.model:
            lines.append(Phrase("Model: {model}", model=job.model))
        lines.append(Phrase("Next runs: {when}", when=when))
        return Phrase("{lines}", lines=Lines(lines))

    async def create(self, request: JobRequest) -> dict[str, Any]:
        try:
            job = await self.jobs.create(await self._draft(request))
        except JobError as exc:
            raise ToolInvalidArgsError(reason_of(exc), HINT) from exc
        return describe(job)

    async def list(self, owner: Sender) -> list[dict[str, Any]]:
        return [describe(job) for job in await self.jobs.for_owner(str(owner))]

    async def describe(self, owner: Sender, job_id: str) -> Phrase:
        job = await self._own_job(owner, job_id)
        return Phrase("Cancel job {id} '{name}' ({when})", id=job.id, name=job.name,
                      when=job.schedule.describe())

    async def cancel(self, owner: Sender, job_id: str) -> dict[str, Any]:
        try:
            job = await self.jobs.cancel((await self._own_job(owner, job_id)).id, str(owner))
        except JobError as exc:
            raise ToolInvalidArgsError(reason_of(exc), HINT) from exc
        return {"cancelled": job.id, "name": job.name}

    async def _draft(self, request: JobRequest) -> Job:
        """The job a create call describes, checked against the caller's own rights."""
        if not request.name or (request.at is None) == (request.cron is None):
            raise ToolInvalidArgsError(Phrase("create needs a `name` and exactly one of `at` or "
                                              "`cron`."),
                                       HINT)
        if not request.message and not request.prompt:
            raise ToolInvalidArgsError(Phrase("create needs a `message` (reminder) or a `prompt`."),
                                       HINT)
        owner = str(request.owner)
        timezone = await self.preferences.timezone_of(owner, self.default_timezone)
        now = self.jobs.clock()
        try:
            when = (parse_at(request.at, now=now, timezone=timezone) if request.at is not None
                    else parse_cron(request.cron or "", timezone=timezone))
        except ScheduleError as exc:
            raise ToolInvalidArgsError(reason_of(exc), HINT) from exc
        allowed = self.catalog(request.owner, request.level) - {SCHEDULE_TOOL}
        refused = [name for name in request.tools if name not in allowed]
        if refused:
            raise ToolPermissionError(
                Phrase("A job can only use tools you may use yourself (not {tools}).",
                       tools=", ".join(refused)),
                f"Choose from: {', '.join(sorted(allowed)) or '(none)'}.")
        self._check_model(request)
        job = Job(id="", owner=owner, channel=request.owner.channel, chat=request.chat,
                  name=request.name, schedule=when, level=request.level, prompt=request.prompt,
                  message=request.message, tools=request.tools, audience=request.audience,
                  model=request.model)
        try:
            self.jobs.check(job, now)
        except JobError as exc:
            raise ToolInvalidArgsError(reason_of(exc), HINT) from exc
        return job

    def _check_model(self, request: JobRequest) -> None:
        """Only a model the operator configured: a job cannot send the owner's data, or spend
        their budget, on a model nobody chose."""
        if not request.model:
            return
        if request.message and not request.prompt:
            raise ToolInvalidArgsError(Phrase("A plain reminder is sent as written: it uses no model."),
                                       "Leave out `model`, or give a `prompt` instead.")
        if request.model not in self.models:
            raise ToolInvalidArgsError(
                Phrase("No model {model} is configured.", model=repr(request.model)),
                f"Choose from: {', '.join(sorted(self.models)) or '(none)'}; or leave out "
                "`model` for the default.")

    async def _own_job(self, owner: Sender, job_id: str) -> Job:
        job = await self.jobs.get(job_id) if job_id else None
        if job is None or job.owner != str(owner) or job.status not in ("active", "paused"):
            raise ToolInvalidArgsError(Phrase("No job {id} of this user.", id=repr(job_id)),
                                       "Call schedule with action=list to see the job ids.")
        return job


def describe(job: Job) -> dict[str, Any]:
    shown: dict[str, Any] = {"id": job.id, "name": job.name, "schedule": job.schedule.describe(),
                             "status": job.status}
    if job.next_run is not None:
        shown["next_run"] = local_time(job.next_run, job.schedule.timezone)
    if job.model:
        shown["model"] = job.model
    if job.last_outcome:
        shown["last_outcome"] = job.last_outcome
    return shown
