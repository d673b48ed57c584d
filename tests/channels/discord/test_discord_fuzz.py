"""Any bytes in, valid text out, through Discord: seeded text with lone surrogates, NUL, random
bytes, right-to-left and combining marks, sent as message text and attachment file names over
the fake gateway (as JSON `\\uXXXX` escapes, which discord.py parses back into lone surrogates)
through the real discord.py — every message is answered, the model and Discord receive valid
text, and both stores hold only valid text."""

from __future__ import annotations

import random

import pytest

from bot.core.events import REPAIRED_NOTICE
from channels import discord as discord_bot
from tests.fakes.discord_server import FakeDiscord
from tests.support.fuzz_text import (
    fuzz_seed,
    invalid_strings,
    nasty_file_name,
    nasty_text,
    stored_text_is_valid,
)
from tests.support.pg_support import on_both_backends

backend_name = on_both_backends()

ADA = 4_200_000_000_000_077
ADA_DM = 6_000_000_000_000_077
MESSAGES = 6


@pytest.fixture
async def discord_fake():
    async with FakeDiscord() as fake:
        with fake.patched():
            yield fake


def answers(fake: FakeDiscord) -> list[str]:
    return [m["content"] for m in fake.bot_messages(ADA_DM) if m["content"].startswith("ok: ")]


async def test_fuzzed_text_and_file_names_are_answered_and_stored_as_valid_text(
        app_factory, discord_fake, fake_anthropic):
    seed = fuzz_seed()
    rng = random.Random(seed)
    app = await app_factory({"senders": {f"discord:{ADA}": "full"},
                             "discord": {"guild_ready_timeout": 0.05}},
                            env={"DISCORD_BOT_TOKEN": discord_fake.token})
    channel = discord_bot.create(app.config, app.agent)
    await channel.start()
    try:
        for _ in range(MESSAGES):
            await discord_fake.send_message(author_id=ADA, content=nasty_text(rng), channel_id=ADA_DM)
        note = (nasty_file_name(rng), b"notes \xff\xfe", "text/plain")
        await discord_fake.send_message(author_id=ADA, content=nasty_text(rng), channel_id=ADA_DM,
                                        attachments=(note,), name=nasty_text(rng, 3))
        answered = MESSAGES + 1
        await discord_fake.wait_for(lambda: len(answers(discord_fake)) >= answered, timeout=60)
    finally:
        await channel.stop()
    failure = f"(FUZZ_SEED={seed})"
    sent = [r.json for r in discord_fake.requests]   # messages, edits, typing
    texts = [m["content"] for m in discord_fake.bot_messages(ADA_DM)]
    assert len(fake_anthropic.requests) >= answered, failure
    assert all(not invalid_strings(r.json) for r in fake_anthropic.requests), failure
    assert sent and not invalid_strings(sent), failure
    assert len(answers(discord_fake)) == answered, f"{failure} {texts}"
    assert texts.count(REPAIRED_NOTICE) == answered, f"{failure} {texts}"   # each was repaired
    last_user = [r.json["messages"][-1]["content"] for r in fake_anthropic.requests]
    read = [blocks for blocks in last_user if "notes" in str(blocks)]   # the file was read
    assert len(read) == 1, f"{failure} {last_user}"
    document = read[0]
    assert ".txt" in document[0]["text"] and "\ufffd" in document[0]["text"], failure   # its name
    assert await stored_text_is_valid(app.services.store) == [], failure
