"""When a job runs: one-shot times and 5-field cron expressions, in the creator's time zone.

A `Schedule` is a value: its kind ("once" or "cron"), its spec (a UTC timestamp for "once", the
cron expression for "cron") and the IANA time zone it is read in. croniter does the calendar
arithmetic on zone-aware datetimes, so a weekly 08:00 job stays at 08:00 local time across a
daylight-saving change, and a time that does not exist that night (02:30 when clocks jump to
03:00) runs at the first valid moment after it. croniter (and the dateutil it brings) is imported
by the first cron schedule, not by a process that has none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from bot.core.errors import MyclawError
from bot.language.catalogs import N_
from bot.language.phrase import Phrase, plural_phrase

Kind = Literal["once", "cron"]
_RELATIVE = re.compile(r"^in\s+(\d{1,6})\s*(seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h|days?|d|"
                       r"weeks?|w)$", re.IGNORECASE)
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_CLOCK = re.compile(r"^(?:at\s+)?(\d{1,2}):(\d{2})$", re.IGNORECASE)
_CRON_FIELDS = 5
MAX_SPEC_CHARS = 100
WEEKDAYS = (N_("every Monday at {time}"), N_("every Tuesday at {time}"),
            N_("every Wednesday at {time}"), N_("every Thursday at {time}"),
            N_("every Friday at {time}"), N_("every Saturday at {time}"),
            N_("every Sunday at {time}"))


class ScheduleError(MyclawError):
    """A time, cron expression or time zone that cannot be scheduled; the text says why."""


def zone(name: str) -> ZoneInfo:
    """The IANA zone `name` ("Europe/Rome"), or ScheduleError naming the problem."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ScheduleError(Phrase("unknown time zone {zone}; use an IANA name like Europe/Rome "
                                   "or America/New_York", zone=repr(name))) from exc


@dataclass(frozen=True)
class Schedule:
    kind: Kind
    spec: str
    timezone: str = "UTC"

    def next_after(self, moment: float) -> float | None:
        """The first run strictly after `moment` (UNIX seconds), or None when there is none."""
        if self.kind == "once":
            at = float(self.spec)
            return at if at > moment else None
        from croniter import croniter

        start = datetime.fromtimestamp(moment, zone(self.timezone))
        return croniter(self.spec, start).get_next(datetime).timestamp()

    def latest_until(self, moment: float) -> float | None:
        """The last run at or before `moment`, or None when none is due yet."""
        if self.kind == "once":
            at = float(self.spec)
            return at if at <= moment else None
        from croniter import croniter

        end = datetime.fromtimestamp(moment, zone(self.timezone))
        previous = croniter(self.spec, end).get_prev(datetime).timestamp()
        return moment if self.next_after(previous) == moment else previous

    def upcoming(self, after: float, count: int = 3) -> list[float]:
        runs: list[float] = []
        moment: float | None = after
        while len(runs) < count:
            moment = self.next_after(moment)  # type: ignore[arg-type]
            if moment is None:
                break
            runs.append(moment)
        return runs

    def describe(self) -> Phrase:
        """The schedule in words, e.g. "every Monday at 08:00 (Europe/Rome)" (a Phrase: in
        the reader's language when shown)."""
        if self.kind == "once":
            return Phrase("once, {when}", when=local_time(float(self.spec), self.timezone))
        return Phrase("{schedule} ({zone})", schedule=_cron_words(self.spec), zone=self.timezone)

    def min_gap(self, after: float, samples: int = 12) -> float | None:
        """The shortest time between two consecutive runs among the next `samples` runs."""
        runs = self.upcoming(after, samples)
        gaps = [b - a for a, b in pairwise(runs)]
        return min(gaps) if gaps else None


def local_time(ts: float, timezone: str) -> str:
    moment = datetime.fromtimestamp(ts, zone(timezone))
    return moment.strftime("%a %Y-%m-%d %H:%M ") + (moment.tzname() or timezone)


def parse_at(text: str, *, now: float, timezone: str) -> Schedule:
    """A one-shot time: "in 20 minutes", "2026-12-02 09:00" (local), "09:00" (next one)."""
    text = " ".join(str(text).split())[:MAX_SPEC_CHARS]
    tz = zone(timezone)
    relative = _RELATIVE.match(text)
    if relative:
        amount, unit = int(relative.group(1)), relative.group(2)[0].lower()
        return _once(now + amount * _UNIT[unit], now, timezone)
    clock = _CLOCK.match(text)
    if clock:
        hour, minute = int(clock.group(1)), int(clock.group(2))
        if hour > 23 or minute > 59:
            raise ScheduleError(Phrase("{time} is not a time of day", time=repr(text)))
        today = datetime.fromtimestamp(now, tz).replace(hour=hour, minute=minute, second=0,
                                                         microsecond=0)
        moment = today if today.timestamp() > now else today + timedelta(days=1)
        return _once(moment.timestamp(), now, timezone)
    candidate = text[3:] if text.lower().startswith("at ") else text
    try:
        moment = datetime.fromisoformat(candidate)
    except ValueError as exc:
        raise ScheduleError(Phrase("{time} is not a time I understand; use 'in 20 minutes', "
                                   "'2026-12-02 09:00' or '09:00'", time=repr(text))) from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=tz)
    return _once(moment.timestamp(), now, timezone)


def parse_cron(expression: str, *, timezone: str) -> Schedule:
    expression = " ".join(str(expression).split())[:MAX_SPEC_CHARS]
    zone(timezone)
    if len(expression.split()) != _CRON_FIELDS:
        raise ScheduleError(Phrase("{expression} is not a 5-field cron expression (minute hour "
                                   "day-of-month month day-of-week, e.g. '0 8 * * 1')",
                                   expression=repr(expression)))
    from croniter import CroniterBadCronError, croniter

    try:
        if not croniter.is_valid(expression):
            raise ScheduleError(Phrase("{expression} is not a valid cron expression",
                                       expression=repr(expression)))
        croniter(expression)
    except (CroniterBadCronError, ValueError, KeyError) as exc:
        raise ScheduleError(Phrase("{expression} is not a valid cron expression: {problem}",
                                   expression=repr(expression), problem=str(exc))) from exc
    return Schedule("cron", expression, timezone)


def _once(at: float, now: float, timezone: str) -> Schedule:
    if at <= now:
        raise ScheduleError(Phrase("{time} is in the past", time=local_time(at, timezone)))
    if at - now > 5 * 365 * 86400:
        raise ScheduleError(Phrase("that is more than five years away"))
    return Schedule("once", repr(round(at, 3)), timezone)


def _cron_words(expression: str) -> Phrase:
    """Plain words for the common shapes; the expression itself for anything else."""
    minute, hour, dom, month, dow = expression.split()
    if minute.isdigit() and hour.isdigit():
        at = f"{int(hour):02d}:{int(minute):02d}"
        if dom == "*" and month == "*" and dow == "*":
            return Phrase("every day at {time}", time=at)
        if dom == "*" and month == "*" and dow.isdigit() and int(dow) <= 7:
            return Phrase(WEEKDAYS[(int(dow) - 1) % 7], time=at)
        if dom == "*" and month == "*" and dow in ("1-5", "mon-fri"):
            return Phrase("every weekday at {time}", time=at)
        if dom.isdigit() and month == "*" and dow == "*":
            return Phrase("on day {day} of every month at {time}", day=int(dom), time=at)
    if minute.isdigit() and hour == "*" and dom == month == dow == "*":
        return Phrase("every hour at minute {minute}", minute=int(minute))
    if minute.startswith("*/") and hour == dom == month == dow == "*" and minute[2:].isdigit():
        return plural_phrase("every {n} minute", "every {n} minutes", int(minute[2:]))
    return Phrase("on the cron schedule '{expression}'", expression=expression)


def utc_text(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC")
