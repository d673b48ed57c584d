"""Several asks in one model step on Discord: one message listing every call with its preview,
Approve all / Deny all and a pair of buttons per call, within Discord's limits (5 rows of 5
buttons, 2000 characters); each answer goes the one-way path, the turn resumes once with every
result in order, and the message is redrawn as calls are decided. The real App and discord.py
against the fake Discord."""

from __future__ import annotations

import copy

import pytest

from channels import discord as discord_bot
from tests.fakes.anthropic_server import reply, text, tool_results, tool_use
from tests.fakes.discord_server import EPHEMERAL, FakeDiscord, FakeGuild
from tests.support.runtime_tools import Writer

GUILD = FakeGuild(id=7_000_000_000_000_001, channel_ids=(7_000_000_000_000_011,))
ALICE, STRANGER = 4_200_000_000_000_001, 4_200_000_000_000_003
ALICE_DM = 6_000_000_000_000_001
ALWAYS = "any writer call in this chat"
CONFIG = {"senders": {f"discord:{ALICE}": "supervised", f"discord:{STRANGER}": "supervised"},
          "discord": {"guilds": [GUILD.id], "guild_ready_timeout": 0.05}}


@pytest.fixture
async def discord_fake():
    async with FakeDiscord(guilds=(GUILD,)) as fake:
        with fake.patched():
            yield fake


@pytest.fixture
async def bot(app_factory, discord_fake):
    app = await app_factory(CONFIG, env={"DISCORD_BOT_TOKEN": discord_fake.token})
    writer = Writer()
    app.services.registry.register(writer, "tests")
    channel = discord_bot.create(app.config, app.agent)
    await channel.start()
    app.agent.add_approval_surface("discord", channel)
    yield app, writer
    await channel.stop()


def rows(message: dict) -> list[list[str]]:
    return [[b["label"] for b in row["components"]] for row in message["components"]]


def custom_id(message: dict, label: str) -> str:
    return next(b["custom_id"] for row in message["components"] for b in row["components"]
                if b["label"] == label)


async def ask_batch(discord_fake, fake_anthropic, notes: list[str], pages: int = 1) -> list[dict]:
    fake_anthropic.script(reply(text("Writing."), *(tool_use("writer", {"note": n}) for n in notes)))
    await discord_fake.send_message(author_id=ALICE, content="write them", channel_id=ALICE_DM)
    await discord_fake.wait_for(lambda: len([m for m in discord_fake.bot_messages(ALICE_DM)
                                             if m["components"]]) >= pages)
    return [copy.deepcopy(m) for m in discord_fake.bot_messages(ALICE_DM) if m["components"]]


async def test_two_asks_arrive_as_one_message_with_all_and_per_call_buttons_within_limits(
        bot, discord_fake, fake_anthropic):
    (request,) = await ask_batch(discord_fake, fake_anthropic, ["milk", "eggs"])
    assert "2 calls" in request["content"] and "'milk'" in request["content"]
    assert "'eggs'" in request["content"] and len(request["content"]) <= 2000
    assert rows(request) == [["Approve all", "Deny all"], ["Approve 1", "Deny 1", f"Always 1: {ALWAYS}"],
                             ["Approve 2", "Deny 2", f"Always 2: {ALWAYS}"]]


async def test_each_call_is_answered_on_its_own_and_the_turn_resumes_once_in_order(
        bot, discord_fake, fake_anthropic):
    app, writer = bot
    (request,) = await ask_batch(discord_fake, fake_anthropic, ["milk", "eggs"])
    message_id = int(request["id"])
    await discord_fake.click(message_id=message_id, custom_id=custom_id(request, "Deny 1"),
                             user_id=ALICE)
    await discord_fake.wait_for(lambda: "Denied" in discord_fake.messages[message_id]["content"])
    assert rows(discord_fake.messages[message_id]) == [["Approve all", "Deny all"],
                                                       ["Approve 2", "Deny 2", f"Always 2: {ALWAYS}"]]
    await app.agent.queue.drain(5)
    assert writer.executed == [] and len(fake_anthropic.requests) == 1
    fake_anthropic.script(text("Eggs written."))
    await discord_fake.click(message_id=message_id, custom_id=custom_id(request, "Approve all"),
                             user_id=ALICE)
    await discord_fake.wait_for_text(ALICE_DM, "Eggs written.")
    await app.agent.queue.drain(5)
    assert writer.executed == ["eggs"] and len(fake_anthropic.requests) == 2
    results = tool_results(fake_anthropic.requests[-1].json)
    assert results[0]["is_error"] and not results[1].get("is_error")
    final = discord_fake.messages[message_id]
    assert final["components"] == [] and "Denied" in final["content"] and "Approved" in final["content"]


async def test_a_stranger_and_a_repeated_all_tap_are_told_why_and_nothing_runs_twice(
        bot, discord_fake, fake_anthropic):
    app, writer = bot
    (request,) = await ask_batch(discord_fake, fake_anthropic, ["milk", "eggs"])
    message_id = int(request["id"])
    click = await discord_fake.click(message_id=message_id, user_id=STRANGER,
                                     custom_id=custom_id(request, "Approve all"))
    await discord_fake.wait_for(lambda: discord_fake.interaction_callbacks(click["id"]))
    (callback,) = discord_fake.interaction_callbacks(click["id"])
    assert callback.json["data"]["flags"] == EPHEMERAL
    assert callback.json["data"]["content"].startswith(f"Only discord:{ALICE}")
    fake_anthropic.script(text("Both written."))
    await discord_fake.click(message_id=message_id, custom_id=custom_id(request, "Approve all"),
                             user_id=ALICE)
    await discord_fake.wait_for_text(ALICE_DM, "Both written.")
    again = await discord_fake.click(message_id=message_id, user_id=ALICE, as_seen=request,
                                     custom_id=custom_id(request, "Approve all"))
    await discord_fake.wait_for(lambda: discord_fake.followups(again["token"]))
    (refusal,) = discord_fake.followups(again["token"])
    assert refusal.json["flags"] == EPHEMERAL and "already answered" in refusal.json["content"]
    await app.agent.queue.drain(5)
    assert writer.executed == ["milk", "eggs"] and len(fake_anthropic.requests) == 2


async def test_more_calls_than_five_rows_hold_are_shown_on_pages_each_with_the_all_buttons(
        bot, discord_fake, fake_anthropic):
    app, writer = bot
    notes = [f"note {n}" for n in range(6)]
    pages = await ask_batch(discord_fake, fake_anthropic, notes, pages=2)
    assert len(pages) == 2 and "calls 1–4 of 6" in pages[0]["content"]
    for page in pages:
        assert len(page["components"]) <= 5 and len(page["content"]) <= 2000
        assert all(len(row["components"]) <= 5 for row in page["components"])
        assert rows(page)[0] == ["Approve all", "Deny all"]
    assert rows(pages[1])[1:] == [["Approve 5", "Deny 5", f"Always 5: {ALWAYS}"],
                                 ["Approve 6", "Deny 6", f"Always 6: {ALWAYS}"]]
    fake_anthropic.script(text("All six."))
    await discord_fake.click(message_id=int(pages[1]["id"]), user_id=ALICE,
                             custom_id=custom_id(pages[1], "Approve all"))
    await discord_fake.wait_for_text(ALICE_DM, "All six.")
    await app.agent.queue.drain(5)
    assert writer.executed == notes
    await discord_fake.wait_for(lambda: all(discord_fake.messages[int(p["id"])]["components"] == []
                                            for p in pages))


async def test_long_previews_are_posted_whole_before_the_buttons(bot, discord_fake, fake_anthropic):
    notes = ["a" * 1500, "b" * 1500]
    (request,) = await ask_batch(discord_fake, fake_anthropic, notes)
    posted = [m["content"] for m in discord_fake.bot_messages(ALICE_DM)]
    assert all(len(p) <= 2000 for p in posted)
    assert all(any(repr(note) in p for p in posted) for note in notes)   # each one whole
    assert "in the messages above" in request["content"]
    assert any(p.startswith("🔎 Preview 1/1 of call") for p in posted)
