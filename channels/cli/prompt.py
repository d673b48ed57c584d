"""The terminal's input for a person at a terminal, on prompt_toolkit.

Line editing and history (↑ / ↓, Ctrl-R), a paste is one message however many lines it has
(bracketed paste), Alt-Enter or Esc Enter starts a new line, Tab completes the path after
`/attach`. What the bot writes is printed above the prompt, a line at a time, so what is being
typed is never broken up; colours go with NO_COLOR. A message longer than the limit is refused
at Enter, with the limit named, and stays in the prompt to be shortened.
Ctrl-C on a line with text clears it; on an empty line it is the channel's Ctrl-C (stop the
turn, deny the request, say how to quit). Ctrl-D on an empty line is the end of input.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion, PathCompleter
from prompt_toolkit.document import Document
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input import Input
from prompt_toolkit.input.vt100 import Vt100Input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.output import ColorDepth, Output, create_output
from prompt_toolkit.output.vt100 import Vt100_Output
from prompt_toolkit.shortcuts import CompleteStyle, print_formatted_text
from prompt_toolkit.styles import Style
from prompt_toolkit.validation import ValidationError, Validator

from channels.cli import history, texts
from channels.cli.lines import WOKEN, Kind, Woken

ATTACH = "/attach "
STYLE = {"prompt": "bold ansigreen", "bot": "bold ansicyan", "tool": "ansibrightblack",
         "notice": "ansiyellow", "error": "ansired", "approval": "bold ansiyellow"}


class PromptLines:
    """`screen` is the terminal the prompt is drawn on (stdout, or stderr when stdout goes to
    a file or a pipe: `myclaw chat | tee log`); `copy`, when given, gets a plain transcript of
    the conversation (what was sent and what the bot wrote, never a secret)."""

    reads_while_busy = True
    at_terminal = True

    def __init__(self, *, history: Path | None, on_interrupt: Callable[[], None], limit: int,
                 input: Input | None = None, output: Output | None = None,
                 colours: bool | None = None, screen: TextIO | None = None,
                 copy: TextIO | None = None):
        self.input = input or StaysRaw(sys.stdin)
        self.output = output or terminal_output(screen or sys.stdout)
        self.copy = copy
        colours = not os.environ.get("NO_COLOR") if colours is None else colours
        self.style = Style.from_dict(STYLE if colours else {})
        self.color_depth = None if colours else ColorDepth.DEPTH_1_BIT
        self.writer = PromptWriter(self)
        self._on_interrupt = on_interrupt
        self._draft: Document | None = None   # a message being typed when the prompt was woken
        self._raw: contextlib.ExitStack | None = None
        common: dict[str, Any] = {"input": self.input, "output": self.output, "style": self.style,
                                  "color_depth": self.color_depth, "key_bindings": self._keys(),
                                  "prompt_continuation": texts.CONTINUATION,
                                  # candidates listed above the prompt, as bash does: no
                                  # screen lines kept free below every prompt for a menu
                                  "complete_style": CompleteStyle.READLINE_LIKE,
                                  "reserve_space_for_menu": 0}
        self._sessions: dict[Kind, PromptSession[str]] = {
            "message": PromptSession(history=_history(history), completer=AttachCompleter(),
                                     validator=LengthValidator(limit), **common),
            "answer": PromptSession(history=InMemoryHistory(), **common),
            "secret": PromptSession(history=InMemoryHistory(), is_password=True, **common),
        }

    def _keys(self) -> KeyBindings:
        keys = KeyBindings()

        @keys.add("escape", "enter")   # Alt-Enter sends the same keys as Esc Enter
        def _newline(event: KeyPressEvent) -> None:
            event.current_buffer.insert_text("\n")

        @keys.add("c-c")
        def _interrupt(event: KeyPressEvent) -> None:
            buffer = event.current_buffer
            if buffer.text:
                buffer.reset()
            else:
                self._on_interrupt()

        return keys

    async def read(self, prompt: str, wake: tuple[asyncio.Event, ...],
                   kind: Kind = "message") -> str | Woken | None:
        if any(event.is_set() for event in wake):
            return WOKEN
        session = self._sessions[kind]
        session.app.erase_when_done = False   # a line sent stays on the screen
        draft = None
        if kind == "message":   # a question keeps the draft for the message prompt after it
            draft, self._draft = self._draft, None
        asked = asyncio.ensure_future(session.prompt_async(
            FormattedText([("class:prompt", prompt)]), default=draft or "",
            handle_sigint=False, set_exception_handler=False))
        waits = [asyncio.ensure_future(event.wait()) for event in wake]
        done, _ = await asyncio.wait({asked, *waits}, return_when=asyncio.FIRST_COMPLETED)
        for wait in waits:
            wait.cancel()
        if asked not in done:
            self._withdraw(session, asked, keep=kind != "secret")
        try:
            line = await asked
        except EOFError:
            return None
        except asyncio.CancelledError:
            if asked.cancelled() and asked not in done:
                return WOKEN
            raise
        if self.copy is not None and kind != "secret" and isinstance(line, str):
            self.writer.copied(f"{prompt}{line}\n")
        return line

    def _withdraw(self, session: PromptSession[str], asked: asyncio.Future, keep: bool) -> None:
        """Take the prompt down and off the screen, unless Enter was pressed meanwhile: then
        the line is the answer, as typed. What was typed and not sent is kept for the next
        message prompt: a message's draft, and what went into a question that was withdrawn
        (typed on, after a draft that the question interrupted)."""
        app = session.app
        if not app.is_running:
            asked.cancel()
        elif app.future is not None and not app.future.done():
            typed = session.default_buffer.text
            if keep and typed:
                before = self._draft.text if self._draft is not None else ""
                self._draft = Document(before + typed, len(before) + session.default_buffer.cursor_position)
            app.erase_when_done = True   # no dead prompt left above what comes next
            app.exit(result=WOKEN)   # type: ignore[arg-type]

    def open(self) -> None:
        """The terminal stays in raw mode between prompts too: keys typed while one prompt
        gives way to the next (Ctrl-D, Ctrl-C, the first letters of a message) wait for it,
        instead of being taken by the terminal's own line editing."""
        self._raw = contextlib.ExitStack()
        self._raw.enter_context(self.input.raw_mode())

    def close(self) -> None:
        self.writer.flush()
        if self._raw is not None:
            self._raw.close()
            self._raw = None


def terminal_output(screen: TextIO) -> Output:
    """prompt_toolkit's output on `screen`, never asking where the cursor is: the prompt keeps
    no room for a menu below it, so the answer is not needed, and a terminal that does not
    answer (a pty, some multiplexers) would get a warning printed into the chat."""
    output = create_output(stdout=screen)
    if isinstance(output, Vt100_Output):
        output.enable_cpr = False
    return output


class StaysRaw(Vt100Input):
    """The terminal's input, kept in raw mode while text is printed above the prompt too: in
    the terminal's own (cooked) mode, keys typed at that instant would be echoed out of place
    and Ctrl-D or Ctrl-C taken by the terminal instead of reaching the prompt."""

    def cooked_mode(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()


class PromptWriter:
    """Text above the prompt, a whole line at a time (the rest waits for its newline)."""

    def __init__(self, lines: PromptLines):
        self._lines = lines
        self._pending: list[tuple[str, str]] = []

    def write(self, text: str, style: str = "") -> None:
        self.copied(text)
        self._pending.append((style, text))
        if "\n" in text:
            head, _, tail = text.rpartition("\n")
            self._pending[-1] = (style, head + "\n")
            self.flush()
            if tail:
                self._pending.append((style, tail))

    def copied(self, text: str) -> None:
        """`text` in the plain transcript, when there is one."""
        copy = self._lines.copy
        if copy is not None:
            copy.write(text)
            copy.flush()

    def flush(self) -> None:
        fragments, self._pending = self._pending, []
        if fragments:
            lines = self._lines
            print_formatted_text(FormattedText(fragments), end="", output=lines.output,
                                 style=lines.style, color_depth=lines.color_depth,
                                 include_default_pygments_style=False)


class LengthValidator(Validator):
    def __init__(self, limit: int):
        self.limit = limit

    def validate(self, document: Document) -> None:
        if len(document.text) > self.limit:
            raise ValidationError(   # the cursor stays at the end (not moved to the start)
                cursor_position=len(document.text),
                message=texts.TOO_LONG.format(length=len(document.text), limit=self.limit))


class AttachCompleter(Completer):
    """Paths after `/attach ` (a path opened with a quote may hold spaces); nothing elsewhere."""

    def __init__(self) -> None:
        self.paths = PathCompleter(expanduser=True)

    def get_completions(self, document: Document,
                        complete_event: CompleteEvent) -> Iterable[Completion]:
        text = document.text_before_cursor
        if not text.startswith(ATTACH):
            return
        argument = text[len(ATTACH):]
        quote = argument[:1] if argument[:1] in ("'", '"') else ""
        path = argument[len(quote):]
        if (quote and quote in path) or (not quote and " " in path):
            return   # past the file name: the message itself
        yield from self.paths.get_completions(Document(path, len(path)), complete_event)


def _history(path: Path | None) -> History:
    return FileHistory(str(history.prepared(path))) if path is not None else InMemoryHistory()
