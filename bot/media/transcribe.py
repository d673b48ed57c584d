"""Voice notes to text through an OpenAI-compatible speech-to-text service.

`POST {base_url}/v1/audio/transcriptions`, multipart with `file` and `model`, answered with
`{"text": "..."}` — the protocol of hosted services and of self-hosted whisper servers alike.
Configured by `[media.transcription] base_url` and `model`; the key (optional for a local
server) comes from MYCLAW_STT_API_KEY. A transcription is a paid call: the caller goes through
the gate (bot.money.gate) and charges `cost_of(data)`, `price_per_minute` times the length,
read from the service's answer when it says (`duration`), else estimated from the size at the
bitrate of a voice note (never less than one second). Every failure is a `TranscriptionError` with one line
for the sender; the key never appears in it.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import aiohttp

from bot.language.phrase import Phrase

log = logging.getLogger(__name__)

HOW_TO_ENABLE = Phrase(
    "I can't listen to voice notes yet: transcription is not set up. The operator can enable it "
    "in myclaw.toml with a speech-to-text service that speaks the OpenAI API:\n{config}\nand the "
    "key in the environment variable MYCLAW_STT_API_KEY. Meanwhile, please type your message.",
    config="[media.transcription]\nbase_url = \"https://api.openai.com\"   # or a local whisper "
           "server\nmodel = \"whisper-1\"")
MAX_TRANSCRIPT_CHARS = 20_000
# Voice notes are Opus at about 16 kbit/s (Telegram, WhatsApp): bytes per second of speech. A
# file at a higher bitrate is charged for longer than it lasts: a budget errs on the safe side.
VOICE_BYTES_PER_SECOND = 2_000


class TranscriptionError(Exception):
    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class Transcriber:
    def __init__(self, config: Any):
        section = config["media"]["transcription"]
        base = section["base_url"].strip().rstrip("/")
        self.base_url = base[:-3] if base.endswith("/v1") else base
        self.model = section["model"].strip()
        self.timeout = float(section["timeout_seconds"])
        self.price_per_minute = float(section["price_per_minute"])
        self._key = config.secret("MYCLAW_STT_API_KEY")

    @property
    def configured(self) -> bool:
        return bool(self.base_url and self.model)

    def cost_of(self, data: bytes) -> float:
        """What transcribing `data` costs (see the module docstring)."""
        seconds = max(1.0, len(data) / VOICE_BYTES_PER_SECOND)
        return self.price_per_minute * seconds / 60

    async def transcribe(self, data: bytes, name: str, media_type: str) -> str:
        form = aiohttp.FormData()
        form.add_field("model", self.model)
        form.add_field("response_format", "json")
        form.add_field("file", data, filename=name or "voice.ogg",
                       content_type=media_type or "application/octet-stream")
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        url = f"{self.base_url}/v1/audio/transcriptions"
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout)) as http, \
                    http.post(url, data=form, headers=headers) as response:
                body = await response.read()
                status = response.status
        except TimeoutError as exc:
            raise TranscriptionError("the transcription service did not answer in time") from exc
        except aiohttp.ClientError as exc:
            log.warning("transcription service unreachable: %s", type(exc).__name__)
            raise TranscriptionError("the transcription service is unreachable") from exc
        return _text(status, body)


def _text(status: int, body: bytes) -> str:
    if status in (401, 403):
        raise TranscriptionError("the transcription service refused the key (MYCLAW_STT_API_KEY)")
    if status >= 400:
        log.warning("transcription service answered HTTP %s", status)
        raise TranscriptionError(f"the transcription service failed (HTTP {status})")
    try:
        text = json.loads(body)["text"]
    except (ValueError, KeyError, TypeError) as exc:
        raise TranscriptionError("the transcription service sent an answer I could not read") from exc
    if not isinstance(text, str):
        raise TranscriptionError("the transcription service sent an answer I could not read")
    return text.strip()[:MAX_TRANSCRIPT_CHARS]
