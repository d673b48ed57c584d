"""Where the terminal's input comes from: a pipe or file, one message per line (`PipeLines`), or
a person at a terminal (`channels.cli.prompt.PromptLines`, on prompt_toolkit). Both answer
`read` the same way: the line, None at the end of input, or WOKEN when one of the events it was
given was set first (an approval arrived or was answered elsewhere: the caller looks again)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Literal, Protocol, TextIO

from channels.cli.sink import PlainWriter, Writer

Kind = Literal["message", "answer", "secret"]


class Woken:
    def __repr__(self) -> str:
        return "WOKEN"


WOKEN = Woken()


class Lines(Protocol):
    writer: Writer
    # False on a pipe: the next line may be the answer to a question the turn is about to ask,
    # so nothing is read while a turn runs.
    reads_while_busy: bool
    at_terminal: bool   # a person at a keyboard (False: a pipe or a file, no prompts shown)

    async def read(self, prompt: str, wake: tuple[asyncio.Event, ...],
                   kind: Kind = "message") -> str | Woken | None: ...

    def open(self) -> None: ...

    def close(self) -> None: ...


class PipeLines:
    """Lines of stdin read on a daemon thread, so the event loop never blocks on input. Nobody
    reads a prompt on a pipe: the output is the answers. A question (an approval) is written,
    on a line of its own, since the next line read answers it."""

    reads_while_busy = False
    at_terminal = False

    def __init__(self, stream: TextIO, out: TextIO):
        self.writer = PlainWriter(out)
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._stream = stream
        self._loop: asyncio.AbstractEventLoop | None = None

    def _pump(self) -> None:
        assert self._loop is not None
        for line in self._lines():
            self._loop.call_soon_threadsafe(self.queue.put_nowait, line.rstrip("\n"))
        self._loop.call_soon_threadsafe(self.queue.put_nowait, None)

    def _lines(self) -> Iterator[str]:
        """The input's lines. Read as bytes when there are bytes beneath: whatever the locale's
        encoding, a byte that is not UTF-8 becomes a lone surrogate (the message repairs it
        and says so) instead of an error that would end the input."""
        raw = getattr(self._stream, "buffer", None)
        if raw is None:
            yield from self._stream
            return
        for line in raw:
            yield line.decode("utf-8", "surrogateescape")

    async def read(self, prompt: str, wake: tuple[asyncio.Event, ...],
                   kind: Kind = "message") -> str | Woken | None:
        if self._loop is None:   # started on first use: the thread needs the running loop
            self._loop = asyncio.get_running_loop()
            threading.Thread(target=self._pump, daemon=True).start()
        if any(event.is_set() for event in wake):
            return WOKEN
        if kind != "message":
            self.writer.write(prompt.rstrip() + "\n")
        read = asyncio.ensure_future(self.queue.get())
        waits = [asyncio.ensure_future(event.wait()) for event in wake]
        done, _ = await asyncio.wait({read, *waits}, return_when=asyncio.FIRST_COMPLETED)
        for wait in waits:
            wait.cancel()
        if read in done:
            return read.result()
        read.cancel()   # a cancelled get() takes nothing off the queue: the line waits
        return WOKEN

    def open(self) -> None:
        """The thread starts with the first read (it needs the running loop)."""

    def close(self) -> None:
        """Nothing to undo: the reading thread is a daemon."""
