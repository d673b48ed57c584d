"""Voice replies on WhatsApp: a voice note answered by voice (auto) as an uploaded OGG/Opus
voice note after the text, through the real channel against the fake Graph API."""

from __future__ import annotations

from tests.channels.whatsapp.conftest import ADA
from tests.fakes.anthropic_server import text
from tests.fakes.stt_server import FakeSTT
from tests.support.voice_support import assert_voice_message


async def test_a_voice_note_is_answered_in_text_then_with_a_voice_note(bot, wa, fake_anthropic):
    async with FakeSTT(transcript="what's the weather tomorrow") as stt:
        started = await bot(media={"transcription": {"base_url": stt.base_url,
                                                     "model": "whisper-1"}})
        fake_anthropic.script(text("Sunny and warm."))
        await started.driver.media(ADA, "audio", b"OggS\x00opus-voice", "audio/ogg; codecs=opus",
                                   voice=True)
        voice = await wa.wait_for(lambda m: m.to == ADA and m.type == "audio")
        await started.app.agent.voice.settled()
    sent = [m for m in wa.sent if m.to == ADA]
    assert [m.type for m in sent][-2:] == ["text", "audio"] and sent[-2].text == "Sunny and warm."
    assert voice.body["audio"]["voice"] is True
    (upload,) = [u for u in wa.uploads if u.media_id == voice.body["audio"]["id"]]
    assert upload.media_type == "audio/ogg"
    assert_voice_message(upload.data)
