"""`myclaw jobs list|cancel` through the real entry point, on a store with jobs in it."""

from __future__ import annotations

from bot.jobs.jobs import Job, Jobs
from bot.jobs.schedule import parse_cron
from tests.ops.test_cli_safety import config_file, myclaw, with_store  # noqa: F401


def add_job(config_file, name: str = "standup"):  # noqa: F811
    async def work(config, store):
        return await Jobs(store).create(Job(
            id="", owner="telegram:7", channel="telegram", chat="7", name=name,
            schedule=parse_cron("0 9 * * 1-5", timezone="Europe/Rome"), level="full",
            message="standup!"))
    return with_store(config_file, work)


def test_jobs_list_shows_owner_schedule_status_and_next_run(config_file, capsys):  # noqa: F811
    job = add_job(config_file)
    assert myclaw(config_file, "jobs", "list") == 0
    out = capsys.readouterr().out
    assert job.id in out and "telegram:7" in out and "every weekday at 09:00" in out
    assert "active" in out and "UTC" in out


def test_jobs_cancel_ends_any_owners_job_and_unknown_ids_fail(config_file, capsys):  # noqa: F811
    job = add_job(config_file)
    assert myclaw(config_file, "jobs", "cancel", job.id) == 0
    assert "Cancelled job" in capsys.readouterr().out
    assert myclaw(config_file, "jobs", "list") == 0
    assert "No scheduled jobs." in capsys.readouterr().out
    assert myclaw(config_file, "jobs", "cancel", "nope") == 1
    refusal = capsys.readouterr().err
    assert "no job 'nope'" in refusal and "myclaw jobs list" in refusal and "/jobs" not in refusal
    assert myclaw(config_file, "jobs", "list", "--all") == 0
    assert "cancelled" in capsys.readouterr().out
