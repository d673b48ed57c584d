"""Discord and the durable inbox (the real App and discord.py against the fake Discord, on SQLite
and PostgreSQL): a message is stored on receipt, so one whose turn never ran is fetched again and
answered after a restart, and an event delivered twice is answered once."""

from __future__ import annotations

import pytest

from bot.conversation.inbox import Entry, Inbox
from channels import discord as discord_bot
from tests.channels.discord.test_discord_e2e import ALICE, ALICE_DM, BASE, GUILD, GUILD_CHANNEL, UNLISTED
from tests.fakes.anthropic_server import last_user_text, text
from tests.fakes.discord_server import FakeDiscord
from tests.support.pg_support import on_both_backends

backend_name = on_both_backends()


@pytest.fixture
async def discord_fake():
    async with FakeDiscord(guilds=(GUILD, UNLISTED)) as fake:
        with fake.patched():
            yield fake


@pytest.fixture
async def bot(app_factory, discord_fake):
    """`await bot()` → (app, channel): a new App with the Discord channel started."""
    started: list[discord_bot.DiscordChannel] = []

    async def start():
        app = await app_factory(BASE, env={"DISCORD_BOT_TOKEN": discord_fake.token})
        channel = discord_bot.create(app.config, app.agent)
        await channel.start()
        started.append(channel)
        return app, channel

    yield start
    for channel in reversed(started):
        await channel.stop()


def said(discord_fake: FakeDiscord, channel: int) -> list[str]:
    return [m["content"] for m in discord_fake.bot_messages(channel)]


async def states(store) -> list[str]:
    return [r["state"] for r in await store.fetchall("SELECT state FROM inbox ORDER BY id")]


async def test_a_message_stored_but_not_run_before_a_shutdown_is_answered_after_the_restart(
        bot, discord_fake, fake_anthropic):
    def responder(body):
        words = last_user_text(body)
        return text(f"ok: {words}", delay=3600 if words == "one" else 0)   # "one" never answers

    fake_anthropic.responder = responder
    app, channel = await bot()
    await discord_fake.send_message(author_id=ALICE, content="one", channel_id=ALICE_DM)
    await discord_fake.send_message(author_id=ALICE, content="two", channel_id=ALICE_DM)
    await fake_anthropic.wait_for_requests(1)
    await discord_fake.wait_for(lambda: len(channel._handlers) == 2)   # both received
    await app.agent.shutdown(grace=0)
    await channel.stop()
    assert await states(app.services.store) == ["done", "pending"]

    await bot()   # a fresh App on the same store fetches "two" again and answers it
    await discord_fake.wait_for(lambda: any(t.endswith("two") for t in said(discord_fake, ALICE_DM)),
                                timeout=10)
    assert len(fake_anthropic.requests) == 2


async def test_a_message_event_delivered_twice_is_answered_once(bot, discord_fake, fake_anthropic):
    await bot()
    first = await discord_fake.send_message(author_id=ALICE, content="hello", channel_id=GUILD_CHANNEL,
                                            guild_id=GUILD.id, mentions_bot=True)
    await discord_fake.wait_for(lambda: said(discord_fake, GUILD_CHANNEL) == ["ok: hello"])
    await discord_fake.dispatch("MESSAGE_CREATE", first)   # the same message id once more
    await discord_fake.send_message(author_id=ALICE, content="again", channel_id=GUILD_CHANNEL,
                                    guild_id=GUILD.id, mentions_bot=True)
    await discord_fake.wait_for(lambda: len(said(discord_fake, GUILD_CHANNEL)) == 2)
    assert said(discord_fake, GUILD_CHANNEL) == ["ok: hello", "ok: again"]
    assert [last_user_text(r.json) for r in fake_anthropic.requests] == ["hello", "again"]


async def test_an_interaction_left_from_before_the_restart_is_closed_not_answered(
        app_factory, bot, discord_fake, fake_anthropic):
    earlier = await app_factory(BASE, env={"DISCORD_BOT_TOKEN": discord_fake.token})
    # A slash command received, then the process died: its 15-minute answer window is gone.
    await Inbox(earlier.services.store, earlier.services.inbox.replica).put(
        "discord", [Entry("i4242", "", "{}")])
    app, _ = await bot()
    assert await states(app.services.store) == ["done"]
    assert fake_anthropic.requests == [] and discord_fake.requests_to("POST", "/interactions") == []


async def test_messages_sent_in_quick_succession_are_stored_and_answered_in_the_order_sent(
        bot, discord_fake, fake_anthropic):
    await bot()
    sent = [f"message {n}" for n in range(8)]
    for words in sent:   # each event is handled in its own task: they race to be stored
        await discord_fake.send_message(author_id=ALICE, content=words, channel_id=ALICE_DM)
    await discord_fake.wait_for(lambda: len(said(discord_fake, ALICE_DM)) == len(sent))
    assert [last_user_text(r.json) for r in fake_anthropic.requests] == sent
    assert said(discord_fake, ALICE_DM) == [f"ok: {words}" for words in sent]
