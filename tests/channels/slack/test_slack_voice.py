"""Voice replies on Slack: with /voice on, the answer is posted, then the spoken answer is
uploaded into the conversation through files_upload_v2 (real slack-sdk, fake Slack)."""

from __future__ import annotations

from tests.fakes.anthropic_server import text
from tests.support.slack_support import ADA, dm_of
from tests.support.voice_support import assert_voice_message


async def test_voice_on_uploads_the_spoken_answer_after_the_text(bot, slack, fake_anthropic):
    app, _ = await bot()
    await app.agent.voice.set_mode(f"slack:{ADA}", "on")
    fake_anthropic.script(text("The build is green."))
    await slack.send("events_api", slack.dm_event(ADA, "how is the build?"))
    await slack.wait_until(lambda: any("data" in u for u in slack.uploads.values()))
    await app.agent.voice.settled()
    assert "The build is green." in slack.texts_in(dm_of(ADA))
    (upload,) = slack.uploads.values()
    assert upload["filename"].endswith(".ogg") and upload["channel"] == dm_of(ADA)
    assert_voice_message(upload["data"])
