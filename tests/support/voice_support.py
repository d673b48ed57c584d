"""What the voice-reply tests share: a message to the real agent whose voice reply (if any) is
awaited, and the checks a voice message must pass, read by libsndfile from the bytes."""

from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Any

import soundfile

from bot.core.events import AudioPart, CollectingSink, IncomingMessage, SpeechOut

ADA = "telegram:5"
SENDERS = {ADA: "supervised"}
TELEGRAM_VOICE_LIMIT = 50_000_000      # sendVoice takes up to 50 MB
OPUS_RATES = (8000, 12000, 16000, 24000, 48000)


async def say(app: Any, words: str = "", *, sender: str = ADA,
              voice_note: bytes = b"") -> CollectingSink:
    sink = CollectingSink()
    parts = (AudioPart(voice_note),) if voice_note else ()
    await app.agent.handle(IncomingMessage(sender=sender, chat="c", text=words, parts=parts,
                                           channel=sender.partition(":")[0]), sink)
    await app.agent.voice.settled()
    return sink


def assert_voice_message(data: bytes, duration: float | None = None) -> Any:
    """OGG/Opus (its header and codec, not a name), mono, a rate Opus takes, some length: its
    rate and decoded duration."""
    info = soundfile.info(io.BytesIO(data))
    assert data[:4] == b"OggS" and b"OpusHead" in data[:200]
    assert (info.format, info.subtype, info.channels) == ("OGG", "OPUS", 1)
    assert info.samplerate in OPUS_RATES
    # The length as decoded, sample by sample (libsndfile's header estimate can be a second off).
    decoded = len(soundfile.read(io.BytesIO(data), dtype="int16")[0]) / info.samplerate
    assert decoded > 0 and len(data) < TELEGRAM_VOICE_LIMIT
    if duration is not None:
        assert abs(decoded - duration) < 0.1, (decoded, duration)
    return SimpleNamespace(samplerate=info.samplerate, channels=info.channels, duration=decoded)


def voice_of(speech: SpeechOut) -> Any:
    return assert_voice_message(speech.data, speech.duration)
