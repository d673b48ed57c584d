"""time_now: the current time, in UTC or an IANA timezone."""

from __future__ import annotations

import time
from datetime import datetime

import pytest

from bot.core.tool import ToolInvalidArgsError
from tests.support.conformance import _without_volatile
from tools import time_now


async def test_time_now_defaults_to_utc_and_agrees_with_the_system_clock(ctx):
    before = int(time.time())
    result = await time_now.build().execute(ctx)
    after = int(time.time())
    assert result["timezone"] == "UTC"
    assert before <= result["unix"] <= after
    assert datetime.fromisoformat(result["now"]).utcoffset().total_seconds() == 0


async def test_time_now_reports_the_local_time_of_an_iana_zone(ctx):
    result = await time_now.build().execute(ctx, timezone="Asia/Kolkata")
    now = datetime.fromisoformat(result["now"])
    assert result["timezone"] == "Asia/Kolkata"
    assert now.utcoffset().total_seconds() == 5.5 * 3600  # India has no daylight saving
    assert result["weekday"] == now.strftime("%A")


async def test_an_unknown_timezone_is_invalid_and_the_hint_offers_close_matches(ctx):
    with pytest.raises(ToolInvalidArgsError, match="Unknown timezone") as caught:
        await time_now.build().execute(ctx, timezone="Europe/Rom")
    assert "Europe/Rome" in caught.value.llm_hint


@pytest.mark.parametrize("zone", ["../../etc/passwd", "/etc/localtime", "Europe/Rome\x00", "x"])
async def test_path_like_or_garbage_timezones_are_refused_as_invalid(ctx, zone):
    with pytest.raises(ToolInvalidArgsError) as caught:
        await time_now.build().execute(ctx, timezone=zone)
    assert "IANA" in caught.value.llm_hint


async def test_time_now_dry_run_is_execute(ctx):
    tool = time_now.build()
    dry = await tool.dry_run(ctx, timezone="Europe/Rome")
    real = await tool.execute(ctx, timezone="Europe/Rome")
    assert _without_volatile(dry) == _without_volatile(real)
    assert dry["timezone"] == "Europe/Rome"
