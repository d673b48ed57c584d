"""schedule: reminders and scheduled jobs — create, list, cancel.

A job runs later as its creator, never above the level the creator has when it runs, with only
the tools named at creation (and never this one: a job does not create jobs). A plain reminder
(`message` without `prompt`) is sent as written, without a model call. Creating a recurring
job, or one that runs a prompt, is medium risk, so a supervised sender is asked first; the
approval shows the schedule in words and the next three run times.
"""

from __future__ import annotations

from typing import Any

from bot.core.ports import JobRequest
from bot.core.tool import BaseTool, CallContext, Risk, ToolMeta

NAME = "schedule"


class ScheduleTool(BaseTool):
    meta = ToolMeta(
        name=NAME,
        description=(
            "Reminders and scheduled jobs. action=create with `at` (one time: 'in 20 minutes', "
            "'2026-12-02 09:00', '09:00' in the user's time zone) or `cron` (5 fields, e.g. "
            "'0 8 * * 1' for Mondays at 08:00), a short `name`, and either `message` (a plain "
            "reminder sent as written) or `prompt` (what you should do when it runs, with the "
            "`tools` it may use, and optionally a configured `model` to run it on). action=list "
            "shows the user's jobs; action=cancel takes `job_id`."),
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
                "model": {"type": "string", "minLength": 1, "maxLength": 100},
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
        egress=False,   # by its arguments: see egress_for
    )

    def egress_for(self, args: dict[str, Any]) -> bool:
        """Creating a reminder or a job puts text in the chat later, in the bot's own voice
        (and a job's turn can use its tools then): a way out, like sending it now."""
        return args.get("action") == "create"

    def risk_for(self, args: dict[str, Any]) -> Risk:
        if args.get("action") != "create":
            return "low"
        plain_once = "cron" not in args and "prompt" not in args and not args.get("tools")
        return "low" if plain_once else "medium"

    async def dry_run(self, ctx: CallContext, **args: Any) -> dict[str, Any]:
        if args["action"] == "list":
            return await self.execute(ctx, **args)
        if args["action"] == "cancel":
            return {"summary": await ctx.ports.jobs.describe(ctx.sender, args.get("job_id", ""))}
        return {"summary": await ctx.ports.jobs.preview(_request(ctx, args))}

    async def execute(self, ctx: CallContext, **args: Any) -> dict[str, Any]:
        jobs = ctx.ports.jobs
        if args["action"] == "list":
            return {"jobs": await jobs.list(ctx.sender)}
        if args["action"] == "cancel":
            return await jobs.cancel(ctx.sender, args.get("job_id", ""))
        return {"created": await jobs.create(_request(ctx, args))}


def _request(ctx: CallContext, args: dict[str, Any]) -> JobRequest:
    """A create call as a request of this caller, at the level of this turn (roles applied)."""
    return JobRequest(owner=ctx.sender, level=ctx.level, chat=ctx.chat, name=args.get("name", ""),
                      at=args.get("at"), cron=args.get("cron"), message=args.get("message", ""),
                      prompt=args.get("prompt", ""), tools=tuple(args.get("tools") or ()),
                      audience=ctx.audience, model=args.get("model", ""))


def build() -> ScheduleTool:
    return ScheduleTool()
