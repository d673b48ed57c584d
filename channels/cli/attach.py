"""`/attach FILE [message]`: a message carrying a file from this computer (its type is checked
by the core, by content)."""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Callable
from pathlib import Path, PurePath

from bot.core.events import AudioPart, DocumentPart, IncomingMessage, Part
from channels.cli import texts
from channels.cli.sink import TerminalSink

AUDIO_SUFFIXES = (".ogg", ".oga", ".opus", ".mp3", ".m4a", ".wav", ".webm", ".flac", ".aac")
MAX_ATTACH_BYTES = 50_000_000   # the core applies the [media] limits; this bounds the read


async def attachment(line: str, sink: TerminalSink,
                     message: Callable[[str, tuple[Part, ...]], IncomingMessage]
                     ) -> IncomingMessage | None:
    """The message `/attach FILE [message]` sends; None after telling the user what is wrong."""
    try:
        words = shlex.split(line)[1:]
    except ValueError as exc:
        sink.line(sink.say(texts.ATTACH_BAD_QUOTES, error=exc))
        return None
    if not words:
        sink.line(sink.say(texts.ATTACH_HELP))
        return None
    path = words[0]
    try:
        data = await asyncio.to_thread(_read_limited, path)
    except OSError as exc:
        sink.line(sink.say(texts.ATTACH_UNREADABLE, path=path, reason=exc.strerror or exc))
        return None
    if data is None:
        sink.line(sink.say(texts.ATTACH_TOO_LARGE, path=path, limit=MAX_ATTACH_BYTES))
        return None
    name = PurePath(path).name
    # An audio file is a recording anyone may have made, not words typed (or spoken) now.
    part: Part = AudioPart(data, name, "audio/ogg", spoken_by_sender=False) \
        if PurePath(name).suffix.lower() in AUDIO_SUFFIXES else DocumentPart(data, name)
    return message(" ".join(words[1:]), (part,))


def _read_limited(path: str) -> bytes | None:
    with Path(path).expanduser().open("rb") as handle:
        data = handle.read(MAX_ATTACH_BYTES + 1)
    return None if len(data) > MAX_ATTACH_BYTES else data
