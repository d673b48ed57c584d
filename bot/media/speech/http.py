"""Any service speaking the OpenAI `POST /v1/audio/speech` API (OpenAI, or a self-hosted one).

`{"model", "input", "voice", "response_format": "opus"}` in, the audio bytes out (OGG/Opus from
OpenAI; whatever a service sends instead is re-encoded). Configured by `[media.speech]
base_url`, `model`, `voice` (and `voices` per language); the key, optional for a local server,
comes from MYCLAW_TTS_API_KEY and never appears in an error or a log line.
"""

from __future__ import annotations

import logging
from typing import Any

import aiohttp

from bot.media.speech.seam import SpeechError

log = logging.getLogger(__name__)

MAX_AUDIO_BYTES = 20_000_000


class HttpSpeechEngine:
    name = "http"

    def __init__(self, *, base_url: str, model: str, voice: str, voices: dict[str, str],
                 timeout: float, key: str):
        base = base_url.strip().rstrip("/")
        self.base_url = base[:-3] if base.endswith("/v1") else base
        self.model = model.strip()
        self.voice = voice.strip() or "alloy"
        self.voices = dict(voices)
        self.timeout = timeout
        self._key = key

    @property
    def available(self) -> bool:
        return bool(self.base_url and self.model)

    @property
    def priced_model(self) -> str:
        return self.model

    def voice_for(self, language: str) -> str:
        return self.voices.get(language) or self.voices.get(language.split("-")[0]) or self.voice

    async def synthesize(self, text: str, language: str) -> bytes:
        body: dict[str, Any] = {"model": self.model, "input": text,
                                "voice": self.voice_for(language), "response_format": "opus"}
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        url = f"{self.base_url}/v1/audio/speech"
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout)) as http, \
                    http.post(url, json=body, headers=headers) as response:
                status = response.status
                data = await _body(response)
        except TimeoutError as exc:
            raise SpeechError("the speech service did not answer in time") from exc
        except aiohttp.ClientError as exc:
            log.warning("speech service unreachable: %s", type(exc).__name__)
            raise SpeechError("the speech service is unreachable") from exc
        if status in (401, 403):
            raise SpeechError("the speech service refused the key (MYCLAW_TTS_API_KEY)")
        if status >= 400:
            log.warning("speech service answered HTTP %s", status)
            raise SpeechError(f"the speech service failed (HTTP {status})")
        if not data or len(data) > MAX_AUDIO_BYTES:
            raise SpeechError("the speech service sent no usable audio")
        return data


async def _body(response: aiohttp.ClientResponse) -> bytes:
    """The whole body, but no more than MAX_AUDIO_BYTES + 1 of it (then it is refused)."""
    data = bytearray()
    async for chunk in response.content.iter_chunked(65_536):
        data += chunk
        if len(data) > MAX_AUDIO_BYTES:
            break
    return bytes(data)
