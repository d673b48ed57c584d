"""Discord split across replicas by shard: two real Apps on one PostgreSQL store, each serving
one of two shards of the same bot (discord.py's AutoShardedClient against the fake gateway,
which routes each guild's events to its shard's connection and DMs to shard 0)."""

from __future__ import annotations

import copy
import re

import pytest

from bot.core.errors import ChannelError, ConfigError
from tests.conftest import make_config
from tests.fakes.anthropic_server import reply, text, tool_use
from tests.fakes.discord_server import FakeDiscord, FakeGuild
from tests.support.runtime_tools import Writer

ON_SHARD_0 = FakeGuild(id=7_000_000_004_194_305, channel_ids=(7_000_000_004_194_315,))
ON_SHARD_1 = FakeGuild(id=7_000_000_000_000_001, channel_ids=(7_000_000_000_000_011,))
ALICE = 4_200_000_000_000_001
DISCORD = {"guilds": [ON_SHARD_0.id, ON_SHARD_1.id], "guild_ready_timeout": 0.05,
           "shard_count": 2, "approvals_in_dm": True}


@pytest.fixture
def backend_name() -> str:
    return "postgresql"


@pytest.fixture
async def discord_fake():
    async with FakeDiscord(guilds=(ON_SHARD_0, ON_SHARD_1)) as fake:
        with fake.patched():
            assert [FakeDiscord.shard_of(g.id, 2) for g in (ON_SHARD_0, ON_SHARD_1)] == [0, 1]
            yield fake


@pytest.fixture
async def replica(app_factory, discord_fake):
    """`await replica(shard)`: an App serving that shard, its channel started by the App."""
    started = []

    async def start(shard: int):
        app = await app_factory({"senders": {f"discord:{ALICE}": "supervised"},
                                 "discord": {**DISCORD, "shard_ids": [shard]}},
                                env={"DISCORD_BOT_TOKEN": discord_fake.token})
        started.append(app)
        await app.start_channels(["discord"])
        return app

    yield start
    for app in reversed(started):
        await app.stop_channels()


def guilds_of(app) -> set[int]:
    return {g.id for g in app.channels["discord"].client.guilds}


async def test_each_guild_is_served_by_the_one_replica_holding_its_shard(
        replica, discord_fake, fake_anthropic):
    first, second = await replica(0), await replica(1)
    assert (guilds_of(first), guilds_of(second)) == ({ON_SHARD_0.id}, {ON_SHARD_1.id})
    assert sorted(i["shard"] for i in discord_fake.identifies) == [[0, 2], [1, 2]]
    fake_anthropic.script(text("Hello from shard one."))
    channel = ON_SHARD_1.channel_ids[0]
    await discord_fake.send_message(author_id=ALICE, content="hi", channel_id=channel,
                                    guild_id=ON_SHARD_1.id, mentions_bot=True)
    await discord_fake.wait_for_text(channel, "Hello from shard one.")
    await second.agent.queue.drain(5)
    assert len(discord_fake.bot_messages(channel)) == 1
    assert len(fake_anthropic.requests) == 1


async def test_a_second_replica_for_a_shard_already_served_is_refused_in_one_line(
        replica, discord_fake):
    await replica(1)
    with pytest.raises(ChannelError) as refused:
        await replica(1)
    assert "shard 1 of 2" in str(refused.value) and "shard_ids" in str(refused.value)
    assert discord_fake.token not in str(refused.value)
    assert len(discord_fake.identifies) == 1


async def test_an_approval_asked_on_one_replica_and_tapped_on_the_other_runs_once_there(
        replica, discord_fake, fake_anthropic):
    first, second = await replica(0), await replica(1)
    writers = {}
    for app in (first, second):
        writers[app] = Writer()
        app.services.registry.register(writers[app], "tests")
    channel = ON_SHARD_1.channel_ids[0]
    fake_anthropic.script(reply(text("Writing."), tool_use("writer", {"note": "milk"})))
    await discord_fake.send_message(author_id=ALICE, content="write milk", channel_id=channel,
                                    guild_id=ON_SHARD_1.id, mentions_bot=True)
    await discord_fake.wait_for(lambda: discord_fake.dm_channel_of(ALICE) is not None)
    request = copy.deepcopy(await discord_fake.wait_for_buttons(discord_fake.dm_channel_of(ALICE)))
    approve = {b["label"]: b["custom_id"] for row in request["components"]
               for b in row["components"]}["Approve"]
    fake_anthropic.script(text("Written, back in the server."))
    # The tap is a DM interaction: Discord sends it to shard 0, the other replica.
    await discord_fake.click(message_id=int(request["id"]), custom_id=approve, user_id=ALICE)
    await discord_fake.wait_for_text(channel, "Written, back in the server.")
    await first.agent.queue.drain(5)
    late = await discord_fake.click(message_id=int(request["id"]), custom_id=approve,
                                    user_id=ALICE, as_seen=request)   # the old buttons again
    await discord_fake.wait_for(lambda: discord_fake.interaction_callbacks(late["id"]))
    await first.agent.queue.drain(5)
    assert (writers[first].executed, writers[second].executed) == (["milk"], [])
    assert discord_fake.messages[int(request["id"])]["components"] == []
    history = fake_anthropic.last_request.json["messages"]
    assert [m["role"] for m in history] == ["user", "assistant", "user"]


@pytest.mark.parametrize(("discord", "says"), [
    ({"shard_ids": [0]}, "shard_ids needs shard_count"),
    ({"shard_count": 2, "shard_ids": [1, 2]}, "[2] are not below shard_count = 2"),
])
def test_shard_ids_that_cannot_work_are_refused_when_the_config_loads(tmp_path, discord, says):
    with pytest.raises(ConfigError, match=re.escape(says)):
        make_config(tmp_path, {"discord": discord})
