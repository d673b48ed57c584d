"""What a console page is made of, and the helpers every page shares.

A page is a `Page` value: its path, its menu title, its template and an async `load` that returns
the template's variables. Its state-changing `Action`s are POST routes that return an `Outcome`
(shown once on the page after the redirect). The server (server.py) adds the session check,
the CSRF check, the audit row and the security headers around every one of them, so a page
module contains only what is particular to it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

if TYPE_CHECKING:
    from bot.config.settings import Config
    from bot.ops.console.auth import ConsoleAuth
    from bot.runtime.services import Services


@dataclass(frozen=True)
class ConsoleContext:
    """The long-lived parts a page may use."""

    config: Config
    services: Services
    agent: Any                   # bot.runtime.agent.Agent (resolve_elsewhere)
    channels: dict[str, Any]     # shared with the app: channels started later appear here
    auth: ConsoleAuth


@dataclass(frozen=True)
class Outcome:
    """What an action did, in one line, plus optional detail lines (e.g. receipt problems)."""

    ok: bool
    message: str
    lines: tuple[str, ...] = ()


# (context, the route's parameters, the submitted form) -> outcome
ActionRun = Callable[[ConsoleContext, Mapping[str, str], Mapping[str, str]], Awaitable[Outcome]]
# (context, the query string) -> template variables
PageLoad = Callable[[ConsoleContext, Mapping[str, str]], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Action:
    route: str                   # aiohttp route, e.g. "/approvals/{id}"
    name: str                    # recorded in the audit log as "console:<name>"
    run: ActionRun


@dataclass(frozen=True)
class Page:
    path: str
    title: str
    template: str
    load: PageLoad
    actions: tuple[Action, ...] = ()


def utc_text(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def operator_zone(ctx: ConsoleContext) -> str:
    """The operator's time zone, which the console shows times and days in: the terminal's
    `/timezone` (the console's operator is the terminal's), else `[agent] timezone`."""
    from bot.core.identity import OPERATOR

    return ctx.services.languages.translator(str(OPERATOR)).zone


def _zone(name: str) -> tzinfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return UTC


def day_start(text: str, zone: str = "UTC") -> float | None:
    """'2026-03-01' -> the timestamp of that day's start in `zone`; None when not a date."""
    try:
        day = date.fromisoformat(text.strip())
    except ValueError:
        return None
    return datetime(day.year, day.month, day.day, tzinfo=_zone(zone)).timestamp()


def day_of(ts: float, zone: str = "UTC") -> str:
    return datetime.fromtimestamp(ts, _zone(zone)).strftime("%Y-%m-%d")


def last_days(now: float, count: int, zone: str = "UTC") -> list[str]:
    """The `count` days in `zone` ending today, oldest first, as 'YYYY-MM-DD'."""
    today = datetime.fromtimestamp(now, _zone(zone)).date()
    return [(today - timedelta(days=n)).isoformat() for n in range(count - 1, -1, -1)]
