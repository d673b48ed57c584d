"""The Discord channel end to end: the real App and agent, the real discord.py library, a fake
Discord (REST + gateway) and a fake Anthropic API, all on 127.0.0.1."""

from __future__ import annotations

import copy
import time

import pytest

from bot.core.errors import ChannelError
from channels import discord as discord_bot
from tests.fakes.anthropic_server import last_user_text, reply, text, tool_use
from tests.fakes.discord_server import EPHEMERAL, FakeDiscord, FakeGuild
from tests.support.runtime_tools import Writer

GUILD = FakeGuild(id=7_000_000_000_000_001, channel_ids=(7_000_000_000_000_011,),
                  roles={"Admins": 7_000_000_000_000_021, "Members": 7_000_000_000_000_022})
UNLISTED = FakeGuild(id=8_000_000_000_000_001, channel_ids=(8_000_000_000_000_011,))
GUILD_CHANNEL = GUILD.channel_ids[0]
ALICE, BOB, STRANGER = 4_200_000_000_000_001, 4_200_000_000_000_002, 4_200_000_000_000_003
ALICE_DM = 6_000_000_000_000_001
BASE = {
    "senders": {f"discord:{ALICE}": "full", f"discord:{BOB}": "read_only", "unknown": "pairing"},
    "discord": {"guilds": [GUILD.id], "roles": {"Admins": "supervised"}, "guild_ready_timeout": 0.05},
}
SUPERVISED = {**BASE, "senders": {f"discord:{ALICE}": "supervised", "unknown": "pairing"}}


@pytest.fixture
async def discord_fake():
    async with FakeDiscord(guilds=(GUILD, UNLISTED)) as fake:
        with fake.patched():
            yield fake


@pytest.fixture
async def bot(app_factory, discord_fake):
    """`await bot(overrides)` → (app, channel): a real App with the Discord channel started."""
    started: list[discord_bot.DiscordChannel] = []

    async def start(overrides: dict | None = None, token: str | None = None):
        app = await app_factory(overrides or BASE, env={"DISCORD_BOT_TOKEN": token or discord_fake.token})
        channel = discord_bot.create(app.config, app.agent)
        await channel.start()
        started.append(channel)
        return app, channel

    yield start
    for channel in reversed(started):
        await channel.stop()


def with_writer(app) -> Writer:
    writer = Writer()
    app.services.registry.register(writer, "tests")
    return writer


def buttons(message: dict) -> dict[str, str]:
    """label -> custom_id of the buttons on a posted message."""
    return {b["label"]: b["custom_id"] for row in message["components"] for b in row["components"]}


async def ask_approval_in_dm(discord_fake, fake_anthropic, note: str = "milk") -> dict:
    fake_anthropic.script(reply(text("I'll write it."), tool_use("writer", {"note": note})))
    await discord_fake.send_message(author_id=ALICE, content=f"write {note}", channel_id=ALICE_DM)
    posted = await discord_fake.wait_for_buttons(ALICE_DM)
    return copy.deepcopy(posted)         # as the user saw it: the fake edits its own copy later


async def test_a_direct_message_is_answered_in_the_dm_with_a_typing_indicator(bot, discord_fake,
                                                                              fake_anthropic):
    await bot()
    fake_anthropic.script(text("Hello Alice!"))
    await discord_fake.send_message(author_id=ALICE, content="hi there", channel_id=ALICE_DM)
    (answer,) = await discord_fake.wait_for_bot_messages(ALICE_DM)
    assert answer["content"] == "Hello Alice!"
    assert last_user_text(fake_anthropic.last_request.json) == "hi there"
    assert discord_fake.requests_to("POST", f"/channels/{ALICE_DM}/typing")


async def test_a_role_mapped_to_supervised_lets_a_read_only_member_ask_for_a_medium_risk_tool(
        bot, discord_fake, fake_anthropic):
    app, _ = await bot()
    writer = with_writer(app)
    fake_anthropic.script(reply(text("Writing."), tool_use("writer", {"note": "milk"})))
    await discord_fake.send_message(author_id=BOB, content="write milk", channel_id=GUILD_CHANNEL,
                                    guild_id=GUILD.id, roles=("Admins",), mentions_bot=True)
    request = await discord_fake.wait_for_buttons(GUILD_CHANNEL)
    assert "writer" in request["content"] and "Write the note 'milk'" in request["content"]
    assert set(buttons(request)) == {"Approve", "Deny", "Always: any writer call in this chat"}
    offered = [t["name"] for t in fake_anthropic.requests[0].json["tools"]]
    assert "writer" in offered
    assert last_user_text(fake_anthropic.requests[0].json) == "write milk"   # mention stripped
    assert writer.executed == []


async def test_without_the_role_the_same_member_is_read_only_and_gets_no_medium_risk_tool(
        bot, discord_fake, fake_anthropic):
    app, _ = await bot()
    with_writer(app)
    fake_anthropic.script(text("I can only read."))
    await discord_fake.send_message(author_id=BOB, content="write milk", channel_id=GUILD_CHANNEL,
                                    guild_id=GUILD.id, roles=("Members",), mentions_bot=True)
    await discord_fake.wait_for_bot_messages(GUILD_CHANNEL)
    offered = [t["name"] for t in fake_anthropic.requests[0].json["tools"]]
    assert "writer" not in offered


async def test_a_guild_message_that_does_not_mention_the_bot_is_ignored(bot, discord_fake, fake_anthropic):
    await bot()
    await discord_fake.send_message(author_id=ALICE, content="just chatting", channel_id=GUILD_CHANNEL,
                                    guild_id=GUILD.id)
    await discord_fake.send_message(author_id=ALICE, content="now you", channel_id=GUILD_CHANNEL,
                                    guild_id=GUILD.id, mentions_bot=True)
    (answer,) = await discord_fake.wait_for_bot_messages(GUILD_CHANNEL)
    assert [last_user_text(r.json) for r in fake_anthropic.requests] == ["now you"]
    assert answer["content"] == "ok: now you"


async def test_a_guild_that_is_not_listed_gets_silence_even_when_mentioned(bot, discord_fake, fake_anthropic):
    await bot()
    unlisted_channel = UNLISTED.channel_ids[0]
    await discord_fake.send_message(author_id=ALICE, content="hello?", channel_id=unlisted_channel,
                                    guild_id=UNLISTED.id, mentions_bot=True)
    await discord_fake.send_message(author_id=ALICE, content="control", channel_id=ALICE_DM)
    await discord_fake.wait_for_bot_messages(ALICE_DM)
    assert [last_user_text(r.json) for r in fake_anthropic.requests] == ["control"]
    assert discord_fake.bot_messages(unlisted_channel) == []
    assert not discord_fake.requests_to("POST", f"/channels/{unlisted_channel}/")


async def test_an_unknown_member_gets_the_pairing_code_by_dm_and_not_in_the_channel(bot, discord_fake):
    app, _ = await bot()
    await discord_fake.send_message(author_id=STRANGER, content="hi", channel_id=GUILD_CHANNEL,
                                    guild_id=GUILD.id, mentions_bot=True)
    await discord_fake.wait_for(lambda: discord_fake.dm_channel_of(STRANGER) is not None)
    (dm,) = await discord_fake.wait_for_bot_messages(discord_fake.dm_channel_of(STRANGER))
    (code,) = [row["code"] for row in await app.services.senders.list_codes()]
    assert code in dm["content"]
    assert all(code not in m["content"] for m in discord_fake.bot_messages(GUILD_CHANNEL))


async def test_the_requester_approves_and_the_tool_runs_once(bot, discord_fake, fake_anthropic):
    app, _ = await bot(SUPERVISED)
    writer = with_writer(app)
    request = await ask_approval_in_dm(discord_fake, fake_anthropic)
    fake_anthropic.script(text("Written."))
    click = await discord_fake.click(message_id=int(request["id"]), custom_id=buttons(request)["Approve"],
                                     user_id=ALICE)
    await discord_fake.wait_for_text(ALICE_DM, "Written.")
    assert writer.executed == ["milk"]
    posted = [m["id"] for m in discord_fake.bot_messages(ALICE_DM)]
    texts = [m["content"] for m in discord_fake.bot_messages(ALICE_DM)]
    assert texts[0] == "I'll write it." and posted[1] == request["id"] and texts[-1] == "Written."
    assert texts.count("I'll write it.") == 1
    edited = discord_fake.messages[int(request["id"])]
    assert edited["components"] == []
    assert "Approved" in edited["content"] and f"<@{ALICE}>" in edited["content"]
    (callback,) = discord_fake.interaction_callbacks(click["id"])
    assert callback.json["type"] == 6            # deferred update: acknowledged, no new message
    approval_id = buttons(request)["Approve"].split(":")[2]
    assert (await app.services.approvals.get(approval_id)).status == "executed"
    ref = await app.services.approvals.message_ref(approval_id)
    assert ref == f"{ALICE_DM}:{request['id']}"


async def test_a_strangers_click_is_refused_ephemerally_and_changes_nothing(bot, discord_fake,
                                                                            fake_anthropic):
    app, _ = await bot(SUPERVISED)
    writer = with_writer(app)
    request = await ask_approval_in_dm(discord_fake, fake_anthropic)
    click = await discord_fake.click(message_id=int(request["id"]), custom_id=buttons(request)["Approve"],
                                     user_id=STRANGER)
    await discord_fake.wait_for(lambda: discord_fake.interaction_callbacks(click["id"]))
    (callback,) = discord_fake.interaction_callbacks(click["id"])
    assert callback.json["type"] == 4 and callback.json["data"]["flags"] == EPHEMERAL
    assert callback.json["data"]["content"] == f"Only discord:{ALICE} or an approver can answer this request."
    approval_id = buttons(request)["Approve"].split(":")[2]
    assert (await app.services.approvals.get(approval_id)).status == "pending"
    assert writer.executed == [] and discord_fake.messages[int(request["id"])]["components"]


async def test_a_configured_approver_may_answer_someone_elses_request(bot, discord_fake, fake_anthropic):
    overrides = {**SUPERVISED, "approvals": {"approvers": [f"discord:{STRANGER}"]}}
    app, _ = await bot(overrides)
    writer = with_writer(app)
    request = await ask_approval_in_dm(discord_fake, fake_anthropic)
    fake_anthropic.script(text("Denied, fine."))
    await discord_fake.click(message_id=int(request["id"]), custom_id=buttons(request)["Deny"],
                             user_id=STRANGER)
    await discord_fake.wait_for_text(ALICE_DM, "Denied, fine.")
    edited = discord_fake.messages[int(request["id"])]
    assert "Denied" in edited["content"] and f"<@{STRANGER}>" in edited["content"]
    assert writer.executed == []


async def test_a_double_click_runs_the_tool_once_and_the_second_click_is_told_why(bot, discord_fake,
                                                                                   fake_anthropic):
    app, _ = await bot(SUPERVISED)
    writer = with_writer(app)
    request = await ask_approval_in_dm(discord_fake, fake_anthropic)
    fake_anthropic.script(text("Written."))
    approve = buttons(request)["Approve"]
    first = await discord_fake.click(message_id=int(request["id"]), custom_id=approve, user_id=ALICE,
                                     as_seen=request)
    second = await discord_fake.click(message_id=int(request["id"]), custom_id=approve, user_id=ALICE,
                                      as_seen=request)
    tokens = (first["token"], second["token"])
    await discord_fake.wait_for(lambda: any(discord_fake.followups(t) for t in tokens))
    await discord_fake.wait_for_text(ALICE_DM, "Written.")
    refusals = [r for t in tokens for r in discord_fake.followups(t)]
    assert len(refusals) == 1
    assert refusals[0].json["flags"] == EPHEMERAL and "already approved" in refusals[0].json["content"]
    await app.agent.queue.drain(5)
    assert writer.executed == ["milk"]


async def test_an_expired_request_says_so_runs_nothing_and_loses_its_buttons(bot, discord_fake,
                                                                             fake_anthropic):
    app, _ = await bot(SUPERVISED)
    writer = with_writer(app)
    request = await ask_approval_in_dm(discord_fake, fake_anthropic)
    app.services.approvals.clock = lambda: time.time() + 3600     # the timeout has passed
    click = await discord_fake.click(message_id=int(request["id"]), custom_id=buttons(request)["Approve"],
                                     user_id=ALICE)
    await discord_fake.wait_for(lambda: discord_fake.followups(click["token"]))
    (refusal,) = discord_fake.followups(click["token"])
    assert refusal.json["flags"] == EPHEMERAL and "expired" in refusal.json["content"]
    edited = discord_fake.messages[int(request["id"])]
    assert edited["components"] == [] and "Expired" in edited["content"]
    assert writer.executed == []


async def test_buttons_keep_working_after_a_restart_on_the_same_store(bot, discord_fake, fake_anthropic):
    app, channel = await bot(SUPERVISED)
    with_writer(app)
    request = await ask_approval_in_dm(discord_fake, fake_anthropic)
    await channel.stop()
    await app.close()

    new_app, new_channel = await bot(SUPERVISED)
    assert new_channel.connected and len(discord_fake.identifies) == 2
    writer = with_writer(new_app)
    fake_anthropic.script(text("Written after the restart."))
    await discord_fake.click(message_id=int(request["id"]), custom_id=buttons(request)["Approve"],
                             user_id=ALICE)
    await discord_fake.wait_for_text(ALICE_DM, "Written after the restart.")
    await new_app.agent.queue.drain(5)
    assert writer.executed == ["milk"]
    assert discord_fake.messages[int(request["id"])]["components"] == []


async def test_a_5000_character_answer_is_split_without_breaking_code_blocks(bot, discord_fake,
                                                                             fake_anthropic):
    await bot()
    code = "\n".join(f"    line_{i} = compute({i})  # some padding text here" for i in range(90))
    answer = "Here is the script:\n```python\n" + code + "\n```\nAnd some prose. " + "word " * 200
    assert len(answer) > 5000
    fake_anthropic.script(text(answer))
    await discord_fake.send_message(author_id=ALICE, content="long please", channel_id=ALICE_DM)
    await discord_fake.wait_for(lambda: sum(len(m["content"]) for m in discord_fake.bot_messages(ALICE_DM))
                                >= len(answer))
    posted = [m["content"] for m in discord_fake.bot_messages(ALICE_DM)]
    assert len(posted) >= 3
    assert all(len(c) <= 2000 for c in posted)
    assert all(c.count("```") % 2 == 0 for c in posted)
    assert posted[-1].rstrip().endswith("word")


async def test_an_answer_containing_everyone_pings_no_one(bot, discord_fake, fake_anthropic):
    await bot()
    fake_anthropic.script(text(f"@everyone @here <@&{GUILD.roles['Admins']}> <@{BOB}> look!"))
    await discord_fake.send_message(author_id=ALICE, content="ping them", channel_id=GUILD_CHANNEL,
                                    guild_id=GUILD.id, mentions_bot=True)
    (answer,) = await discord_fake.wait_for_bot_messages(GUILD_CHANNEL)
    assert "@everyone" in answer["content"]
    (sent,) = discord_fake.requests_to("POST", f"/channels/{GUILD_CHANNEL}/messages")
    assert sent.json["allowed_mentions"] == {"parse": [], "replied_user": False}   # no users/roles lists
    assert sent.json["message_reference"]["fail_if_not_exists"] is False   # a reply, not a ping


async def test_the_whoami_slash_command_answers_ephemerally_with_the_agents_reply(bot, discord_fake):
    await bot()
    commands = {c["name"] for c in discord_fake.commands}
    assert {"whoami", "tools", "new", "stop", "undo"} <= commands
    slash = await discord_fake.slash(name="whoami", user_id=ALICE, channel_id=ALICE_DM)
    await discord_fake.wait_for(lambda: discord_fake.followups(slash["token"]))
    (deferred,) = discord_fake.interaction_callbacks(slash["id"])
    assert deferred.json["type"] == 5 and deferred.json["data"]["flags"] == EPHEMERAL
    (answer,) = discord_fake.followups(slash["token"])
    assert f"Sender: discord:{ALICE}" in answer.json["content"] and "Autonomy: full" in answer.json["content"]
    assert answer.json["flags"] == EPHEMERAL


async def test_a_bad_token_fails_start_with_one_clear_line(bot, discord_fake):
    with pytest.raises(ChannelError) as failure:
        await bot(token="not-the-token")
    message = str(failure.value)
    assert "\n" not in message and "token" in message.lower() and "not-the-token" not in message
    assert discord_fake.identifies == []


async def test_a_forged_request_id_is_refused_ephemerally_and_changes_nothing(bot, discord_fake,
                                                                             fake_anthropic):
    app, _ = await bot(SUPERVISED)
    writer = with_writer(app)
    request = await ask_approval_in_dm(discord_fake, fake_anthropic)
    forged_id = "myclaw:ap:ZZZZZZZZZZZZZZZZ:a"
    forged = copy.deepcopy(request)
    forged["components"][0]["components"][0]["custom_id"] = forged_id    # a modified client
    click = await discord_fake.click(message_id=int(request["id"]), custom_id=forged_id, user_id=ALICE,
                                     as_seen=forged)
    await discord_fake.wait_for(lambda: discord_fake.interaction_callbacks(click["id"]))
    (refusal,) = discord_fake.interaction_callbacks(click["id"])
    assert refusal.json["type"] == 4 and refusal.json["data"]["flags"] == EPHEMERAL
    assert refusal.json["data"]["content"] == "Unknown approval request."
    assert discord_fake.messages[int(request["id"])]["components"] == request["components"]
    assert writer.executed == []


async def test_always_approves_this_call_and_the_next_of_the_session_without_asking(bot, discord_fake,
                                                                                    fake_anthropic):
    app, _ = await bot(SUPERVISED)
    writer = with_writer(app)
    request = await ask_approval_in_dm(discord_fake, fake_anthropic)
    fake_anthropic.script(text("Written."))
    always = buttons(request)["Always: any writer call in this chat"]
    await discord_fake.click(message_id=int(request["id"]), custom_id=always, user_id=ALICE)
    await discord_fake.wait_for_text(ALICE_DM, "Written.")
    assert "Approved, and always from now on" in discord_fake.messages[int(request["id"])]["content"]
    fake_anthropic.script(reply(tool_use("writer", {"note": "eggs"})), text("Eggs written too."))
    await discord_fake.send_message(author_id=ALICE, content="and eggs", channel_id=ALICE_DM)
    await discord_fake.wait_for_text(ALICE_DM, "Eggs written too.")
    assert writer.executed == ["milk", "eggs"]
    sent = [*discord_fake.requests_to("POST", f"/channels/{ALICE_DM}/messages"),
            *discord_fake.requests_to("PATCH", f"/channels/{ALICE_DM}/messages")]
    armed = [r for r in sent if isinstance(r.json, dict) and r.json.get("components")]
    assert len(armed) == 1 and armed[0].method == "PATCH"     # asked only the first time


async def test_with_approvals_in_dm_the_request_goes_by_dm_and_the_answer_returns_to_the_guild(
        bot, discord_fake, fake_anthropic):
    app, _ = await bot({**SUPERVISED, "discord": {**BASE["discord"], "approvals_in_dm": True}})
    writer = with_writer(app)
    fake_anthropic.script(reply(text("Writing."), tool_use("writer", {"note": "milk"})))
    await discord_fake.send_message(author_id=ALICE, content="write milk", channel_id=GUILD_CHANNEL,
                                    guild_id=GUILD.id, mentions_bot=True)
    await discord_fake.wait_for(lambda: discord_fake.dm_channel_of(ALICE) is not None)
    request = copy.deepcopy(await discord_fake.wait_for_buttons(discord_fake.dm_channel_of(ALICE)))
    assert not any(m["components"] for m in discord_fake.bot_messages(GUILD_CHANNEL))
    fake_anthropic.script(text("Written, back in the server."))
    approve = buttons(request)["Approve"]
    await discord_fake.click(message_id=int(request["id"]), custom_id=approve, user_id=ALICE)
    await discord_fake.wait_for_text(GUILD_CHANNEL, "Written, back in the server.")
    await app.agent.queue.drain(5)
    assert writer.executed == ["milk"]
    assert discord_fake.messages[int(request["id"])]["components"] == []


async def test_a_request_is_posted_as_text_recorded_and_only_then_given_its_buttons(
        bot, discord_fake, fake_anthropic):
    app, _ = await bot(SUPERVISED)
    with_writer(app)
    request = await ask_approval_in_dm(discord_fake, fake_anthropic)
    posted = discord_fake.requests_to("POST", f"/channels/{ALICE_DM}/messages")
    assert posted and not any(r.json.get("components") for r in posted)   # text first
    (pending,) = await app.services.approvals.pending()
    refs = await app.services.approvals.message_refs(pending.id)
    assert any(ref.endswith(f":{request['id']}") for _, ref in refs)
    armed = [r for r in discord_fake.requests_to("PATCH", f"/channels/{ALICE_DM}/messages")
             if r.json.get("components")]
    assert len(armed) == 1 and armed[0].path.endswith(str(request["id"]))


async def test_a_recorded_request_that_lost_its_buttons_gets_them_back_when_shown_again(
        bot, discord_fake, fake_anthropic):
    app, channel = await bot(SUPERVISED)
    app.agent.add_approval_surface("discord", channel)     # as the App registers it
    with_writer(app)
    request = await ask_approval_in_dm(discord_fake, fake_anthropic)
    discord_fake.messages[int(request["id"])]["components"] = []   # the kill before the edit
    (pending,) = await app.services.approvals.pending()
    await app.agent.show_pending(pending)                          # what a restart does
    await discord_fake.wait_for(lambda: discord_fake.messages[int(request["id"])]["components"])
    assert set(buttons(discord_fake.messages[int(request["id"])])) >= {"Approve", "Deny"}
