"""schedule: reminders and scheduled jobs — create, list, cancel.

A job runs later as its creator, never above the level the creator has when it runs, with only
the tools named at creation (and never this one: a job does not create jobs). A plain reminder
(`message` without `prompt`) is sent as written, without a model call. Creating a recurring
job, or one that runs a prompt, is medium risk, so a supervised sender is asked first; the
approval shows the schedule in words and the next three run times.
"""

from __future__ import annotations

from typing import Any

from bot.core.identity import LEVELS
from bot.core.tool import BaseTool, CallContext, Risk, ToolInvalidArgsError, ToolMeta, ToolPermissionError
from bot.jobs.jobs import Job, JobError
from bot.jobs.schedule import ScheduleError, local_time, parse_at, parse_cron

NAME = "schedule"
HINT = ("Use `at` for one time ('in 20 minutes', '2026-12-02 09:00', '09:00', local time) or "
        "`cron` for a repeating schedule ('0 8 * * 1' = Mondays 08:00), and `message` for a "
        "plain reminder or `prompt` for work the agent should do then.")


class ScheduleTool(BaseTool):
    meta = ToolMeta(
        name=NAME,
        description=(
            "Reminders and scheduled jobs. action=create with `at` (one time: 'in 20 minutes', "
            "'2026-12-02 09:00', '09:00' in the user's time zone) or `cron` (5 fields, e.g. "
            "'0 8 * * 1' for Mondays at 08:00), a short `name`, and either `message` (a plain "
            "reminder sent as written) or `prompt` (what you should do when it runs, with the "
            "`tools` it may use). action=list shows the user's jobs; action=cancel takes `job_id`."),
        schema={
            "type": "object",
            "properties": {
                "action": {"enum": ["create", "list", "cancel"]},
                "name": {"type": "string", "minLength": 1, "maxLength": 80},
                "at": {"type": "string", "minLength": 1, "maxLength": 100},
                "cron": {"type": "string", "minLength": 1, "maxLength": 100},
                "message": {"type": "string", "minLength": 1, "maxLength": 2000},
                "prompt": {"type": "string", "minLength": 1, "maxLength": 4000},
                "tools": {"type": "array", "items": {"type": "string", "maxLength": 80},
                          "maxItems": 20, "uniqueItems": True},
                "job_id": {"type": "string", "minLength": 1, "maxLength": 40},
            },
            "required": ["action"],
            "additionalProperties": False,
        },
        has_side_effects=True,
        risk="low",
        returns_untrusted=False,
        idempotent=False,
        supports_dry_run=True,
        capability_required="jobs:write",
    )

    def risk_for(self, args: dict[str, Any]) -> Risk:
        if args.get("action") != "create":
            return "low"
        plain_once = "cron" not in args and "prompt" not in args and not args.get("tools")
        return "low" if plain_once else "medium"

    async def dry_run(self, ctx: CallContext, **args: Any) -> dict[str, Any]:
        if args["action"] == "list":
            return await self.execute(ctx, **args)
        if args["action"] == "cancel":
            job = await _own_job(ctx, args)
            return {"summary": f"Cancel job {job.id} '{job.name}' ({job.schedule.describe()})"}
        job = await _draft(ctx, args)
        runs = job.schedule.upcoming(ctx.services.jobs.clock(), 3)
        when = "; ".join(local_time(t, job.schedule.timezone) for t in runs)
        what = f"send the reminder: {job.message}" if job.is_reminder else f"run: {job.prompt}"
        tools = ", ".join(job.tools) or "none"
        return {"summary": f"Schedule '{job.name}' {job.schedule.describe()} in this chat, "
                           f"to {what}\nTools it may use: {tools}\nNext runs: {when}"}

    async def execute(self, ctx: CallContext, **args: Any) -> dict[str, Any]:
        jobs = ctx.services.jobs
        if args["action"] == "list":
            return {"jobs": [_describe(job) for job in await jobs.for_owner(ctx.sender)]}
        try:
            if args["action"] == "cancel":
                job = await jobs.cancel((await _own_job(ctx, args)).id, ctx.sender)
                return {"cancelled": job.id, "name": job.name}
            job = await jobs.create(await _draft(ctx, args))
        except JobError as exc:
            raise ToolInvalidArgsError(str(exc)) from exc
        return {"created": _describe(job)}


async def _draft(ctx: CallContext, args: dict[str, Any]) -> Job:
    """The job a create call describes, checked against the caller's own rights."""
    services = ctx.services
    if not args.get("name") or ("at" in args) == ("cron" in args):
        raise ToolInvalidArgsError("create needs a `name` and exactly one of `at` or `cron`.", HINT)
    if not args.get("message") and not args.get("prompt"):
        raise ToolInvalidArgsError("create needs a `message` (reminder) or a `prompt`.", HINT)
    level = await services.senders.autonomy(ctx.sender)
    if level not in LEVELS:
        raise ToolPermissionError("Only senders with an autonomy level can schedule jobs.")
    timezone = await services.jobs.timezone_of(ctx.sender, services.config["agent"]["timezone"])
    now = services.jobs.clock()
    try:
        when = (parse_at(args["at"], now=now, timezone=timezone) if "at" in args
                else parse_cron(args["cron"], timezone=timezone))
    except ScheduleError as exc:
        raise ToolInvalidArgsError(str(exc), HINT) from exc
    tools = tuple(args.get("tools") or ())
    allowed = {t.meta.name for t in services.registry.list_for_sender(ctx.sender, level)} - {NAME}
    refused = [name for name in tools if name not in allowed]
    if refused:
        raise ToolPermissionError(
            f"A job can only use tools you may use yourself (not {', '.join(refused)}).",
            f"Choose from: {', '.join(sorted(allowed)) or '(none)'}.")
    job = Job(id="", owner=ctx.sender, channel=ctx.channel, chat=ctx.chat, name=args["name"],
              schedule=when, level=level, prompt=args.get("prompt", ""),
              message=args.get("message", ""), tools=tools)
    try:
        services.jobs.check(job, now)
    except JobError as exc:
        raise ToolInvalidArgsError(str(exc), HINT) from exc
    return job


async def _own_job(ctx: CallContext, args: dict[str, Any]) -> Job:
    job_id = args.get("job_id")
    job = await ctx.services.jobs.get(job_id) if job_id else None
    if job is None or job.owner != ctx.sender or job.status not in ("active", "paused"):
        raise ToolInvalidArgsError(f"No job {job_id!r} of this user.",
                                   "Call schedule with action=list to see the job ids.")
    return job


def _describe(job: Job) -> dict[str, Any]:
    shown: dict[str, Any] = {"id": job.id, "name": job.name, "schedule": job.schedule.describe(),
                             "status": job.status}
    if job.next_run is not None:
        shown["next_run"] = local_time(job.next_run, job.schedule.timezone)
    if job.last_outcome:
        shown["last_outcome"] = job.last_outcome
    return shown


def build() -> ScheduleTool:
    return ScheduleTool()
