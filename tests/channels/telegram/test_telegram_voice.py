"""Voice replies on Telegram: the real python-telegram-bot uploads the spoken answer with
sendVoice to the fake Bot API, after the text; the uploaded bytes are OGG/Opus as libsndfile
reads them, within sendVoice's limits; /voice on, off and auto decide; a chat whose privacy
settings refuse voice messages gets the audio as a file."""

from __future__ import annotations

import pytest

from channels.telegram import TelegramChannel
from tests.fakes.anthropic_server import text
from tests.fakes.stt_server import FakeSTT
from tests.fakes.telegram_server import channel_overrides
from tests.support.telegram_support import FAST
from tests.support.voice_support import assert_voice_message

ADA = 4242
SENDERS = {f"telegram:{ADA}": "supervised"}


@pytest.fixture
async def bot(app_factory, tg):
    started: list[TelegramChannel] = []

    async def start(**overrides):
        app = await app_factory({"senders": SENDERS, **channel_overrides(tg), **overrides},
                                env={"TELEGRAM_BOT_TOKEN": tg.token})
        channel = TelegramChannel(app.config, app.agent, settings=FAST)
        await channel.start()
        started.append(channel)
        return app

    yield start
    for channel in reversed(started):
        await channel.stop()


def texts(tg) -> list[str]:
    return [m["text"] for (c, _), m in sorted(tg.messages.items(), key=lambda kv: kv[0][1])
            if c == ADA and "text" in m]


def voices(tg) -> list[dict]:
    return [u for u in tg.uploads if u["method"] == "voice"]


async def test_voice_on_sends_the_answer_then_a_voice_message(bot, tg, fake_anthropic):
    app = await bot()
    tg.private_message(ADA, "/voice on")
    await tg.wait_until(lambda: any("Voice replies: on" in t for t in texts(tg)))
    fake_anthropic.script(text("Your train leaves at ten past eight from platform two."))
    tg.private_message(ADA, "when is my train?")
    await tg.wait_until(lambda: len(voices(tg)) == 1)
    await app.agent.voice.settled()
    assert texts(tg)[-1] == "Your train leaves at ten past eight from platform two."
    (voice,) = voices(tg)
    info = assert_voice_message(voice["data"])
    assert voice["chat_id"] == ADA and int(voice["duration"]) == max(1, round(info.duration))
    assert voice["filename"].endswith(".ogg") and info.duration < 60


async def test_auto_answers_a_voice_note_by_voice_and_a_typed_message_in_text(bot, tg, fake_anthropic):
    async with FakeSTT(transcript="is it raining") as stt:
        app = await bot(media={"transcription": {"base_url": stt.base_url, "model": "whisper-1"}})
        fake_anthropic.script(text("No, it is sunny."), text("Still sunny."))
        tg.private_voice(ADA, b"OggS\x00voice-bytes")
        await tg.wait_until(lambda: len(voices(tg)) == 1)
        tg.private_message(ADA, "and now?")
        await tg.wait_until(lambda: "Still sunny." in texts(tg))
        await app.agent.voice.settled()
        assert len(voices(tg)) == 1
        assert_voice_message(voices(tg)[0]["data"])


async def test_voice_off_answers_a_voice_note_in_text_only(bot, tg, fake_anthropic):
    async with FakeSTT(transcript="is it raining") as stt:
        app = await bot(media={"transcription": {"base_url": stt.base_url, "model": "whisper-1"}})
        tg.private_message(ADA, "/voice off")
        await tg.wait_until(lambda: any("Voice replies: off" in t for t in texts(tg)))
        fake_anthropic.script(text("No."))
        tg.private_voice(ADA, b"OggS\x00voice-bytes")
        await tg.wait_until(lambda: "No." in texts(tg))
        await app.agent.voice.settled()
        assert voices(tg) == []


async def test_a_chat_refusing_voice_messages_gets_the_audio_as_a_file(bot, tg, fake_anthropic):
    app = await bot()
    tg.voice_forbidden = True
    tg.private_message(ADA, "/voice on")
    await tg.wait_until(lambda: any("Voice replies: on" in t for t in texts(tg)))
    fake_anthropic.script(text("Here you are."))
    tg.private_message(ADA, "hi")
    await tg.wait_until(lambda: any(u["method"] == "document" for u in tg.uploads))
    await app.agent.voice.settled()
    (document,) = tg.uploads
    assert_voice_message(document["data"])
    assert texts(tg)[-1] == "Here you are."
