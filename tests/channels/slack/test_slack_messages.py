"""Messages on Slack end to end: the real App and agent, the real slack-bolt/slack-sdk in Socket
Mode against the fake Slack, the fake Anthropic API. Who is read, where the answer goes, each
thread a conversation, an event Slack sends twice answered once, mrkdwn with its plain
fallback, long answers split, rate limits waited out, the slash command."""

from __future__ import annotations

import pytest

from bot.core.errors import ChannelError
from tests.fakes.anthropic_server import text
from tests.fakes.slack_server import FakeSlack
from tests.support.slack_support import ADA, BOB, GENERAL, dm_of


def posted(slack: FakeSlack, channel: str, needle: str) -> bool:
    return any(needle in t for t in slack.texts_in(channel))


def answer_of(slack: FakeSlack, needle: str) -> dict:
    return next(m for m in slack.messages.values() if needle in m["text"])


def asked(fake_anthropic) -> list[str]:
    return [r.json["messages"][-1]["content"][-1].get("text", "") for r in fake_anthropic.requests]


async def test_a_dm_is_answered_in_the_dm_after_its_envelope_was_acknowledged(bot, slack, fake_anthropic):
    app, _ = await bot()
    fake_anthropic.script(text("Hello Ada."))
    await slack.send("events_api", slack.dm_event(ADA, "hi"))
    rows = await app.services.store.fetchall("SELECT update_key FROM inbox WHERE channel = 'slack'")
    assert len(rows) == 1 and rows[0]["update_key"].startswith("e:")   # stored before the ack
    await slack.wait_until(lambda: posted(slack, dm_of(ADA), "Hello Ada."))
    assert asked(fake_anthropic)[-1].endswith("hi")
    assert answer_of(slack, "Hello Ada.")["thread_ts"] is None


async def test_an_event_slack_sends_twice_is_answered_once(bot, slack, fake_anthropic):
    _, channel = await bot()
    fake_anthropic.script(text("Once."))
    body = slack.dm_event(ADA, "hi", event_id="Ev-twice")
    await slack.send("events_api", body)
    await slack.send("events_api", body)     # Slack's re-send: same event id
    await slack.wait_until(lambda: posted(slack, dm_of(ADA), "Once."))
    await channel.intake.idle()
    assert len(fake_anthropic.requests) == 1
    assert sum("Once." in t for t in slack.texts_in(dm_of(ADA))) == 1


async def test_a_mention_in_a_listed_channel_is_answered_in_a_thread_under_it(bot, slack, fake_anthropic):
    await bot()
    fake_anthropic.script(text("In the thread."))
    body = slack.channel_event(GENERAL, ADA, "<@UBOT> what time is it?")
    await slack.send("events_api", body)
    await slack.wait_until(lambda: posted(slack, GENERAL, "In the thread."))
    assert answer_of(slack, "In the thread.")["thread_ts"] == body["event"]["ts"]
    assert asked(fake_anthropic)[-1].endswith("what time is it?")    # the mention removed


async def test_a_thread_the_bot_is_in_is_answered_without_a_mention_and_each_thread_is_its_own_conversation(
        bot, slack, fake_anthropic):
    await bot()
    fake_anthropic.script(text("First."), text("Second."), text("Other thread."))
    first = slack.channel_event(GENERAL, ADA, "<@UBOT> remember 42")
    root = first["event"]["ts"]
    await slack.send("events_api", first)
    await slack.wait_until(lambda: posted(slack, GENERAL, "First."))
    await slack.send("events_api", slack.channel_event(GENERAL, ADA, "and now?", thread_ts=root))
    await slack.wait_until(lambda: posted(slack, GENERAL, "Second."))
    other = slack.channel_event(GENERAL, ADA, "<@UBOT> hello")
    await slack.send("events_api", other)
    await slack.wait_until(lambda: posted(slack, GENERAL, "Other thread."))
    history = fake_anthropic.requests[1].json["messages"]
    assert "remember 42" in str(history) and "remember 42" not in str(fake_anthropic.requests[2].json)
    assert answer_of(slack, "Second.")["thread_ts"] == root


async def test_messages_not_for_the_bot_get_silence(bot, slack, fake_anthropic):
    _, channel = await bot()
    await slack.send("events_api", slack.channel_event(GENERAL, ADA, "no mention here"))
    await slack.send("events_api", slack.channel_event("C0OTHER", ADA, "<@UBOT> unlisted channel"))
    await slack.send("events_api", slack.channel_event(GENERAL, ADA, "stray", thread_ts="1600000000.000001"))
    await slack.send("events_api", slack.channel_event(GENERAL, ADA, "<@UBOT> hi", team="T0OTHER"))
    from_bot = slack.dm_event(ADA, "echo")
    from_bot["event"]["bot_id"] = "B2"
    await slack.send("events_api", from_bot)
    await channel.intake.idle()
    assert fake_anthropic.requests == []
    assert slack.of("chat.postMessage") == [] and slack.of("chat.startStream") == []


async def test_the_models_markdown_is_sent_as_mrkdwn(bot, slack, fake_anthropic):
    await bot()
    fake_anthropic.script(text("**Bold** and [a link](https://example.org) & `x<y`"))
    await slack.send("events_api", slack.dm_event(ADA, "format"))
    final = "*Bold* and <https://example.org|a link> &amp; `x&lt;y`"
    await slack.wait_until(lambda: final in slack.texts_in(dm_of(ADA)))
    assert not posted(slack, dm_of(ADA), "**")


async def test_when_slack_refuses_the_formatted_answer_it_arrives_as_plain_text(bot, slack, fake_anthropic):
    await bot()
    slack.fail("chat.update", "invalid_arguments",
               when=lambda p: p.get("blocks") is None and "*" in p["text"])
    slack.fail("chat.postMessage", "invalid_arguments", times=5, when=lambda p: p.get("mrkdwn") is not False)
    fake_anthropic.script(text("**never dropped**"))
    await slack.send("events_api", slack.dm_event(ADA, "go"))
    await slack.wait_until(lambda: posted(slack, dm_of(ADA), "**never dropped**"))


async def test_a_long_answer_is_split_into_messages_slack_shows_whole(bot, slack, fake_anthropic):
    await bot()
    long = "\n".join(f"paragraph {n}: " + "words " * 30 for n in range(60))   # ~11,000 characters
    fake_anthropic.script(text(long))
    await slack.send("events_api", slack.dm_event(ADA, "long please"))
    await slack.wait_until(lambda: posted(slack, dm_of(ADA), "paragraph 59"))
    parts = [t for t in slack.texts_in(dm_of(ADA)) if "paragraph" in t]
    assert len(parts) >= 3 and all(len(t) <= 4000 for t in parts)
    assert "\n".join(parts).replace("\n", "") == long.replace("\n", "")


async def test_a_rate_limited_post_waits_as_long_as_slack_says_and_then_lands(bot, slack, fake_anthropic):
    await bot()
    slack.rate_limit("chat.postMessage", retry_after=1)
    fake_anthropic.script(text("Patience."))
    await slack.send("events_api", slack.dm_event(ADA, "hi"))
    await slack.wait_until(lambda: posted(slack, dm_of(ADA), "Patience."))
    refused = next(c for c in slack.calls if c.method == "chat.postMessage" and c.error)
    landed = slack.of("chat.postMessage")[0]
    assert refused.error == "ratelimited" and landed.at - refused.at >= 1.0


async def test_the_slash_command_runs_the_command_and_answers_in_the_users_dm(bot, slack, fake_anthropic):
    await bot()
    await slack.send("slash_commands", slack.slash_payload(ADA, "whoami"))
    await slack.wait_until(lambda: posted(slack, dm_of(ADA), f"slack:{ADA}"))
    assert fake_anthropic.requests == []


async def test_a_text_command_after_the_mention_works_in_a_thread(bot, slack, fake_anthropic):
    await bot()
    body = slack.channel_event(GENERAL, BOB, "<@UBOT> /whoami")
    await slack.send("events_api", body)
    await slack.wait_until(lambda: posted(slack, GENERAL, f"slack:{BOB}"))
    assert answer_of(slack, f"slack:{BOB}")["thread_ts"] == body["event"]["ts"]


async def test_the_channel_start_fails_with_one_line_for_a_token_of_another_workspace(bot, slack):
    with pytest.raises(ChannelError) as refused:
        await bot(slack_section={"team_id": "T0ELSEWHERE"})
    assert "T0TEAM" in str(refused.value) and "T0ELSEWHERE" in str(refused.value)
    assert slack.bot_token not in str(refused.value)
    assert slack.connections == 0
