"""`myclaw jobs`: the operator's view of scheduled jobs.

    myclaw jobs list [--all]     active and paused jobs (--all: ended ones too), with the last
                                 and next run and the last outcome
    myclaw jobs cancel ID        cancel any owner's job
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bot.config.settings import Config
from bot.core.identity import OPERATOR as TERMINAL
from bot.jobs.jobs import JobError, JobNotFound, Jobs
from bot.jobs.schedule import utc_text
from bot.ops.cli.safety import clean, table
from bot.store.factory import make_store

OPERATOR = str(TERMINAL)


def add_commands(subparsers: Any) -> None:
    jobs = subparsers.add_parser("jobs", help="scheduled jobs and reminders")
    actions = jobs.add_subparsers(dest="jobs_action", metavar="ACTION")
    actions.required = True
    listing = actions.add_parser("list", help="jobs with their last and next run")
    listing.add_argument("--all", action="store_true", help="include cancelled and finished jobs")
    listing.set_defaults(handler=jobs_list)
    cancel = actions.add_parser("cancel", help="cancel a job (any owner's)")
    cancel.add_argument("job_id")
    cancel.set_defaults(handler=jobs_cancel)


async def jobs_list(args: argparse.Namespace, config: Config) -> int:
    async with make_store(config) as store:
        listing = await Jobs(store).listing(include_ended=args.all)
    if not listing:
        print("No scheduled jobs.")
        return 0
    rows = [(job.id, clean(job.owner), clean(job.name, 24), clean(job.schedule.describe(), 40),
             job.status, utc_text(job.last_run) if job.last_run else "-",
             utc_text(job.next_run) if job.next_run and job.status == "active" else "-",
             clean(job.last_outcome or "-", 64)) for job in listing]
    print(table(("ID", "OWNER", "NAME", "SCHEDULE", "STATUS", "LAST RUN", "NEXT RUN", "LAST OUTCOME"),
                rows))
    return 0


async def jobs_cancel(args: argparse.Namespace, config: Config) -> int:
    async with make_store(config) as store:
        try:
            job = await Jobs(store).cancel(args.job_id, OPERATOR, any_owner=True)
        except JobNotFound as exc:
            print(f"myclaw: no job {exc.job_id!r}; `myclaw jobs list --all` shows every job",
                  file=sys.stderr)
            return 1
        except JobError as exc:
            print(f"myclaw: {exc}", file=sys.stderr)
            return 1
    print(f"Cancelled job {job.id} ({clean(job.name)}) of {clean(job.owner)}.")
    return 0
