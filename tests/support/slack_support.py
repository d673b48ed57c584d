"""What the Slack tests share: a fake Slack, sink timings short enough for tests, and a starter
for the real channel (slack-bolt and slack-sdk) against the fake, in Socket Mode unless asked."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from channels.slack import SlackChannel
from channels.slack.sink import SinkSettings
from tests.fakes.slack_server import FakeSlack

FAST = SinkSettings(edit_interval=0.05, stream_interval=0.05)
ADA, BOB, EVE = "UADA", "UBOB", "UEVE"
GENERAL = "C0GENERAL"


def dm_of(user: str) -> str:
    return f"D{user[1:]}"


def slack_overrides(slack: FakeSlack, **section: Any) -> dict[str, Any]:
    return {"slack": {"base_url": slack.base_url, "channels": [GENERAL], **section}}


def slack_env(slack: FakeSlack) -> dict[str, str]:
    return {"SLACK_BOT_TOKEN": slack.bot_token, "SLACK_APP_TOKEN": slack.app_token,
            "SLACK_SIGNING_SECRET": slack.signing_secret}


@asynccontextmanager
async def running(app: Any, settings: SinkSettings = FAST) -> AsyncIterator[SlackChannel]:
    """The channel of `app`, started and registered as the App does, stopped at the end."""
    channel = SlackChannel(app.config, app.agent, settings=settings)
    await channel.start()
    app.agent.add_approval_surface("slack", channel)
    app.services.delivery.register("slack", channel)
    try:
        yield channel
    finally:
        app.services.delivery.unregister("slack")
        await channel.stop()


Starter = Callable[..., Awaitable[tuple[Any, SlackChannel]]]
