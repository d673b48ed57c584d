"""Voice replies on Discord: the spoken answer as an OGG/Opus attachment after the text, for
/voice on, auto (a voice message in) and off, through the real discord.py and agent against the
fake Discord (the attachment read back with libsndfile)."""

from __future__ import annotations

import pytest

from channels import discord as discord_bot
from tests.fakes.anthropic_server import text
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.stt_server import FakeSTT
from tests.support.voice_support import assert_voice_message

ALICE = 4_200_000_000_000_001
ALICE_DM = 6_000_000_000_000_001
BASE = {"senders": {f"discord:{ALICE}": "supervised"}, "discord": {"guild_ready_timeout": 0.05}}


@pytest.fixture
async def discord_fake():
    async with FakeDiscord() as fake:
        with fake.patched():
            yield fake


@pytest.fixture
async def bot(app_factory, discord_fake):
    started: list[discord_bot.DiscordChannel] = []

    async def start(**overrides):
        app = await app_factory({**BASE, **overrides}, env={"DISCORD_BOT_TOKEN": discord_fake.token})
        channel = discord_bot.create(app.config, app.agent)
        await channel.start()
        started.append(channel)
        return app

    yield start
    for channel in reversed(started):
        await channel.stop()


async def say(discord_fake, content: str, *attachments) -> None:
    await discord_fake.send_message(author_id=ALICE, content=content, channel_id=ALICE_DM,
                                    attachments=attachments)


async def test_voice_on_posts_the_answer_then_an_ogg_opus_attachment(bot, discord_fake, fake_anthropic):
    app = await bot()
    await say(discord_fake, "/voice on")
    await discord_fake.wait_for(lambda: any("Voice replies: on" in m["content"]
                                            for m in discord_fake.bot_messages(ALICE_DM)))
    fake_anthropic.script(text("The package arrives on Friday."))
    await say(discord_fake, "when does it arrive?")
    await discord_fake.wait_for(lambda: discord_fake.uploads)
    await app.agent.voice.settled()
    contents = [m["content"] for m in discord_fake.bot_messages(ALICE_DM)]
    assert contents[-2:] == ["The package arrives on Friday.", ""]   # the text, then the audio
    (upload,) = discord_fake.uploads
    assert upload["filename"].endswith(".ogg") and upload["channel_id"] == ALICE_DM
    assert_voice_message(upload["data"])


async def test_auto_speaks_to_a_voice_message_and_off_does_not(bot, discord_fake, fake_anthropic):
    async with FakeSTT(transcript="is it raining") as stt:
        app = await bot(media={"transcription": {"base_url": stt.base_url, "model": "whisper-1"}})
        fake_anthropic.script(text("No, it is dry."), text("Dry still."))
        await say(discord_fake, "", ("voice-message.ogg", b"OggS\x00voice", "audio/ogg"))
        await discord_fake.wait_for(lambda: discord_fake.uploads)
        await app.agent.voice.settled()
        assert_voice_message(discord_fake.uploads[0]["data"])
        await say(discord_fake, "/voice off")
        await say(discord_fake, "", ("voice-message.ogg", b"OggS\x00voice", "audio/ogg"))
        await discord_fake.wait_for_text(ALICE_DM, "Dry still.")
        await app.agent.voice.settled()
        assert len(discord_fake.uploads) == 1


async def test_a_typed_message_gets_no_voice_by_default(bot, discord_fake, fake_anthropic):
    app = await bot()
    fake_anthropic.script(text("Plain text."))
    await say(discord_fake, "hi")
    await discord_fake.wait_for_text(ALICE_DM, "Plain text.")
    await app.agent.voice.settled()
    assert discord_fake.uploads == []
