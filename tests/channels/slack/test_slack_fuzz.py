"""Any bytes in, valid text out, through Slack: seeded text with lone surrogates, NUL, random
bytes, right-to-left and combining marks, as message text and file names. JSON cannot carry a
lone surrogate as bytes, but it can as a `\\ud800` escape, and `json.loads` hands that back as a
lone surrogate: both Socket Mode envelopes and signed Events API bodies carry them that way here,
through the real slack-bolt and slack-sdk — every message is answered, the model and Slack
receive valid text, and both stores hold only valid text."""

from __future__ import annotations

import json
import random

from bot.core.events import REPAIRED_NOTICE
from tests.fakes.slack_server import FakeSlack, post_signed
from tests.support.fuzz_text import (
    fuzz_seed,
    invalid_strings,
    nasty_file_name,
    nasty_text,
    stored_text_is_valid,
)
from tests.support.pg_support import on_both_backends
from tests.support.slack_support import ADA, dm_of

backend_name = on_both_backends()

SENDERS = {f"slack:{ADA}": "full"}
MESSAGES = 4


def answers(slack: FakeSlack) -> list[str]:
    return [t for t in slack.texts_in(dm_of(ADA)) if t.startswith("ok: ")]


async def received_valid_text(app, slack: FakeSlack, fake_anthropic, answered: int,
                              failure: str) -> None:
    """What every fuzz test here checks once the messages are answered."""
    texts = slack.texts_in(dm_of(ADA))
    assert len(fake_anthropic.requests) >= answered, failure
    assert all(not invalid_strings(r.json) for r in fake_anthropic.requests), failure
    assert slack.calls and all(not invalid_strings(c.params) for c in slack.calls), failure
    assert len(answers(slack)) == answered, f"{failure} {texts}"
    assert texts.count(REPAIRED_NOTICE) == answered, f"{failure} {texts}"   # each was repaired
    assert await stored_text_is_valid(app.services.store) == [], failure


async def test_fuzzed_socket_mode_text_and_file_names_are_answered_and_stored_as_valid_text(
        bot, slack, fake_anthropic):
    seed = fuzz_seed()
    rng = random.Random(seed)
    app, _ = await bot(senders=SENDERS)
    for _ in range(MESSAGES):
        await slack.send("events_api", slack.dm_event(ADA, nasty_text(rng)))
    note = slack.add_file(nasty_file_name(rng), b"notes \xff\xfe", "text/plain")
    await slack.send("events_api", slack.dm_event(ADA, nasty_text(rng), files=[note]))
    answered = MESSAGES + 1
    await slack.wait_until(lambda: len(answers(slack)) >= answered, timeout=60)
    failure = f"(FUZZ_SEED={seed})"
    await received_valid_text(app, slack, fake_anthropic, answered, failure)
    document = fake_anthropic.requests[-1].json["messages"][-1]["content"]
    assert any("notes" in str(block) for block in document), f"{failure} {document}"   # read
    assert ".txt" in document[0]["text"] and "\ufffd" in document[0]["text"], failure   # its name


async def test_fuzzed_events_api_bodies_with_escaped_lone_surrogates_are_answered_as_valid_text(
        bot, slack, fake_anthropic):
    seed = fuzz_seed()
    rng = random.Random(seed)
    app, channel = await bot(senders=SENDERS,
                             slack_section={"mode": "events", "port": 0, "listen": "127.0.0.1"})
    url = f"http://127.0.0.1:{channel.events_port}/slack/events"
    for _ in range(MESSAGES):
        body = json.dumps(slack.dm_event(ADA, nasty_text(rng))).encode()
        assert b"\\udcff" in body   # the lone surrogate travels as an escape, as JSON allows
        status, _ = await post_signed(url, slack.signing_secret, body)
        assert status == 200
    await slack.wait_until(lambda: len(answers(slack)) >= MESSAGES, timeout=60)
    await received_valid_text(app, slack, fake_anthropic, MESSAGES, f"(FUZZ_SEED={seed})")


async def test_fuzzed_slash_command_text_is_answered_and_stored_as_valid_text(
        bot, slack, fake_anthropic):
    seed = fuzz_seed()
    rng = random.Random(seed)
    app, _ = await bot(senders=SENDERS)
    failure = f"(FUZZ_SEED={seed})"
    for sent in range(1, MESSAGES + 1):
        await slack.send("slash_commands", slack.slash_payload(ADA, nasty_text(rng)))
        await slack.wait_until(lambda n=sent: len(slack.texts_in(dm_of(ADA))) >= n, timeout=60)
    assert slack.calls and all(not invalid_strings(c.params) for c in slack.calls), failure
    assert all(not invalid_strings(r.json) for r in fake_anthropic.requests), failure
    assert await stored_text_is_valid(app.services.store) == [], failure
