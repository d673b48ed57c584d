"""Messages on Slack end to end: the real App and agent, the real slack-bolt/slack-sdk in Socket
Mode against the fake Slack, the fake Anthropic API."""

from __future__ import annotations

from tests.fakes.anthropic_server import text
from tests.fakes.slack_server import FakeSlack
from tests.support.slack_support import ADA, dm_of


def posted(slack: FakeSlack, channel: str, needle: str) -> bool:
    return any(needle in t for t in slack.texts_in(channel))


async def test_a_dm_is_answered_in_the_dm_after_its_envelope_was_acknowledged(bot, slack, fake_anthropic):
    await bot()
    fake_anthropic.script(text("Hello Ada."))
    await slack.send("events_api", slack.dm_event(ADA, "hi"))
    await slack.wait_until(lambda: posted(slack, dm_of(ADA), "Hello Ada."))
    assert fake_anthropic.last_request.json["messages"][-1]["content"][-1]["text"].endswith("hi")
