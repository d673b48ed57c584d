"""Audio → OGG/Opus, the one format every channel takes as a voice message (Telegram shows it
with a waveform, WhatsApp as a voice note, Discord and Slack play it inline).

PyAV (FFmpeg's libraries, bundled in its wheels: nothing to install on the system) reads what
the engines give — WAV from espeak-ng; OGG/Opus, MP3, AAC, FLAC or WAV from a speech service —
resamples it to 24 kHz mono with libswresample (all of espeak-ng's 22 kHz output, and the
band speech lives in) and encodes it with libopus tuned for speech (`application=voip`,
complexity 3, 32 kbit/s). libsndfile (`soundfile`) can write OGG/Opus too, but it cannot set
the encoder's complexity: on this machine it spent 0.57 s of CPU on a 300-character answer
(21 s of speech) where this takes 0.20 s, which is most of the time between the text and its
voice. OGG/Opus from a service is passed through untouched (its
length read from the last page's granule position).

These functions run in the worker pool (bot.toolbox.offload): decoding and encoding is CPU work
whose cost the text decides. Nothing is imported until the first job.
"""

from __future__ import annotations

import io

RATE = 24_000                 # what is encoded (decoders play Opus at 48 kHz whatever it was)
GRANULE_RATE = 48_000         # an Ogg/Opus granule position always counts 48 kHz samples
BITRATE = 32_000              # plenty for one voice
OPTIONS = {"application": "voip", "compression_level": "3"}
OGG_PAGE = b"OggS"


class AudioError(Exception):
    """The audio could not be read (not a format FFmpeg knows, or empty)."""


def to_ogg_opus(data: bytes) -> tuple[bytes, float]:
    """`data` as mono OGG/Opus, and its duration in seconds."""
    passed = _ogg_opus_duration(data)
    if passed is not None:
        return data, passed
    import av

    out = io.BytesIO()
    samples = 0
    try:
        with av.open(io.BytesIO(data)) as source, av.open(out, "w", format="ogg") as sink:
            if not source.streams.audio:
                raise AudioError("no audio in it")
            voice = sink.add_stream("libopus", rate=RATE, options=OPTIONS)
            voice.bit_rate = BITRATE
            voice.layout = "mono"
            resampler = av.AudioResampler(format="s16", layout="mono", rate=RATE)
            for frame in [*source.decode(source.streams.audio[0]), None]:
                for mono in resampler.resample(frame):
                    samples += mono.samples
                    for packet in voice.encode(mono):
                        sink.mux(packet)
            for packet in voice.encode(None):
                sink.mux(packet)
    except av.FFmpegError as exc:
        raise AudioError(f"unreadable audio: {exc}") from exc
    if not samples:
        raise AudioError("the audio is empty")
    return out.getvalue(), samples / RATE


def _ogg_opus_duration(data: bytes) -> float | None:
    """The length of OGG/Opus audio (None when `data` is not that): the last page's granule
    position, less the pre-skip, at 48 kHz (RFC 7845)."""
    if not data.startswith(OGG_PAGE) or data[28:36] != b"OpusHead" or len(data) < 47:
        return None
    pre_skip = int.from_bytes(data[38:40], "little")
    last = data.rfind(OGG_PAGE)
    granule = int.from_bytes(data[last + 6:last + 14], "little", signed=True)
    seconds = (granule - pre_skip) / GRANULE_RATE
    return seconds if seconds > 0 else None
