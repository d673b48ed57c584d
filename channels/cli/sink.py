"""What the agent sends to the terminal, as lines of text (styled when the terminal shows colours).

Terminal control characters in what the model, a tool or a web page wrote (ESC sequences can
erase or rewrite lines, retitle the window or set the clipboard) are shown, never obeyed: an
approval prompt must look exactly like what will run. Newline and tab stay.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol, TextIO

from bot.core.approval_cards import ApprovalBatchNeeded, ApprovalNeeded, ApprovalView
from bot.core.events import (
    Done,
    ErrorEvent,
    Event,
    FileOut,
    Notice,
    SpeechOut,
    TextDelta,
    ToolFinished,
    ToolProgress,
    ToolStarted,
)
from bot.language.catalogs import translator
from bot.language.translator import Translator
from channels.cli import texts

_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
KEEP_VOICE_FILES = 20     # the newest voice replies kept in the voice folder


class Writer(Protocol):
    """Where the terminal's text goes: plain on a pipe, above the prompt on a terminal."""

    def write(self, text: str, style: str = "") -> None: ...


class PlainWriter:
    """Text as it is, for a pipe or a file (never colours)."""

    def __init__(self, out: TextIO):
        self.out = out

    def write(self, text: str, style: str = "") -> None:
        self.out.write(text)
        self.out.flush()


class TerminalSink:
    def __init__(self, writer: Writer,
                 on_approval: Callable[[tuple[ApprovalView, ...]], Awaitable[None]] | None = None,
                 voice_dir: Path | None = None,
                 reader: Callable[[], Translator] = lambda: translator(None)):
        self.writer = writer
        self.voice_dir = voice_dir   # where spoken answers are saved (None: not saved)
        self.reader = reader   # the terminal's words now (they follow /language)
        self.muted = False  # once the terminal has said bye, late output of a turn is dropped
        self.streamed = False
        self.approvals: list[tuple[ApprovalView, ...]] = []   # one entry per prompt
        self._on_approval = on_approval

    def write(self, text: str, style: str = "") -> None:
        if not self.muted:
            self.writer.write(_CONTROLS.sub(_visible, text), style)

    def line(self, text: str, style: str = "") -> None:
        self.write(f"{text}\n", style)

    def say(self, message: str, /, **values: object) -> str:
        """A message of `texts` in the terminal's language."""
        return self.reader()._(message, **values)

    def end_line(self) -> None:
        """Streamed text stops mid-line: what comes next starts on a line of its own."""
        if self.streamed:
            self.write("\n")
            self.streamed = False

    def withdraw(self, approval_ids: set[str]) -> list[tuple[ApprovalView, ...]]:
        """Drop the waiting prompts that ask about `approval_ids` (answered elsewhere)."""
        gone = [views for views in self.approvals if {view.id for view in views} & approval_ids]
        self.approvals = [views for views in self.approvals if views not in gone]
        return gone

    async def emit(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            if not self.streamed:
                self.write(texts.BOT, "class:bot")
            self.streamed = True
            self.write(event.text)
        elif isinstance(event, Done):
            if self.streamed:
                self.write("\n")
            elif event.text:
                self.write(texts.BOT, "class:bot")
                self.line(event.text)
            self.streamed = False
        elif isinstance(event, Notice):
            tr = self.reader()
            self.line(tr.say(event.text), "class:notice")
            for button in event.buttons:   # no buttons in a terminal: show what to type
                self.line(self.say(texts.BUTTON, label=tr.say(button.label), command=button.command))
        elif isinstance(event, ErrorEvent):
            self.line(self.say(texts.ERROR, message=self.reader().say(event.message)), "class:error")
        elif isinstance(event, SpeechOut):
            await self._voice(event)
        elif isinstance(event, ApprovalNeeded | ApprovalBatchNeeded):
            views = (event.approval,) if isinstance(event, ApprovalNeeded) else event.approvals
            self.approvals.append(tuple(views))
            if self._on_approval is not None:
                await self._on_approval(tuple(views))
        else:
            self._activity(event)

    async def _voice(self, event: SpeechOut) -> None:
        """A terminal cannot show a voice message: it is saved, and its path shown to play."""
        if self.voice_dir is None:
            return
        try:
            path = await asyncio.to_thread(save_voice, self.voice_dir, event.data)
        except OSError as exc:
            self.line(self.say(texts.VOICE_NOT_SAVED, reason=exc.strerror or exc), "class:notice")
            return
        self.line(self.say(texts.VOICE_OUT, seconds=event.duration, path=path), "class:notice")

    def _activity(self, event: Event) -> None:
        if isinstance(event, ToolStarted):
            if self.streamed:
                self.write("\n")
            self.line(self.say(texts.TOOL_STARTED, tool=event.tool), "class:tool")
            self.streamed = False
        elif isinstance(event, ToolProgress):
            self.line(self.say(texts.TOOL_PROGRESS, text=self.reader().say(event.text)),
                      "class:tool")
        elif isinstance(event, ToolFinished) and not event.ok:
            self.line(self.say(texts.TOOL_FAILED, tool=event.tool,
                               summary=self.reader().say(event.summary)), "class:error")
        elif isinstance(event, FileOut):
            caption = f" — {event.caption}" if event.caption else ""
            self.line(self.say(texts.FILE_OUT, name=event.path or event.name, size=len(event.data),
                               caption=caption))


def _visible(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def save_voice(folder: Path, data: bytes) -> Path:
    """`data` as a new private file in `folder`, keeping the newest KEEP_VOICE_FILES there."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / f"voice-reply-{time.strftime('%Y%m%d-%H%M%S')}-{time.time_ns() % 10**9:09d}.ogg"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    for old in sorted(folder.glob("voice-reply-*.ogg"))[:-KEEP_VOICE_FILES]:
        old.unlink(missing_ok=True)
    return path
