"""Audio → OGG/Opus, the one format every channel takes as a voice message (Telegram shows it
with a waveform, WhatsApp as a voice note, Discord and Slack play it inline).

libsndfile through `soundfile` reads what the engines give (WAV from espeak-ng; OGG/Opus, MP3,
FLAC or WAV from a speech service) and writes OGG/Opus since libsndfile 1.0.29; the wheels
bundle 1.2, so nothing else is needed on the system. Opus takes 8, 12, 16, 24 or 48 kHz: other
rates (espeak-ng speaks at 22,050 Hz) are resampled to 48 kHz first, linearly, which is plenty
for speech. Already OGG/Opus audio is passed through untouched.

These functions run in the worker pool (bot.toolbox.offload): decoding and encoding is CPU work
whose cost the text decides. Nothing is imported until the first job.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

OPUS_RATES = (8000, 12000, 16000, 24000, 48000)
TARGET_RATE = 48_000


class AudioError(Exception):
    """The audio could not be read (not a format libsndfile knows, or empty)."""


@dataclass(frozen=True)
class AudioFacts:
    format: str         # "OGG", "WAV", ...
    subtype: str        # "OPUS", "PCM_16", ...
    sample_rate: int
    channels: int
    duration: float     # seconds


def facts(data: bytes) -> AudioFacts:
    """What `data` is, read by libsndfile from its content (never from a name)."""
    import soundfile

    try:
        info = soundfile.info(io.BytesIO(data))
    except (RuntimeError, soundfile.LibsndfileError) as exc:
        raise AudioError(f"unreadable audio: {exc}") from exc
    return AudioFacts(info.format, info.subtype, int(info.samplerate), int(info.channels),
                      float(info.duration))


def to_ogg_opus(data: bytes) -> tuple[bytes, float]:
    """`data` as mono OGG/Opus, and its duration in seconds."""
    known = facts(data)
    if known.format == "OGG" and known.subtype == "OPUS" and known.duration > 0:
        return data, known.duration
    import numpy
    import soundfile

    try:
        samples, rate = soundfile.read(io.BytesIO(data), dtype="float32", always_2d=True)
    except (RuntimeError, soundfile.LibsndfileError) as exc:
        raise AudioError(f"unreadable audio: {exc}") from exc
    if not len(samples):
        raise AudioError("the audio is empty")
    mono = samples.mean(axis=1)
    if rate not in OPUS_RATES:
        count = max(1, round(len(mono) * TARGET_RATE / rate))
        mono = numpy.interp(numpy.arange(count) * (rate / TARGET_RATE),
                            numpy.arange(len(mono)), mono).astype("float32")
        rate = TARGET_RATE
    out = io.BytesIO()
    soundfile.write(out, mono, rate, format="OGG", subtype="OPUS")
    return out.getvalue(), len(mono) / rate
