"""time_now: the current date and time, optionally in an IANA timezone."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from bot.core.tool import BaseTool, CallContext, ToolInvalidArgsError, ToolMeta
from bot.language.phrase import Phrase


class TimeNow(BaseTool):
    meta = ToolMeta(
        name="time_now",
        description="Current date and time. Optional `timezone` is an IANA name such as "
                    "'Europe/Rome'; UTC when omitted.",
        schema={
            "type": "object",
            "properties": {"timezone": {"type": "string", "minLength": 1, "maxLength": 64,
                                        "description": "IANA timezone name"}},
            "additionalProperties": False,
        },
        has_side_effects=False,
        risk="low",
        returns_untrusted=False,
        idempotent=False,
        supports_dry_run=True,
        capability_required="clock:read",
        egress=False,   # local: the clock
    )

    async def execute(self, ctx: CallContext, timezone: str = "UTC", **_: Any) -> dict[str, Any]:
        try:
            zone = UTC if timezone.upper() == "UTC" else ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            close = _close_matches(timezone)
            raise ToolInvalidArgsError(
                Phrase("Unknown timezone {timezone}.", timezone=repr(timezone)),
                "Use an IANA timezone name like 'Europe/Rome' or 'America/New_York'"
                + (f"; close matches: {', '.join(close)}" if close else "") + ".",
            ) from exc
        now = datetime.now(zone)
        return {"now": now.isoformat(timespec="seconds"), "timezone": str(zone),
                "weekday": now.strftime("%A"), "unix": int(now.timestamp())}


def _close_matches(timezone: str) -> list[str]:
    """Up to five known zones containing the city part of what was asked ("Rom" → Europe/Rome)."""
    city = timezone.strip().lower().replace(" ", "_").split("/")[-1]
    if len(city) < 3:
        return []
    return sorted(z for z in available_timezones() if city in z.lower())[:5]


def build() -> TimeNow:
    return TimeNow()
