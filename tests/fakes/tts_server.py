"""A fake OpenAI-compatible text-to-speech service on 127.0.0.1.

    async with FakeTTS() as tts:
        config: [media.speech] base_url = tts.base_url
        ...
        tts.requests[0].json["input"], .authorization

`POST /v1/audio/speech` with `{"model", "input", "voice", "response_format"}` answers real audio
made with libsndfile: OGG/Opus by default (what OpenAI sends for "opus"), or WAV with
`sends = "wav"` (a service that ignores the format asked for). `fail_with = 503` answers that
status instead; `hold = True` keeps every answer waiting until `release()` (a slow service),
which is how a test sees a reply sent before its voice without timing anything.
"""

from __future__ import annotations

import asyncio
import io
from dataclasses import dataclass
from typing import Any

import numpy
import soundfile
from aiohttp import web


@dataclass
class TTSRequest:
    json: dict[str, Any]
    authorization: str


def tone(seconds: float = 0.5, rate: int = 24_000, fmt: str = "OGG", subtype: str = "OPUS") -> bytes:
    """A 440 Hz tone as audio bytes of the given container and codec."""
    t = numpy.arange(int(seconds * rate)) / rate
    samples = (0.3 * numpy.sin(2 * numpy.pi * 440 * t)).astype("float32")
    out = io.BytesIO()
    soundfile.write(out, samples, rate, format=fmt, subtype=subtype)
    return out.getvalue()


class FakeTTS:
    def __init__(self) -> None:
        self.fail_with: int | None = None
        self.sends = "opus"
        self.hold = False
        self.requests: list[TTSRequest] = []
        self.base_url = ""
        self._released = asyncio.Event()
        self._runner: web.AppRunner | None = None

    async def __aenter__(self) -> FakeTTS:
        app = web.Application()
        app.router.add_post("/v1/audio/speech", self._speech)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.base_url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._released.set()
        if self._runner is not None:
            await self._runner.cleanup()

    def release(self) -> None:
        self._released.set()

    async def _speech(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if not isinstance(body, dict) or not body.get("model") or not body.get("input"):
            return web.json_response({"error": {"message": "model and input are required"}},
                                     status=400)
        self.requests.append(TTSRequest(body, request.headers.get("Authorization", "")))
        if self.hold:
            await self._released.wait()
        if self.fail_with is not None:
            return web.json_response({"error": {"message": "unavailable", "type": "server_error"}},
                                     status=self.fail_with)
        seconds = max(0.3, len(str(body["input"])) / 15)   # about 15 characters a second
        if self.sends == "wav":
            return web.Response(body=tone(seconds, 22_050, "WAV", "PCM_16"), content_type="audio/wav")
        return web.Response(body=tone(seconds), content_type="audio/ogg")
