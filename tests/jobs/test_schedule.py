"""When jobs run: one-shot times, cron expressions, time zones and daylight-saving changes."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from bot.jobs.schedule import Schedule, ScheduleError, local_time, parse_at, parse_cron

ROME = ZoneInfo("Europe/Rome")
NOW = datetime(2026, 12, 1, 10, 0, tzinfo=ROME).timestamp()


def rome(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, ROME)


@pytest.mark.parametrize(("text", "seconds"), [
    ("in 2 minutes", 120), ("in 20 min", 1200), ("in 1 hour", 3600), ("in 3 days", 259200),
    ("IN 90 SECONDS", 90), ("in 1 week", 604800),
])
def test_relative_times_count_from_now(text, seconds):
    schedule = parse_at(text, now=NOW, timezone="Europe/Rome")
    assert schedule.kind == "once" and schedule.next_after(NOW) == pytest.approx(NOW + seconds)


def test_a_date_without_a_zone_is_read_in_the_senders_time_zone():
    schedule = parse_at("2026-12-02 09:00", now=NOW, timezone="Europe/Rome")
    assert rome(schedule.next_after(NOW)) == datetime(2026, 12, 2, 9, 0, tzinfo=ROME)
    new_york = parse_at("2026-12-02 09:00", now=NOW, timezone="America/New_York")
    assert new_york.next_after(NOW) - schedule.next_after(NOW) == 6 * 3600


def test_a_time_of_day_means_its_next_occurrence():
    later_today = parse_at("at 18:30", now=NOW, timezone="Europe/Rome")
    assert rome(later_today.next_after(NOW)) == datetime(2026, 12, 1, 18, 30, tzinfo=ROME)
    tomorrow = parse_at("09:00", now=NOW, timezone="Europe/Rome")
    assert rome(tomorrow.next_after(NOW)) == datetime(2026, 12, 2, 9, 0, tzinfo=ROME)


@pytest.mark.parametrize("text", ["2020-01-01 10:00", "in 0 minutes", "2040-01-01 00:00",
                                  "next tuesday-ish", "25:00", "at 9:75", ""])
def test_times_that_cannot_be_scheduled_say_why(text):
    with pytest.raises(ScheduleError):
        parse_at(text, now=NOW, timezone="Europe/Rome")


def test_a_one_shot_schedule_runs_once():
    schedule = parse_at("in 5 minutes", now=NOW, timezone="UTC")
    first = schedule.next_after(NOW)
    assert schedule.next_after(first) is None and schedule.upcoming(NOW, 3) == [first]


def test_a_weekly_job_stays_at_local_time_across_the_autumn_clock_change():
    monday_8 = parse_cron("0 8 * * 1", timezone="Europe/Rome")
    start = datetime(2026, 10, 20, 12, 0, tzinfo=ROME).timestamp()
    runs = [rome(t) for t in monday_8.upcoming(start, 3)]
    assert [(r.month, r.day, r.hour, r.minute) for r in runs] == [(10, 26, 8, 0), (11, 2, 8, 0),
                                                                  (11, 9, 8, 0)]
    assert runs[0].utcoffset().total_seconds() == 3600          # CET after 25 October
    before = monday_8.next_after(datetime(2026, 10, 18, tzinfo=ROME).timestamp())
    assert rome(before).utcoffset().total_seconds() == 7200     # CEST the Monday before
    assert runs[0].timestamp() - before == 7 * 86400 + 3600     # a week plus the extra hour


def test_a_time_skipped_by_the_spring_clock_change_runs_at_the_first_valid_moment():
    sunday_0230 = parse_cron("30 2 * * 0", timezone="Europe/Rome")
    start = datetime(2026, 3, 23, tzinfo=ROME).timestamp()
    run = rome(sunday_0230.next_after(start))
    assert (run.day, run.hour) == (29, 3)


@pytest.mark.parametrize("expression", ["61 * * * *", "* * *", "0 8 * * 1 2026", "@reboot",
                                        "a b c d e"])
def test_invalid_cron_expressions_are_refused(expression):
    with pytest.raises(ScheduleError):
        parse_cron(expression, timezone="UTC")


def test_unknown_time_zones_are_refused_with_a_hint():
    with pytest.raises(ScheduleError, match="IANA"):
        parse_at("in 5 minutes", now=NOW, timezone="Mars/Olympus")


@pytest.mark.parametrize(("expression", "words"), [
    ("0 8 * * 1", "every Monday at 08:00"), ("30 7 * * *", "every day at 07:30"),
    ("0 9 * * 1-5", "every weekday at 09:00"), ("0 0 1 * *", "on day 1 of every month at 00:00"),
    ("15 * * * *", "every hour at minute 15"), ("*/10 * * * *", "every 10 minutes"),
    ("0 8 * * 0", "every Sunday at 08:00"),
])
def test_schedules_are_described_in_words(expression, words):
    assert Schedule("cron", expression, "Europe/Rome").describe() == f"{words} (Europe/Rome)"


def test_the_shortest_gap_between_runs_is_measured():
    assert parse_cron("*/10 * * * *", timezone="UTC").min_gap(NOW) == 600
    assert parse_cron("0 8 * * 1", timezone="UTC").min_gap(NOW) == 7 * 86400


def test_local_times_name_the_zone():
    assert local_time(datetime(2026, 12, 2, 9, 0, tzinfo=ROME).timestamp(),
                      "Europe/Rome") == "Wed 2026-12-02 09:00 CET"
