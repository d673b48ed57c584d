"""A fake OpenAI-compatible speech-to-text service on 127.0.0.1.

    async with FakeSTT(transcript="hello") as stt:
        config: [media.transcription] base_url = stt.base_url
        ...
        stt.requests[0].model, .filename, .data, .authorization

`POST /v1/audio/transcriptions` (multipart: `file`, `model`, optional `response_format`) answers
`{"text": transcript}`; `fail_with = 503` makes it answer that status instead.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from aiohttp import web


@dataclass
class STTRequest:
    model: str
    filename: str
    content_type: str
    data: bytes
    authorization: str


class FakeSTT:
    def __init__(self, transcript: str = "hello from a voice note"):
        self.transcript = transcript
        self.fail_with: int | None = None
        self.requests: list[STTRequest] = []
        self.base_url = ""
        self._runner: web.AppRunner | None = None
        self._changed = asyncio.Condition()

    async def __aenter__(self) -> FakeSTT:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.base_url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _transcribe(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload = form.get("file")
        if not isinstance(upload, web.FileField) or not form.get("model"):
            return web.json_response({"error": {"message": "file and model are required"}}, status=400)
        self.requests.append(STTRequest(str(form["model"]), upload.filename, upload.content_type,
                                        upload.file.read(), request.headers.get("Authorization", "")))
        async with self._changed:
            self._changed.notify_all()
        if self.fail_with is not None:
            return web.json_response({"error": {"message": "unavailable"}}, status=self.fail_with)
        return web.json_response({"text": self.transcript})
