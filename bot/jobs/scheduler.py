"""The scheduler: wakes when the next job is due, claims due runs, starts them.

`tick()` does one round and is what tests drive with an injected clock; `run()` repeats it
until stopped, sleeping until the next due run (at most `tick_seconds`, so jobs created by
another process are seen). Every run is claimed in the store first (`Jobs.claim`), so two
processes on one store, or a tick racing a restart, start each due run once.

Due work waits for its channel: the app starts the scheduler once its channels are up, a
process claims only runs of channels connected in it (`channels`), and a run that still finds
its channel gone (`NotDelivered`) is deferred, not finished: tried again with backoff until it
is past the grace period, then reported as missed as soon as the owner can be reached.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from bot.core.events import Button
from bot.jobs.jobs import Claim, Job, Jobs
from bot.language.phrase import Moment, Phrase

log = logging.getLogger(__name__)


class NotDelivered(Exception):
    """The run's chat cannot be reached from this process now (its channel is not connected);
    nothing was said there, so the run is deferred, not finished."""


class JobRunner(Protocol):
    async def run(self, claim: Claim) -> tuple[bool, str]:
        """Run one claimed job; (succeeded, a short outcome for the job's record). Raises
        NotDelivered when the job's chat cannot be reached."""

    async def tell_owner(self, job: Job, text: str, buttons: tuple[Button, ...] = ()) -> None:
        """Raises NotDelivered when the owner's chat cannot be reached."""


def _missed_text(job: Job) -> Phrase:
    if job.next_run is None:
        return Phrase("⏰ {job}: a run was missed while I was offline and was skipped.",
                      job=job.name)
    return Phrase("⏰ {job}: a run was missed while I was offline and was skipped. Next run: "
                  "{when}.", job=job.name,
                  when=Moment(job.next_run, job.schedule.timezone, now=time.time()))


def _cut_off_text(job: Job) -> Phrase:
    if job.next_run is not None:
        return Phrase("⏰ {job}: the last run was cut off by a restart and was not repeated. It "
                      "runs again at the next scheduled time.", job=job.name)
    return Phrase("⏰ {job}: the run was cut off by a restart and was not repeated.",
                  job=job.name)


class Scheduler:
    def __init__(self, jobs: Jobs, runner: JobRunner, clock: Callable[[], float] = time.time,
                 *, tick_seconds: float = 30.0, batch: int = 100,
                 channels: Callable[[], Iterable[str]] | None = None):
        self.jobs = jobs
        # The channels connected in this process (None: any): only their runs are claimed here.
        self.channels = channels
        self.runner = runner
        self.clock = clock
        self.tick_seconds = tick_seconds
        self.batch = batch
        self._running: set[asyncio.Task[None]] = set()
        self._stop = asyncio.Event()
        self._loop: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._stop.clear()
        self._loop = asyncio.create_task(self.run(self._stop))

    async def stop(self) -> None:
        """Stop looking for due jobs; runs in flight finish with the agent's own shutdown."""
        self._stop.set()
        if self._loop is not None:
            await self._loop
            self._loop = None

    async def tick(self) -> int:
        """Claim and start every due run; report missed and interrupted ones. Returns the
        number of runs started."""
        now = self.clock()
        channels = None if self.channels is None else list(self.channels())
        for cut in await self.jobs.interrupted(now, channels):
            if await self._tell(cut.job, _cut_off_text(cut.claim.job)):
                await self.jobs.record_interrupted(cut.claim)
        started = 0
        for job in await self.jobs.due(now, self.batch, channels):
            claim = await self.jobs.claim(job, now)
            if claim is None:
                continue  # another process (or an earlier tick) has it
            if claim.missed:
                await self._report_missed(claim)
                continue
            task = asyncio.create_task(self._run(claim))
            self._running.add(task)
            task.add_done_callback(self._running.discard)
            started += 1
        return started

    async def _report_missed(self, claim: Claim) -> None:
        if await self._tell(claim.job, _missed_text(claim.job)):
            await self.jobs.record_missed(claim)
        else:
            await self.jobs.defer(claim, "missed; the owner could not be told yet")

    async def _run(self, claim: Claim) -> None:
        try:
            ok, detail = await self.runner.run(claim)
        except NotDelivered as exc:
            retry_at = await self.jobs.defer(claim, str(exc))
            log.info("job %s deferred until %.0f: %s", claim.job.id, retry_at, exc)
            return
        except Exception as exc:  # a run must never take the scheduler down; record and go on
            log.exception("job %s failed", claim.job.id)
            ok, detail = False, type(exc).__name__
        job = await self.jobs.finish(claim, ok, detail)
        if job.status == "paused":
            await self._tell(job, Phrase("⏰ {job} failed three times in a row and is paused. "
                                         "Resume it with /jobs resume {id}.", job=job.name,
                                         id=job.id),
                             (Button(Phrase("Resume: {name}", name=job.name[:24]),
                                     f"/jobs resume {job.id}"),))

    async def _tell(self, job: Job, text: str, buttons: tuple[Button, ...] = ()) -> bool:
        """Tell the job's owner; False when the owner's chat cannot be reached now."""
        try:
            await self.runner.tell_owner(job, text, buttons)
        except NotDelivered:
            return False
        except Exception:  # the owner's chat may be gone; the store still has the record
            log.warning("could not tell %s about job %s", job.owner, job.id, exc_info=True)
        return True

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.tick()
            except Exception:
                log.exception("scheduler tick failed; retrying")
            delay = self.tick_seconds
            upcoming = await self.jobs.next_due_at(
                None if self.channels is None else list(self.channels()))
            if upcoming is not None:
                delay = max(0.05, min(delay, upcoming - self.clock()))
            self.jobs.changed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await _first(stop, self.jobs.changed)

    async def drain(self) -> None:
        """Wait for the runs in flight (tests, shutdown)."""
        while self._running:
            await asyncio.gather(*list(self._running), return_exceptions=True)


async def _first(*events: asyncio.Event) -> None:
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
