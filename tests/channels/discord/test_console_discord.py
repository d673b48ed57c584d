"""An approval answered in the web console, end to end on Discord: the real App starts the
console and the Discord channel (discord.py against the fake Discord REST + gateway); the
conversation resumes in the chat and the request message shows the outcome without buttons."""

from __future__ import annotations

import aiohttp
import pytest

from bot.ops.console.auth import OPERATOR
from tests.channels.discord.test_discord_e2e import ALICE, ALICE_DM, GUILD, SUPERVISED, UNLISTED
from tests.fakes.anthropic_server import reply, text, tool_use
from tests.fakes.discord_server import FakeDiscord
from tests.support.console_support import CONSOLE, logged_in
from tests.support.runtime_tools import Writer


@pytest.fixture
async def running(app_factory):
    async with FakeDiscord(guilds=(GUILD, UNLISTED)) as fake:
        with fake.patched():
            app = await app_factory({**CONSOLE, **SUPERVISED}, env={"DISCORD_BOT_TOKEN": fake.token})
            writer = Writer()
            app.services.registry.register(writer, "tests")
            async with aiohttp.ClientSession() as http:
                client = await logged_in(app, http)
                await app.start_channels(["discord"])
                yield app, client, fake, writer
                await app.stop_channels()


async def test_approving_in_the_console_edits_the_discord_request_and_runs_the_tool_once(
        running, fake_anthropic):
    app, client, discord_fake, writer = running
    fake_anthropic.script(reply(text("I'll write it."), tool_use("writer", {"note": "milk"})))
    await discord_fake.send_message(author_id=ALICE, content="write milk", channel_id=ALICE_DM)
    request = await discord_fake.wait_for_buttons(ALICE_DM)
    (pending,) = await app.services.approvals.pending()
    fake_anthropic.script(text("Written."))
    page = await client.act(f"/approvals/{pending.id}", {"choice": "approve"})
    assert f"Approved by {OPERATOR}." in page.text
    await discord_fake.wait_for_text(ALICE_DM, "Written.")
    await discord_fake.wait_for(lambda: discord_fake.messages[int(request["id"])]["components"] == [])
    edited = discord_fake.messages[int(request["id"])]["content"]
    assert "Approved" in edited and OPERATOR in edited
    assert writer.executed == ["milk"]
    assert (await app.services.approvals.get(pending.id)).status == "executed"


async def test_an_expired_request_shows_expired_on_discord_not_approved(running, fake_anthropic):
    app, _, discord_fake, writer = running
    fake_anthropic.script(reply(text("I'll write it."), tool_use("writer", {"note": "milk"})))
    await discord_fake.send_message(author_id=ALICE, content="write milk", channel_id=ALICE_DM)
    request = await discord_fake.wait_for_buttons(ALICE_DM)
    (pending,) = await app.services.approvals.pending()
    await app.agent.close_expired(pending)
    await discord_fake.wait_for(lambda: discord_fake.messages[int(request["id"])]["components"] == [])
    edited = discord_fake.messages[int(request["id"])]["content"]
    assert "Expired" in edited and "Approved" not in edited and "myclaw" not in edited
    assert writer.executed == []
