"""Running a claimed job: a reminder is posted as written; any other job is a turn in the job's
own session, as its owner, at no more than the owner's level now or when the job was created,
with only the tools chosen then, and against the owner's spend budget (a run over it is skipped
and the owner told). Its approvals go to the owner in the job's chat.
"""

from __future__ import annotations

from typing import Any

from bot.conversation.delivery import Delivery, undelivered
from bot.core.events import Button, Done, ErrorEvent, Event, Notice, Sink
from bot.core.identity import LEVELS, Level
from bot.jobs.jobs import Claim, Job
from bot.jobs.outcomes import (
    ANSWERED,
    NO_ACCESS,
    OVER_BUDGET,
    REMINDER_SENT,
    UNREACHABLE,
    WAITING,
)
from bot.jobs.scheduler import NotDelivered
from bot.language.phrase import Phrase

SCHEDULE_TOOL = "schedule"  # a job never creates jobs


class _Watched:
    """Forwards a run's events to the chat and remembers how the turn ended."""

    def __init__(self, sink: Sink):
        self.sink = sink
        self.error = ""
        self.waiting = False

    async def emit(self, event: Event) -> None:
        if isinstance(event, ErrorEvent):
            self.error = event.message
        elif isinstance(event, Done) and event.waiting_for_approval:
            self.waiting = True
        await self.sink.emit(event)


class AgentJobRunner:
    def __init__(self, agent: Any, delivery: Delivery, senders: Any):
        self.agent = agent
        self.delivery = delivery
        self.senders = senders

    async def level(self, job: Job) -> Level | None:
        """The lower of the owner's level now and the level the job was created with; None
        when the owner has no level any more (revoked, or a stranger again)."""
        now = await self.senders.level_of(job.owner, recorded=job.level)
        if now not in LEVELS or job.level not in LEVELS:
            return None
        return min(Level(now), Level(job.level))

    async def run(self, claim: Claim) -> tuple[bool, str]:
        job = claim.job
        sink = self._sink(job)
        if sink is None:
            return False, UNREACHABLE.format(chat=job.chat, channel=job.channel)
        try:
            outcome = await self._run_in(job, sink)
        finally:
            await _close(sink)
        missed = undelivered(sink)   # e.g. outside WhatsApp's window with no template
        return (False, missed) if missed else outcome

    async def _run_in(self, job: Job, sink: Sink) -> tuple[bool, str]:
        level = await self.level(job)
        if level is None:
            await sink.emit(Notice(Phrase("⏰ {job}: skipped — you no longer have access.",
                                          job=job.name)))
            return False, NO_ACCESS
        if job.is_reminder:
            await sink.emit(Notice(f"⏰ {job.name}\n{job.message}"))
            return True, REMINDER_SENT
        refusal = await self._over_budget(job, level)
        if refusal:
            await sink.emit(Notice(Phrase("⏰ {job}: skipped — {why}", job=job.name, why=refusal)))
            return False, OVER_BUDGET
        await sink.emit(Notice(f"⏰ {job.name}"))
        watched = _Watched(sink)
        await self.agent.run_unattended(
            session_key=f"job:{job.id}", sender=job.owner, chat=job.chat,
            channel=job.channel, level=level, allowlist=frozenset(job.tools) - {SCHEDULE_TOOL},
            text=job.prompt, sink=watched, in_group=bool(job.audience), model=job.model)
        if watched.error:
            return False, watched.error
        return True, WAITING if watched.waiting else ANSWERED

    async def _over_budget(self, job: Job, level: str) -> str:
        """Jobs count against their owner's budget: why this run may not start, or ''."""
        budgets = getattr(self.agent.services, "budgets", None)
        if budgets is None:
            return ""
        admission = await budgets.check_owner(job.owner, level)
        return "" if admission.allowed else admission.message

    async def tell_owner(self, job: Job, text: str, buttons: tuple[Button, ...] = ()) -> None:
        sink = self._sink(job)
        if sink is None:
            return
        try:
            await sink.emit(Notice(text, buttons=buttons))
        finally:
            await _close(sink)

    def channels(self) -> list[str]:
        """The channels connected in this process: the scheduler claims only their runs."""
        return self.delivery.channels

    def _sink(self, job: Job) -> Sink | None:
        """The job's chat; None when the channel cannot reach it (an unknown chat). Raises
        NotDelivered while the channel is not connected in this process."""
        if job.channel not in self.delivery.channels:
            raise NotDelivered(f"the {job.channel} channel is not connected")
        return self.delivery.sink(job.channel, job.chat, job.owner)


async def _close(sink: Sink) -> None:
    close = getattr(sink, "close", None)  # channel sinks hold timers (typing); a test sink has none
    if close is not None:
        await close()
