"""espeak-ng: speech with no service and no key (the Debian package `espeak-ng`).

The text goes in on stdin (never as an argument: an answer starting with "-" is not an option),
UTF-8 (`-b 1`), SSML off; WAV comes out on stdout. Each language gets its own voice; the
operator may name others in `[media.speech] voices`. The process runs with a time limit and is
killed past it, so a stuck engine costs one voice message, never the conversation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil

from bot.media.speech.seam import SpeechError

log = logging.getLogger(__name__)

VOICES = {"en": "en-us", "it": "it", "es": "es"}
MAX_STDERR = 500


class EspeakEngine:
    name = "espeak-ng"
    priced_model = ""      # free: no usage row, no budget check

    def __init__(self, *, voices: dict[str, str], timeout: float, binary: str = "espeak-ng"):
        self.voices = {**VOICES, **voices}
        self.timeout = timeout
        self.path = shutil.which(binary) or ""   # looked up once, not per answer

    @property
    def available(self) -> bool:
        return bool(self.path)

    def voice_for(self, language: str) -> str:
        return self.voices.get(language) or self.voices.get(language.split("-")[0]) or VOICES["en"]

    async def synthesize(self, text: str, language: str) -> bytes:
        if not self.path:
            raise SpeechError("espeak-ng is not installed (apt-get install espeak-ng)")
        process = await asyncio.create_subprocess_exec(
            self.path, "-v", self.voice_for(language), "-b", "1", "--stdin", "--stdout",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE)
        try:
            out, err = await asyncio.wait_for(process.communicate(text.encode("utf-8")),
                                              self.timeout)
        except TimeoutError as exc:
            raise SpeechError("espeak-ng did not finish in time") from exc
        finally:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        if process.returncode != 0 or not out:
            log.warning("espeak-ng failed (exit %s): %s", process.returncode,
                        err[:MAX_STDERR].decode("utf-8", "replace"))
            raise SpeechError("espeak-ng failed")
        return out
