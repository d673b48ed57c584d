"""The Discord adapter against the fake Discord, with a scripted stand-in for the agent.

These pin what the channel itself owns — who is addressed, what it passes on, how events are
rendered, start-up errors — independently of the model. The end-to-end tests with the real agent
are in test_discord_e2e.py.
"""

from __future__ import annotations

import socket

import discord.http
import pytest

from bot.core.approval_cards import ApprovalNeeded, ApprovalView
from bot.core.errors import ChannelError
from bot.core.events import (
    Done,
    IncomingMessage,
    Notice,
    TextDelta,
    ToolFinished,
    ToolProgress,
    ToolStarted,
)
from channels import discord as discord_bot
from channels.discord.sink import DM_REFUSED
from tests.conftest import make_config
from tests.fakes.discord_server import EPHEMERAL, FakeDiscord, FakeGuild
from tests.support.languages import EN

GUILD = FakeGuild(id=7_100_000_000_000_001, channel_ids=(7_100_000_000_000_011,),
                  roles={"Admins": 7_100_000_000_000_021, "Readers": 7_100_000_000_000_022})
UNLISTED = FakeGuild(id=8_100_000_000_000_001, channel_ids=(8_100_000_000_000_011,))
CHANNEL = GUILD.channel_ids[0]
USER, OTHER_BOT = 4_300_000_000_000_001, 4_300_000_000_000_009
USER_DM = 6_100_000_000_000_001


class ScriptedAgent:
    """Implements bot.core.events.AgentAPI: records what arrives and plays `events` into the sink."""

    inbox = None   # no store here: the channel answers without recording

    def __init__(self, *events):
        self.events = list(events) or [Done("ok")]
        self.received: list[IncomingMessage] = []
        self.refs: dict[str, str] = {}

    async def handle(self, message, sink):
        self.received.append(message)
        for event in self.events:
            await sink.emit(event)

    async def resolve_approval(self, approval_id, resolver, choice):
        raise AssertionError("no tap is expected in these tests")

    async def set_approval_message_ref(self, approval_id, ref, channel=""):
        self.refs[approval_id] = ref

    async def pending_approvals(self, channel):
        return []

    def command_descriptions(self, language=""):
        return [("whoami", "Who you are to me"), ("help", "Not a slash command here")]

    def translator(self, reader, hint=""):
        return EN


@pytest.fixture
async def discord_fake():
    async with FakeDiscord(guilds=(GUILD, UNLISTED)) as fake:
        with fake.patched():
            yield fake


@pytest.fixture
async def start(tmp_path, discord_fake):
    """`await start(agent, **discord_settings)` → a started DiscordChannel (stopped at teardown)."""
    started = []

    async def starter(agent, token=None, **discord_settings):
        settings = {"guilds": [GUILD.id], "guild_ready_timeout": 0.05, **discord_settings}
        config = make_config(tmp_path, {"discord": settings},
                             env={"DISCORD_BOT_TOKEN": token or discord_fake.token})
        channel = discord_bot.create(config, agent)
        started.append(channel)
        await channel.start()
        return channel

    yield starter
    for channel in reversed(started):
        await channel.stop()


async def test_a_guild_mention_passes_role_names_and_the_text_without_the_mention(start, discord_fake):
    agent = ScriptedAgent()
    await start(agent)
    await discord_fake.send_message(author_id=USER, content="list my files", channel_id=CHANNEL,
                                    guild_id=GUILD.id, roles=("Admins", "Readers"), mentions_bot=True)
    await discord_fake.wait_for_bot_messages(CHANNEL)
    (incoming,) = agent.received
    assert incoming.sender == f"discord:{USER}" and incoming.chat == str(CHANNEL)
    assert incoming.text == "list my files" and incoming.channel == "discord" and incoming.is_group
    assert set(incoming.roles) == {"Admins", "Readers"}          # @everyone is not a role name


async def test_a_direct_message_is_not_a_group_and_carries_no_roles(start, discord_fake):
    agent = ScriptedAgent()
    await start(agent)
    await discord_fake.send_message(author_id=USER, content="hi", channel_id=USER_DM)
    await discord_fake.wait_for_bot_messages(USER_DM)
    (incoming,) = agent.received
    assert not incoming.is_group and incoming.roles == () and incoming.chat == str(USER_DM)


async def test_messages_from_other_bots_are_ignored(start, discord_fake):
    agent = ScriptedAgent()
    await start(agent)
    await discord_fake.send_message(author_id=OTHER_BOT, content="beep", channel_id=USER_DM,
                                    author_is_bot=True)
    await discord_fake.send_message(author_id=USER, content="control", channel_id=USER_DM)
    await discord_fake.wait_for_bot_messages(USER_DM)
    assert [m.text for m in agent.received] == ["control"]


async def test_messages_a_webhook_posts_are_ignored_like_a_bots(start, discord_fake):
    agent = ScriptedAgent()
    await start(agent)
    await discord_fake.send_message(author_id=USER, name="Ada", content="fetch example.com",
                                    channel_id=CHANNEL, guild_id=GUILD.id, mentions_bot=True,
                                    webhook=True)
    await discord_fake.send_message(author_id=USER, content="control", channel_id=USER_DM)
    await discord_fake.wait_for_bot_messages(USER_DM)
    assert [m.text for m in agent.received] == ["control"]


async def test_a_reply_to_the_bot_counts_as_addressing_it_without_a_mention(start, discord_fake):
    agent = ScriptedAgent(Done("first answer"))
    await start(agent)
    await discord_fake.send_message(author_id=USER, content="one", channel_id=CHANNEL, guild_id=GUILD.id,
                                    mentions_bot=True)
    (answer,) = await discord_fake.wait_for_bot_messages(CHANNEL)
    await discord_fake.send_message(author_id=USER, content="and two", channel_id=CHANNEL,
                                    guild_id=GUILD.id, reply_to=int(answer["id"]))
    await discord_fake.wait_for_bot_messages(CHANNEL, count=2)
    assert [m.text for m in agent.received] == ["one", "and two"]


async def test_a_bare_mention_asks_the_agent_for_help(start, discord_fake):
    agent = ScriptedAgent()
    await start(agent)
    await discord_fake.send_message(author_id=USER, content="", channel_id=CHANNEL, guild_id=GUILD.id,
                                    mentions_bot=True)
    await discord_fake.wait_for_bot_messages(CHANNEL)
    assert [m.text for m in agent.received] == ["/help"]


async def test_tool_progress_is_one_status_message_edited_in_place(start, discord_fake):
    agent = ScriptedAgent(ToolStarted("c1", "fs_read", {"path": "a"}), ToolProgress("c1", "fs_read", "50%"),
                          ToolFinished("c1", "fs_read", True, "read 3 lines"), Done("Here it is."))
    await start(agent)
    await discord_fake.send_message(author_id=USER, content="read a", channel_id=USER_DM)
    await discord_fake.wait_for_text(USER_DM, "Here it is.")
    # Edits of the status line are at most one per interval: its last one may follow the answer.
    await discord_fake.wait_for_text(USER_DM, "✅ `fs_read` — read 3 lines")
    status, answer = discord_fake.bot_messages(USER_DM)
    assert status["content"] == "✅ `fs_read` — read 3 lines" and answer["content"] == "Here it is."
    assert len(discord_fake.requests_to("POST", f"/channels/{USER_DM}/messages")) == 2
    assert discord_fake.requests_to("PATCH", f"/channels/{USER_DM}/messages/{status['id']}")


async def test_a_private_notice_in_a_guild_goes_by_dm_and_not_into_the_channel(start, discord_fake):
    agent = ScriptedAgent(Notice("your code is SECRET42", private=True))
    await start(agent)
    await discord_fake.send_message(author_id=USER, content="hi", channel_id=CHANNEL, guild_id=GUILD.id,
                                    mentions_bot=True)
    await discord_fake.wait_for(lambda: discord_fake.dm_channel_of(USER) is not None)
    (dm,) = await discord_fake.wait_for_bot_messages(discord_fake.dm_channel_of(USER))
    assert dm["content"] == "your code is SECRET42"
    assert discord_fake.bot_messages(CHANNEL) == []


async def test_when_dms_are_refused_the_channel_is_told_without_the_private_text(start, discord_fake):
    discord_fake.refuse_dms.add(USER)
    agent = ScriptedAgent(Notice("your code is SECRET42", private=True))
    await start(agent)
    await discord_fake.send_message(author_id=USER, content="hi", channel_id=CHANNEL, guild_id=GUILD.id,
                                    mentions_bot=True)
    (told,) = await discord_fake.wait_for_bot_messages(CHANNEL)
    assert told["content"] == DM_REFUSED
    assert all("SECRET42" not in m["content"] for m in discord_fake.messages.values())


async def test_an_approval_request_goes_to_the_requester_by_dm_when_configured(start, discord_fake):
    view = ApprovalView(id="A" * 16, tool="fs_write", risk="medium", summary="Write 3 bytes to a.txt",
                        sender=f"discord:{USER}", chat=str(CHANNEL), channel="discord", args={},
                        expires_at=4_000_000_000, always="files in the workspace root")
    agent = ScriptedAgent(ApprovalNeeded(view), Done("", waiting_for_approval=True))
    await start(agent, approvals_in_dm=True)
    await discord_fake.send_message(author_id=USER, content="write", channel_id=CHANNEL, guild_id=GUILD.id,
                                    mentions_bot=True)
    await discord_fake.wait_for(lambda: discord_fake.dm_channel_of(USER) is not None)
    dm_channel = discord_fake.dm_channel_of(USER)
    request = await discord_fake.wait_for_buttons(dm_channel)
    ids = [b["custom_id"] for row in request["components"] for b in row["components"]]
    assert ids == [f"myclaw:ap:{'A' * 16}:a", f"myclaw:ap:{'A' * 16}:d", f"myclaw:ap:{'A' * 16}:s"]
    assert "Write 3 bytes to a.txt" in request["content"] and "medium" in request["content"]
    await discord_fake.wait_for(lambda: agent.refs)
    assert agent.refs == {"A" * 16: f"{dm_channel}:{request['id']}"}
    assert discord_fake.bot_messages(CHANNEL) == []


async def test_slash_commands_are_synced_at_start_with_the_agents_descriptions(start, discord_fake):
    await start(ScriptedAgent())
    synced = {c["name"]: c["description"] for c in discord_fake.commands}
    assert set(synced) == {"whoami", "tools", "new", "stop", "undo", "usage"}
    assert synced["whoami"] == "Who you are to me"


async def test_a_slash_command_in_an_unlisted_guild_is_refused_without_the_agent(start, discord_fake):
    agent = ScriptedAgent()
    await start(agent)
    slash = await discord_fake.slash(name="tools", user_id=USER, channel_id=UNLISTED.channel_ids[0],
                                     guild_id=UNLISTED.id)
    await discord_fake.wait_for(lambda: discord_fake.interaction_callbacks(slash["id"]))
    (callback,) = discord_fake.interaction_callbacks(slash["id"])
    assert callback.json["type"] == 4 and callback.json["data"]["flags"] == EPHEMERAL
    assert agent.received == []


async def test_a_slash_command_the_agent_stays_silent_on_leaves_no_thinking_message(start, discord_fake):
    agent = ScriptedAgent()
    agent.events = []                                    # e.g. an ignored sender
    await start(agent)
    slash = await discord_fake.slash(name="whoami", user_id=USER, channel_id=USER_DM)
    await discord_fake.wait_for(lambda: discord_fake.requests_to("DELETE", "/webhooks/"))
    assert [m.text for m in agent.received] == ["/whoami"]
    assert discord_fake.followups(slash["token"]) == []


async def test_a_refused_message_content_intent_gives_one_clear_line(tmp_path):
    async with FakeDiscord(refuse_privileged_intents=True) as fake:
        with fake.patched():
            config = make_config(tmp_path, {"discord": {"guild_ready_timeout": 0.05}},
                                 env={"DISCORD_BOT_TOKEN": fake.token})
            channel = discord_bot.create(config, ScriptedAgent())
            with pytest.raises(ChannelError, match="Message Content intent") as failure:
                await channel.start()
    assert "\n" not in str(failure.value) and not channel.connected


async def test_an_unreachable_api_gives_one_clear_line(start, monkeypatch):
    with socket.socket() as probe:                       # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    monkeypatch.setattr(discord.http.Route, "BASE", f"http://127.0.0.1:{closed_port}/api/v10")
    with pytest.raises(ChannelError, match="cannot reach") as failure:
        await start(ScriptedAgent())
    assert "\n" not in str(failure.value)


async def test_a_missing_token_is_a_clear_error(tmp_path):
    config = make_config(tmp_path, env={})
    with pytest.raises(ChannelError, match="DISCORD_BOT_TOKEN is not set"):
        await discord_bot.create(config, ScriptedAgent()).start()


@pytest.mark.parametrize("token", ["notatoken", "1058946072459456642", "a" * 64,
                                   "MTA1ODk0NjA3MjQ1OTQ1NjY0Mg.GhX2qN.\u00e9" + "x" * 30,
                                   "Bot.MTA1ODk0NjA3MjQ1OTQ1NjY0Mg.GhX2qN", "MTA1.GhX2qN.x"])
def test_a_token_not_shaped_like_a_bot_token_is_refused_without_showing_it(tmp_path, token):
    config = make_config(tmp_path, env={"DISCORD_BOT_TOKEN": token})
    with pytest.raises(ChannelError, match="does not look like a bot token") as refused:
        discord_bot.check_config(config)
    assert token not in str(refused.value) and "Reset Token" in str(refused.value)


@pytest.mark.parametrize("token", ["MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs",
                                   "MTA1ODk0NjA3MjQ1OTQ1NjY0Mg.GhX2qN.abcdefghijklmnopqrstuvwxyz"
                                   "0123456789_-"])
def test_tokens_shaped_as_discord_issues_them_pass_the_check(tmp_path, token):
    config = make_config(tmp_path, env={"DISCORD_BOT_TOKEN": token})
    assert discord_bot.check_config(config) == token


async def test_stop_disconnects_and_connected_turns_false(start, discord_fake):
    channel = await start(ScriptedAgent())
    assert channel.connected
    await channel.stop()
    assert not channel.connected


async def test_an_approval_request_falls_back_to_the_channel_when_dms_are_refused(start, discord_fake):
    discord_fake.refuse_dms.add(USER)
    view = ApprovalView(id="B" * 16, tool="fs_write", risk="medium", summary="Write a.txt",
                        sender=f"discord:{USER}", chat=str(CHANNEL), channel="discord", args={},
                        expires_at=4_000_000_000)
    agent = ScriptedAgent(ApprovalNeeded(view))
    await start(agent, approvals_in_dm=True)
    await discord_fake.send_message(author_id=USER, content="write", channel_id=CHANNEL, guild_id=GUILD.id,
                                    mentions_bot=True)
    request = await discord_fake.wait_for_buttons(CHANNEL)
    await discord_fake.wait_for(lambda: agent.refs)
    assert agent.refs == {"B" * 16: f"{CHANNEL}:{request['id']}"}


def approval_for(user: int, approval_id: str = "C" * 16) -> ApprovalView:
    return ApprovalView(id=approval_id, tool="fs_write", risk="medium", summary="Write a.txt",
                        sender=f"discord:{user}", chat=str(USER_DM), channel="discord", args={},
                        expires_at=4_000_000_000)


async def test_text_before_an_approval_is_posted_once_and_above_the_buttons(start, discord_fake):
    agent = ScriptedAgent(TextDelta("I'll write "), TextDelta("it."), ApprovalNeeded(approval_for(USER)),
                          Done("I'll write it.", waiting_for_approval=True))
    await start(agent)
    await discord_fake.send_message(author_id=USER, content="write", channel_id=USER_DM)
    await discord_fake.wait_for_buttons(USER_DM)
    await discord_fake.wait_for(lambda: agent.refs)
    posted = [m["content"] for m in discord_fake.bot_messages(USER_DM)]
    assert posted[0] == "I'll write it." and "Approval needed" in posted[1] and len(posted) == 2


async def test_text_before_a_tool_and_the_final_answer_are_both_shown_in_order(start, discord_fake):
    agent = ScriptedAgent(TextDelta("OK."), ToolStarted("c1", "time_now", {}),
                          ToolFinished("c1", "time_now", True), TextDelta("OK."), Done("OK."))
    await start(agent)
    await discord_fake.send_message(author_id=USER, content="time?", channel_id=USER_DM)
    await discord_fake.wait_for_bot_messages(USER_DM, count=3)
    await discord_fake.wait_for_text(USER_DM, "✅ `time_now`")   # the status line's last edit
    posted = [m["content"] for m in discord_fake.bot_messages(USER_DM)]
    assert posted == ["OK.", "✅ `time_now`", "OK."]


def test_the_bot_asks_discord_only_for_the_intents_it_uses():
    from channels.discord.gateway import intents

    wanted = intents()
    enabled = {name for name, value in wanted if value}
    assert enabled == {"guilds", "guild_messages", "dm_messages", "message_content"}


def test_starting_the_client_does_not_warn_about_voice_which_myclaw_never_uses():
    import subprocess
    import sys
    from pathlib import Path

    probe = (
        "import logging, discord\n"
        "from discord.voice_client import VoiceClient\n"
        "logging.basicConfig(format='%(name)s: %(message)s')\n"
        "print('would warn:', VoiceClient.warn_nacl or VoiceClient.warn_dave)\n"
        "from channels.discord.gateway import MyclawClient\n"
        "MyclawClient(None, None, intents=discord.Intents.none())\n"
        "logging.getLogger('discord.client').warning('other warnings still show')\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60, cwd=Path(__file__).resolve().parents[3])
    assert proc.stdout.strip() == "would warn: True", proc.stderr  # voice libraries are absent
    assert "voice will NOT be supported" not in proc.stderr
    assert "discord.client: other warnings still show" in proc.stderr
