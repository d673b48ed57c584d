"""The engine that speaks for this process, and what every engine's audio goes through.

`Speaker` adds what every engine (bot.media.speech.seam) needs after it: the audio re-encoded
as OGG/Opus in the worker pool, checked, with its duration.

`[media.speech] engine` picks it: "http" when `base_url` is set, else "espeak-ng" (local, the
default: voice replies work with no service and no key).
"""

from __future__ import annotations

from typing import Any

from bot.media.speech.seam import SpeechEngine, SpeechError, Voice
from bot.toolbox.offload import OverBudget, run_off_loop

ENCODE_BUDGET_S = 30.0


def engine_name(section: Any) -> str:
    chosen = str(section.get("engine", "") or "").strip()
    return chosen or ("http" if str(section.get("base_url", "")).strip() else "espeak-ng")


def build_engine(config: Any) -> SpeechEngine:
    section = config["media"]["speech"]
    voices = {str(k): str(v) for k, v in section.get("voices", {}).items()}
    timeout = float(section["timeout_seconds"])
    if engine_name(section) == "http":
        from bot.media.speech.http import HttpSpeechEngine
        return HttpSpeechEngine(base_url=section["base_url"], model=section["model"],
                                voice=section["voice"], voices=voices, timeout=timeout,
                                key=config.secret("MYCLAW_TTS_API_KEY"))
    from bot.media.speech.espeak import EspeakEngine
    return EspeakEngine(voices=voices, timeout=timeout)


class Speaker:
    def __init__(self, engine: SpeechEngine):
        self.engine = engine

    async def speak(self, text: str, language: str) -> Voice:
        audio = await self.engine.synthesize(text, language)
        from bot.media.speech import encode
        try:
            data, duration = await run_off_loop(encode.to_ogg_opus, audio, budget=ENCODE_BUDGET_S)
        except encode.AudioError as exc:
            raise SpeechError(f"{self.engine.name} sent audio I could not read") from exc
        except OverBudget as exc:
            raise SpeechError("encoding the voice message took too long") from exc
        if duration <= 0:
            raise SpeechError(f"{self.engine.name} sent silence")
        return Voice(data, duration)
