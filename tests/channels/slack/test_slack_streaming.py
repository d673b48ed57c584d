"""Live answers on Slack: streamed with chat.startStream / appendStream / stopStream in a thread
where the workspace has them, else one message updated in place at a bounded rate; tool progress
as a status line. The real App and slack-sdk against the fake Slack."""

from __future__ import annotations

import itertools

from tests.fakes.anthropic_server import reply, text, tool_use
from tests.fakes.slack_server import FakeSlack
from tests.support.slack_support import ADA, GENERAL, dm_of

ANSWER = "The answer is streamed in three pieces, as it is written."


def in_thread(slack: FakeSlack, needle: str) -> dict | None:
    return next((m for m in slack.messages.values() if m["text"] == needle), None)


async def mention(slack: FakeSlack, words: str) -> str:
    body = slack.channel_event(GENERAL, ADA, f"<@UBOT> {words}")
    await slack.send("events_api", body)
    return body["event"]["ts"]


async def test_an_answer_in_a_thread_is_streamed_with_slacks_streaming_methods(bot, slack, fake_anthropic):
    await bot()
    fake_anthropic.script(reply(text(ANSWER), chunk_delay=0.15))
    root = await mention(slack, "tell me")
    await slack.wait_for("chat.stopStream")
    start = slack.of("chat.startStream")[0].params
    assert start["channel"] == GENERAL and start["thread_ts"] == root
    assert start["recipient_user_id"] == ADA and start["recipient_team_id"] == "T0TEAM"
    assert start["markdown_text"] != ANSWER          # the first piece, not the whole answer
    message = in_thread(slack, ANSWER)
    assert message is not None and message["thread_ts"] == root and not message["streaming"]
    assert slack.of("chat.postMessage") == []


async def test_without_streaming_the_answer_is_one_message_updated_in_place(bot, slack, fake_anthropic):
    slack.streaming = False
    _, channel = await bot()
    fake_anthropic.script(reply(text(ANSWER), chunk_delay=0.15), text("Second answer."))
    root = await mention(slack, "tell me")
    await slack.wait_until(lambda: in_thread(slack, ANSWER))
    first = slack.of("chat.postMessage")[0]
    assert first.params["thread_ts"] == root and first.params["text"] != ANSWER
    assert slack.of("chat.update", lambda p: p["ts"] == first.result["ts"])
    assert not channel.streaming.enabled
    await mention(slack, "again")
    await slack.wait_until(lambda: in_thread(slack, "Second answer."))
    assert len(slack.calls_of_errors("chat.startStream")) == 1   # asked once, then not again


async def test_a_dm_answer_is_updated_in_place_at_a_bounded_rate(bot, slack, fake_anthropic):
    await bot()
    fake_anthropic.script(reply(text(ANSWER), chunk_delay=0.15))
    await slack.send("events_api", slack.dm_event(ADA, "tell me"))
    await slack.wait_until(lambda: ANSWER in slack.texts_in(dm_of(ADA)))
    updates = [c.at for c in slack.of("chat.update")]
    assert slack.of("chat.startStream") == []
    assert all(b - a >= 0.04 for a, b in itertools.pairwise(updates))


async def test_tool_progress_is_one_status_line_updated_in_place(bot, slack, fake_anthropic):
    await bot()
    fake_anthropic.script(reply(text("Checking."), tool_use("time_now", {})), text("It is late."))
    await slack.send("events_api", slack.dm_event(ADA, "what time is it"))
    await slack.wait_until(lambda: "It is late." in slack.texts_in(dm_of(ADA)))
    status = [m for m in slack.messages.values() if "time_now" in m["text"]]
    assert len(status) == 1 and status[0]["text"].startswith("✅ time_now")
    texts = slack.texts_in(dm_of(ADA))
    assert texts.index("Checking.") < texts.index(status[0]["text"]) < texts.index("It is late.")


async def test_an_answer_that_ends_before_the_next_append_is_due_ends_with_the_stop_at_once(
        bot, slack, fake_anthropic):
    """Appends wait for Slack's rate; the end of the answer does not wait for them: the text
    an append was holding goes out with chat.stopStream, and no append is sent after it."""
    from contextlib import AsyncExitStack

    from channels.slack.sink import SinkSettings
    from tests.support.slack_support import running

    app, channel = await bot()
    await channel.stop()
    app.services.delivery.unregister("slack")
    slow = SinkSettings(edit_interval=600.0, stream_interval=600.0)   # an append never comes due
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(running(app, slow))
        fake_anthropic.script(reply(text(ANSWER)))
        await mention(slack, "tell me")
        await slack.wait_for("chat.stopStream")
        assert len(slack.of("chat.startStream")) == 1 and slack.of("chat.appendStream") == []
        stop = slack.of("chat.stopStream")[0].params
        start = slack.of("chat.startStream")[0].params
        assert start["markdown_text"] + stop["markdown_text"] == ANSWER
        message = in_thread(slack, ANSWER)
        assert message is not None and not message["streaming"]
