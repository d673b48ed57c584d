"""The Events API (HTTP) on Slack: every request's signature and timestamp checked on the raw
bytes before anything is parsed; forged or replayed requests get 401 and nothing is stored; a
good one is stored, acknowledged, answered; a re-send answered once. Real aiohttp endpoint and
slack-bolt, signed requests as Slack makes them."""

from __future__ import annotations

import json
import time
from urllib.parse import urlencode

import aiohttp
import pytest

from tests.fakes.anthropic_server import text
from tests.fakes.slack_server import post_signed, sign
from tests.support.slack_support import ADA, dm_of, slack_env, slack_overrides

EVENTS = {"mode": "events", "port": 0, "listen": "127.0.0.1"}


@pytest.fixture
async def events_bot(bot):
    app, channel = await bot(slack_section=EVENTS)
    return app, channel, f"http://127.0.0.1:{channel.events_port}/slack/events"


async def stored(app) -> int:
    return len(await app.services.store.fetchall("SELECT id FROM inbox WHERE channel = 'slack'"))


async def test_the_url_verification_challenge_is_answered(events_bot, slack):
    app, _, url = events_bot
    body = json.dumps({"type": "url_verification", "challenge": "ch-123", "token": "x"}).encode()
    status, answer = await post_signed(url, slack.signing_secret, body)
    assert status == 200 and json.loads(answer) == {"challenge": "ch-123"}
    assert await stored(app) == 0


async def test_a_signed_event_is_stored_acknowledged_and_answered(events_bot, slack, fake_anthropic):
    app, _, url = events_bot
    fake_anthropic.script(text("Over HTTP."))
    status, _ = await post_signed(url, slack.signing_secret,
                                  json.dumps(slack.dm_event(ADA, "hi")).encode())
    assert status == 200 and await stored(app) == 1
    await slack.wait_until(lambda: "Over HTTP." in slack.texts_in(dm_of(ADA)))


@pytest.mark.parametrize("forgery", ["wrong secret", "stale timestamp", "future timestamp",
                                     "not a number", "wrong digest",
                                     "no signature"])
async def test_a_forged_or_replayed_request_gets_401_and_nothing_is_stored(
        events_bot, slack, fake_anthropic, forgery):
    app, channel, url = events_bot
    body = json.dumps(slack.dm_event(ADA, "let me in")).encode()
    now = int(time.time())
    kwargs = {
        "wrong secret": {"signature": sign("not-the-secret", body, now)},
        "stale timestamp": {"timestamp": now - 301},
        "future timestamp": {"timestamp": now + 301},
        "not a number": {"timestamp": "12ab"},
        "wrong digest": {"signature": "v0=" + "0" * 64},
        "no signature": {"signature": "sha256=abc"},
    }[forgery]
    status, _ = await post_signed(url, slack.signing_secret, body, **kwargs)
    assert status == 401
    await channel.intake.idle()
    assert await stored(app) == 0 and fake_anthropic.requests == []


async def test_a_replay_of_a_once_good_request_after_five_minutes_is_refused(events_bot, slack):
    app, _, url = events_bot
    body = json.dumps(slack.dm_event(ADA, "old")).encode()
    then = int(time.time()) - 400
    status, _ = await post_signed(url, slack.signing_secret, body, timestamp=then,
                                  signature=sign(slack.signing_secret, body, then))
    assert status == 401 and await stored(app) == 0


async def test_a_resent_event_is_acknowledged_again_and_answered_once(events_bot, slack, fake_anthropic):
    app, channel, url = events_bot
    fake_anthropic.script(text("Just once."))
    body = json.dumps(slack.dm_event(ADA, "hi", event_id="Ev-resent")).encode()
    assert (await post_signed(url, slack.signing_secret, body))[0] == 200
    assert (await post_signed(url, slack.signing_secret, body, retry=1))[0] == 200
    await slack.wait_until(lambda: "Just once." in slack.texts_in(dm_of(ADA)))
    await channel.intake.idle()
    assert await stored(app) == 1 and len(fake_anthropic.requests) == 1


async def test_the_slash_command_arrives_as_a_signed_form(events_bot, slack, fake_anthropic):
    _, _, url = events_bot
    body = urlencode(slack.slash_payload(ADA, "whoami")).encode()
    status, _ = await post_signed(url, slack.signing_secret, body,
                                  content_type="application/x-www-form-urlencoded")
    assert status == 200
    await slack.wait_until(lambda: any(f"slack:{ADA}" in t for t in slack.texts_in(dm_of(ADA))))


async def test_a_request_that_cannot_be_stored_gets_503_so_slack_sends_it_again(
        events_bot, slack, monkeypatch):
    app, _, url = events_bot

    async def broken(*args, **kwargs):
        raise OSError("disk full")
    monkeypatch.setattr(app.services.inbox, "put", broken)
    status, _ = await post_signed(url, slack.signing_secret,
                                  json.dumps(slack.dm_event(ADA, "hi")).encode())
    assert status == 503


async def test_the_app_serves_slack_events_and_health_on_one_listener(app_factory, slack):
    from tests.support.replica_support import free_port

    port = free_port()
    app = await app_factory({**slack_overrides(slack, mode="events", listen="127.0.0.1", port=port),
                             "health": {"enabled": True, "listen": "127.0.0.1", "port": port}},
                            env=slack_env(slack))
    await app.start_services()
    await app.start_channels(["slack"])
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{port}/healthz") as health:
                assert (await health.json())["channels"] == {"slack": True}
        body = json.dumps({"type": "url_verification", "challenge": "shared"}).encode()
        status, answer = await post_signed(f"http://127.0.0.1:{port}/slack/events",
                                           slack.signing_secret, body)
        assert status == 200 and json.loads(answer) == {"challenge": "shared"}
    finally:
        await app.stop_channels()
