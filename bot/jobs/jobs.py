"""Scheduled jobs in the store: created, listed, cancelled, claimed exactly once, finished.

A job belongs to its owner (the sender who created it), posts into one chat, and keeps the
autonomy level and the tool allowlist it was created with. Each due run is claimed by inserting
the row (job id, scheduled time) into `job_runs`, whose uniqueness makes the claim a
compare-and-set: however many processes share the store, exactly one of them runs it. The same
transaction moves the job's `next_run` on, so a crash during the run never runs it again.

    active ──3 failures, or pause──▶ paused ──resume──▶ active
       │──cancel──▶ cancelled
       └──last run of a one-shot job──▶ done
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Literal

from bot.core.errors import MyclawError
from bot.jobs.outcomes import outcome_words
from bot.jobs.schedule import Schedule
from bot.language.phrase import Number, Phrase
from bot.store.audit import AuditEntry, write_audit
from bot.store.protocol import Store, Transaction

Status = Literal["active", "paused", "done", "cancelled"]
MAX_FAILURES = 3
JOB_ID_CHARS = 10
RETRY_FIRST_SECONDS = 5.0     # a run that could not reach its chat is tried again after this,
RETRY_MAX_SECONDS = 60.0      # doubling up to this, until it is past the grace period
REMINDER_LEASE_SECONDS = 120.0   # a reminder only sends: "running" this long, its process died


class JobError(MyclawError):
    """A job could not be created, found or changed; the text says why and what to do."""


class JobNotFound(JobError):
    """No such job (of that owner). The text points at the chat's /jobs; the command line
    points at its own listing instead."""

    def __init__(self, job_id: str):
        self.job_id = str(job_id)[:40]
        super().__init__(Phrase("no job {id} of yours; see /jobs", id=repr(self.job_id)))


@dataclass(frozen=True)
class JobLimits:
    max_per_sender: int = 20
    min_interval_seconds: float = 300.0
    grace_seconds: float = 3600.0        # a run this late (after downtime) still runs once
    run_lease_seconds: float = 3600.0    # a run "running" longer than this was cut off

    @classmethod
    def from_config(cls, table: dict[str, Any]) -> JobLimits:
        return cls(int(table["max_per_sender"]), float(table["min_interval_seconds"]),
                   float(table["grace_seconds"]), float(table["run_lease_seconds"]))


@dataclass(frozen=True)
class Job:
    id: str
    owner: str
    channel: str
    chat: str
    name: str
    schedule: Schedule
    level: str
    prompt: str = ""
    message: str = ""                  # a plain reminder: sent as is, no model call
    tools: tuple[str, ...] = ()
    status: Status = "active"
    next_run: float | None = None
    failures: int = 0
    last_run: float | None = None
    last_outcome: str = ""
    created_at: float = 0.0
    # Who else reads `chat` (a group, bot.access.audience): a run works in the group's folder
    # and memory, as a turn typed there does.
    audience: str = ""
    model: str = ""      # the model its runs ask ("" = `[jobs] model`, else the agent's)

    @property
    def is_reminder(self) -> bool:
        return bool(self.message) and not self.prompt

    @property
    def outcome_words(self) -> str:
        """The last run's outcome for a person (`last_outcome` is its English, as audited)."""
        return outcome_words(self.last_outcome)


@dataclass(frozen=True)
class Claim:
    """One due run of a job that this process won. `missed`: it was more than the grace period
    late (the bot was down), so it is reported to the owner instead of run."""

    job: Job
    run_id: int
    scheduled_for: float
    missed: bool = False
    attempts: int = 0                    # earlier tries that could not reach the chat


@dataclass(frozen=True)
class Interrupted:
    """A run cut off by the death of its process, to be reported to the owner."""

    claim: Claim

    @property
    def job(self) -> Job:
        return self.claim.job


def _of_channels(channels: Iterable[str] | None, prefix: str = "") -> tuple[str, tuple[str, ...]]:
    """The SQL condition limiting jobs to `channels` (none when None)."""
    if channels is None:
        return "", ()
    names = tuple(channels)
    if not names:
        return " AND 1 = 0", ()
    return f" AND {prefix}channel IN ({','.join('?' for _ in names)})", names


def _after_run(job: Job) -> Status:
    """A job's status once a run is finished: a job with no next run is done."""
    return "done" if job.next_run is None and job.status == "active" else job.status


def _from_row(row: Any) -> Job:
    return Job(
        id=row["id"], owner=row["owner"], channel=row["channel"], chat=row["chat"],
        name=row["name"], schedule=Schedule(row["kind"], row["spec"], row["timezone"]),
        level=row["level"], prompt=row["prompt"], message=row["message"],
        tools=tuple(json.loads(row["tools"])), status=row["status"], next_run=row["next_run"],
        failures=row["failures"], last_run=row["last_run"], last_outcome=row["last_outcome"],
        created_at=row["created_at"], audience=row["audience"] or "",
        model=row["model"] or "")


def _figure(value: float) -> Number:
    """A count of minutes as people write it: 5, not 5.0; 2.5 stays."""
    return Number(int(value) if float(value).is_integer() else round(value, 2))


class Jobs:
    def __init__(self, store: Store, limits: JobLimits | None = None,
                 clock: Callable[[], float] = time.time, replica: str = "local"):
        self.store = store
        # This run of the replica: runs its earlier runs left "running" (before this one began)
        # were cut off.
        self.owner = f"{replica}/{secrets.token_hex(6)}"
        self.began = clock()
        self.limits = limits or JobLimits()
        self.clock = clock
        self.changed = asyncio.Event()  # set when a job is created or changed: the scheduler looks again

    # --- creating and changing -----------------------------------------------------------

    def check(self, job: Job, now: float) -> None:
        """Refuse a schedule that runs too often or never runs again."""
        if job.schedule.next_after(now) is None:
            raise JobError(Phrase("that time is already past; pick a time in the future"))
        gap = job.schedule.min_gap(now) if job.schedule.kind == "cron" else None
        if gap is not None and gap < self.limits.min_interval_seconds:
            minutes = self.limits.min_interval_seconds / 60
            raise JobError(Phrase("that schedule runs every {gap} minutes; the minimum interval "
                                  "between runs is {minimum} minutes", gap=_figure(gap / 60),
                                  minimum=_figure(minutes)))

    async def create(self, job: Job) -> Job:
        now = self.clock()
        self.check(job, now)
        job = replace(job, id=secrets.token_hex(JOB_ID_CHARS // 2), status="active",
                      next_run=job.schedule.next_after(now), created_at=now)
        async with self.store.transaction() as tx:
            row = await tx.fetchone("SELECT COUNT(*) AS n FROM jobs WHERE owner = ? AND status"
                                    " IN ('active', 'paused')", (job.owner,))
            count = int(row["n"])
            if count >= self.limits.max_per_sender:
                raise JobError(Phrase("you already have {number} jobs, the most allowed; cancel "
                                      "one first (/jobs)", number=count))
            await tx.execute(
                "INSERT INTO jobs(id, owner, channel, chat, name, prompt, message, kind, spec,"
                " timezone, level, tools, status, next_run, failures, last_outcome, created_at,"
                " audience, model)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'active', ?, 0, '', ?, ?, ?)",
                (job.id, job.owner, job.channel, job.chat, job.name, job.prompt, job.message,
                 job.schedule.kind, job.schedule.spec, job.schedule.timezone, job.level,
                 json.dumps(list(job.tools)), job.next_run, now, job.audience, job.model))
            await self._audit(tx, job, "created", job.schedule.describe())
        self.changed.set()
        return job

    async def get(self, job_id: str) -> Job | None:
        row = await self.store.fetchone("SELECT * FROM jobs WHERE id = ?", (str(job_id)[:40],))
        return _from_row(row) if row else None

    async def for_owner(self, owner: str) -> list[Job]:
        rows = await self.store.fetchall(
            "SELECT * FROM jobs WHERE owner = ? AND status IN ('active', 'paused')"
            " ORDER BY created_at", (owner,))
        return [_from_row(r) for r in rows]

    async def listing(self, include_ended: bool = False) -> list[Job]:
        where = "" if include_ended else " WHERE status IN ('active', 'paused')"
        rows = await self.store.fetchall(f"SELECT * FROM jobs{where} ORDER BY created_at")
        return [_from_row(r) for r in rows]

    async def cancel(self, job_id: str, by: str, *, any_owner: bool = False) -> Job:
        return await self._set_status(job_id, by, "cancelled", ("active", "paused"), any_owner)

    async def pause(self, job_id: str, by: str, *, any_owner: bool = False) -> Job:
        """An active job stops running until resumed (the operator's console offers this)."""
        return await self._set_status(job_id, by, "paused", ("active",), any_owner)

    async def resume(self, job_id: str, by: str, *, any_owner: bool = False) -> Job:
        job = await self._set_status(job_id, by, "active", ("paused",), any_owner)
        return job

    async def _set_status(self, job_id: str, by: str, status: Status, allowed: Iterable[str],
                          any_owner: bool) -> Job:
        job = await self.get(job_id)
        if job is None or (job.owner != by and not any_owner):
            raise JobNotFound(job_id)
        if job.status not in allowed:
            raise JobError(Phrase("job {id} is {status}", id=job.id, status=Phrase(job.status)))
        now = self.clock()
        next_run = job.schedule.next_after(now) if status == "active" else job.next_run
        async with self.store.transaction() as tx:
            marks = ",".join("?" for _ in allowed)
            await tx.execute(f"UPDATE jobs SET status = ?, failures = 0, next_run = ?"
                             f" WHERE id = ? AND status IN ({marks})",
                             (status, next_run, job.id, *allowed))
            await self._audit(tx, job, status, f"by {by}")
        self.changed.set()
        return replace(job, status=status, next_run=next_run, failures=0)

    # --- running ---------------------------------------------------------------------------

    async def due(self, now: float, limit: int = 100,
                  channels: Iterable[str] | None = None) -> list[Job]:
        """Active jobs due at `now` (a deferred run once its retry time came), of `channels`
        only when given: a process claims only runs it can deliver."""
        where, params = _of_channels(channels)
        rows = await self.store.fetchall(
            "SELECT * FROM jobs WHERE status = 'active' AND next_run <= ? AND (retry_at IS NULL"
            f" OR retry_at <= ?){where} ORDER BY next_run LIMIT ?", (now, now, *params, limit))
        return [_from_row(r) for r in rows]

    async def next_due_at(self, channels: Iterable[str] | None = None) -> float | None:
        where, params = _of_channels(channels)
        row = await self.store.fetchone(
            "SELECT MIN(CASE WHEN retry_at > next_run THEN retry_at ELSE next_run END) AS at"
            f" FROM jobs WHERE status = 'active'{where}", params)
        return row["at"] if row and row["at"] is not None else None

    async def claim(self, job: Job, now: float) -> Claim | None:
        """Win the job's due run, or None when another process (or an earlier tick) did.

        The run and the job's next time are written in one transaction (a deferred run is
        claimed again by the same compare-and-set); a run more than the grace period late is
        claimed as missed, to be reported instead of run.
        """
        scheduled = job.next_run
        if scheduled is None:
            return None
        # After downtime several runs may be due: only the latest one counts (run once, or
        # reported as missed when even that one is more than the grace period late).
        latest = job.schedule.latest_until(now) or scheduled
        late = max(0.0, now - max(latest, scheduled))
        status = "missed" if late > self.limits.grace_seconds else "running"
        upcoming = job.schedule.next_after(max(now, scheduled))
        async with self.store.transaction() as tx:
            won = await tx.fetchone(
                "INSERT INTO job_runs(job_id, scheduled_for, status, started_at, detail,"
                " claimed_by) VALUES (?, ?, ?, ?, '', ?) ON CONFLICT (job_id, scheduled_for)"
                " DO UPDATE SET status = excluded.status, started_at = excluded.started_at,"
                " claimed_by = excluded.claimed_by, attempts = job_runs.attempts + 1"
                " WHERE job_runs.status = 'deferred' RETURNING id, attempts",
                (job.id, scheduled, status, now, self.owner))
            if won is None:
                return None
            # A one-time job keeps its status until its run is delivered or reported (`finish`).
            await tx.execute(
                "UPDATE jobs SET next_run = ?, last_run = ?, retry_at = NULL WHERE id = ?"
                " AND next_run = ?", (upcoming, now, job.id, scheduled))
        return Claim(replace(job, next_run=upcoming), int(won["id"]), scheduled,
                     status == "missed", int(won["attempts"]))

    async def defer(self, claim: Claim, why: str, *, at_once: bool = False) -> float:
        """The run could not reach its chat (the channel is not connected here): it is not
        finished but due again after a backoff (`at_once`: none); once it is more than the
        grace period late it is claimed as missed and reported. Returns when it is tried again."""
        backoff = min(RETRY_MAX_SECONDS, RETRY_FIRST_SECONDS * 2 ** claim.attempts)
        retry_at = self.clock() + (0.0 if at_once else backoff)
        async with self.store.transaction() as tx:
            await tx.execute("UPDATE job_runs SET status = 'deferred', detail = ? WHERE id = ?",
                             (why[:500], claim.run_id))
            await tx.execute(
                "UPDATE jobs SET next_run = ?, retry_at = ? WHERE id = ? AND status = 'active'",
                (claim.scheduled_for, retry_at, claim.job.id))
        self.changed.set()
        return retry_at

    async def finish(self, claim: Claim, ok: bool, detail: str = "") -> Job:
        """Record a run's outcome; a third failure in a row pauses the job, the last run of a
        one-time job ends it."""
        job = claim.job
        failures = 0 if ok else job.failures + 1
        pause = failures >= MAX_FAILURES and job.status == "active"
        status: Status = "paused" if pause else _after_run(job)
        outcome = ("ok" if ok else "failed") + (f": {detail}" if detail else "")
        async with self.store.transaction() as tx:
            await tx.execute("UPDATE job_runs SET status = ?, finished_at = ?, detail = ?"
                             " WHERE id = ?", ("ok" if ok else "failed", self.clock(),
                                               detail[:500], claim.run_id))
            await tx.execute(
                "UPDATE jobs SET failures = ?, last_outcome = ?, status = ? WHERE id = ?"
                " AND status = 'active'", (failures, outcome[:200], status, job.id))
            await self._audit(tx, job, "run", outcome[:200])
        return replace(job, failures=failures, last_outcome=outcome, status=status)

    async def record_missed(self, claim: Claim) -> Job:
        """The owner was told the run was missed: it is finished (a one-time job is done)."""
        status = _after_run(claim.job)
        async with self.store.transaction() as tx:
            await tx.execute("UPDATE job_runs SET finished_at = ? WHERE id = ?",
                             (self.clock(), claim.run_id))
            await tx.execute("UPDATE jobs SET status = ? WHERE id = ? AND status = 'active'",
                             (status, claim.job.id))
            await self._audit(tx, claim.job, "missed", f"run due at {claim.scheduled_for:.0f}")
        return replace(claim.job, status=status)

    async def interrupted(self, now: float, channels: Iterable[str] | None = None
                          ) -> list[Interrupted]:
        """Runs whose process died: left "running" by an earlier run of this replica, or for
        longer than the lease by any process (a reminder's lease is short: it only sends).
        A reminder is deferred, to be sent again; any other run is marked cut off (never
        started again) and returned so the owner can be told (then `record_interrupted`). A run
        marked cut off whose owner was not told yet is returned again: by this process on its
        next look (the chat could not be reached), by its replica's next start or by any
        process after a reminder's lease (the process telling it died)."""
        mine = self.owner.rpartition("/")[0] + "/"
        where, params = _of_channels(channels, "j.")
        rows = await self.store.fetchall(
            "SELECT r.id, r.job_id, r.scheduled_for, r.attempts, r.status, r.claimed_by"
            " FROM job_runs r JOIN jobs j ON j.id = r.job_id WHERE ((r.status = 'running' AND"
            " ((substr(r.claimed_by, 1, ?) = ? AND r.claimed_by <> ? AND r.started_at <= ?)"
            " OR r.started_at < ? OR (r.started_at < ? AND j.prompt = '')))"
            " OR (r.status = 'cut_off' AND (r.claimed_by = ? OR substr(r.claimed_by, 1, ?) = ?"
            f" OR r.started_at < ?))){where}",
            (len(mine), mine, self.owner, self.began, now - self.limits.run_lease_seconds,
             now - REMINDER_LEASE_SECONDS, self.owner, len(mine), mine,
             now - REMINDER_LEASE_SECONDS, *params))
        found = []
        for row in rows:
            job = await self.get(row["job_id"])
            if job is None:
                continue
            claim = Claim(job, int(row["id"]), float(row["scheduled_for"]), False,
                          int(row["attempts"]))
            if row["status"] == "running" and job.is_reminder:
                await self.defer(claim, "cut off by a restart; sent again", at_once=True)
            elif await self._to_report(claim, row["status"], row["claimed_by"], now):
                found.append(Interrupted(claim))
        return found

    async def _to_report(self, claim: Claim, status: str, claimed_by: str, now: float) -> bool:
        """Take the cut-off run's report: one process wins it (compare-and-set)."""
        if status == "cut_off" and claimed_by == self.owner:
            return True
        async with self.store.transaction() as tx:
            won = await tx.fetchone(
                "UPDATE job_runs SET status = 'cut_off', claimed_by = ?, started_at = ?,"
                " finished_at = coalesce(finished_at, ?) WHERE id = ? AND status = ?"
                " AND claimed_by = ? RETURNING id",
                (self.owner, now, now, claim.run_id, status, claimed_by))
        return won is not None

    async def record_interrupted(self, claim: Claim) -> None:
        """The owner was told the run was cut off: the run is over, a one-time job is done."""
        async with self.store.transaction() as tx:
            await tx.execute("UPDATE job_runs SET status = 'interrupted' WHERE id = ? AND"
                             " status = 'cut_off'", (claim.run_id,))
            await tx.execute("UPDATE jobs SET status = ? WHERE id = ? AND status = 'active'",
                             (_after_run(claim.job), claim.job.id))
            await self._audit(tx, claim.job, "interrupted",
                              f"run due at {claim.scheduled_for:.0f}")

    @staticmethod
    async def _audit(tx: Transaction, job: Job, outcome: str, detail: str) -> None:
        await write_audit(tx, AuditEntry(sender=job.owner, decision="job", outcome=outcome,
                                         tool="schedule", detail=f"job {job.id}: {detail}"[:500]))
