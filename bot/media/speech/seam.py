"""The seam every speech engine sits behind.

An engine turns text in a language into audio bytes (any format libsndfile reads), says whether
it can run here, and which model its usage is priced as ("" = free: no usage row, no budget
check). Everything else (encoding, money, channels) is the same for every engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class SpeechError(Exception):
    """Speaking failed; `message` is one line for the person (no key, no URL)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class SpeechEngine(Protocol):
    name: str

    @property
    def available(self) -> bool: ...

    @property
    def priced_model(self) -> str: ...

    async def synthesize(self, text: str, language: str) -> bytes: ...


@dataclass(frozen=True)
class Voice:
    """A spoken answer: OGG/Opus bytes and their length."""

    data: bytes
    duration: float
