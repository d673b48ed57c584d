"""The terminal channel: `myclaw chat`, and `myclaw run` when no other channel is configured.

Sender `cli:local` — the only channel where `cli_only` and `excluded_tools` tools appear.
Streams the model's text, shows tool activity, asks approvals as a y / n / a(lways) prompt;
several calls of one step in one prompt: a (approve all), d (deny all), or a letter per call.
The first Ctrl-C stops what is in progress (the running turn; at the approval prompt it answers
"no"; at an idle prompt it only says how to quit); a second Ctrl-C in a row, or Ctrl-D, quits.
A request still waiting when the terminal quits is denied, never left pending. Works on a pipe
as well as on a terminal.
`/attach FILE [message]` sends a photo, document or voice note; a file the agent sends
back (send_file) is already in the workspace, so its path is shown.
"""

from __future__ import annotations

import asyncio
import re
import shlex
import signal
import sys
import threading
from pathlib import Path, PurePath
from typing import Any, TextIO

from bot.core.events import (
    AgentAPI,
    ApprovalBatchNeeded,
    ApprovalNeeded,
    ApprovalView,
    AudioPart,
    DocumentPart,
    Done,
    ErrorEvent,
    Event,
    FileOut,
    IncomingMessage,
    Notice,
    Part,
    TextDelta,
    ToolFinished,
    ToolProgress,
    ToolStarted,
)
from bot.core.identity import Sender

# Terminal control characters in what the model, a tool or a web page wrote (ESC sequences can
# erase or rewrite lines, retitle the window or set the clipboard) are shown, never obeyed: an
# approval prompt must look exactly like what will run. Newline and tab stay.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

SENDER = Sender.of("cli", "local")
PROMPT = "you> "
CHAT = "local"
CHOICES = {"y": "approve", "yes": "approve", "a": "always", "always": "always",
           "n": "deny", "no": "deny", "": "deny"}
BATCH_CHOICES = {"a": "approve", "all": "approve", "d": "deny", "": "deny"}
QUIT_HINT = "(press Ctrl-C again or Ctrl-D to quit)"
ATTACH_HELP = ("Terminal only: /attach FILE [message] — send a photo, PDF, text/code file or voice "
               "note (quote a path with spaces).")
AUDIO_SUFFIXES = (".ogg", ".oga", ".opus", ".mp3", ".m4a", ".wav", ".webm", ".flac", ".aac")
MAX_ATTACH_BYTES = 50_000_000   # the core applies the [media] limits; this bounds the read


class TerminalSink:
    def __init__(self, out: TextIO):
        self.out = out
        self.muted = False  # once the terminal has said bye, late output of a turn is dropped
        self.streamed = False
        self.approvals: list[tuple[ApprovalView, ...]] = []   # one entry per prompt

    def write(self, text: str) -> None:
        if self.muted:
            return
        self.out.write(_CONTROLS.sub(_visible, text))
        self.out.flush()

    async def emit(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            if not self.streamed:
                self.write("myclaw> ")
            self.streamed = True
            self.write(event.text)
        elif isinstance(event, Done):
            if self.streamed:
                self.write("\n")
            elif event.text:
                self.write(f"myclaw> {event.text}\n")
            self.streamed = False
        elif isinstance(event, Notice):
            self.write(f"{event.text}\n")
            for button in event.buttons:   # no buttons in a terminal: show what to type
                self.write(f"  [{button.label}] → {button.command}\n")
        elif isinstance(event, ErrorEvent):
            self.write(f"error: {event.message}\n")
        elif isinstance(event, ToolStarted):
            self.write(f"{chr(10) if self.streamed else ''}  · {event.tool} …\n")
            self.streamed = False
        elif isinstance(event, ToolProgress):
            self.write(f"    {event.text}\n")
        elif isinstance(event, ToolFinished) and not event.ok:
            self.write(f"  · {event.tool} failed: {event.summary}\n")
        elif isinstance(event, ApprovalNeeded):
            self.approvals.append((event.approval,))
        elif isinstance(event, ApprovalBatchNeeded):
            self.approvals.append(event.approvals)
        elif isinstance(event, FileOut):
            caption = f" — {event.caption}" if event.caption else ""
            self.write(f"📎 {event.path or event.name} ({len(event.data):,} bytes, in the "
                       f"workspace){caption}\n")


def _visible(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


class LineReader:
    """Reads stdin lines on a daemon thread so the event loop never blocks on input."""

    def __init__(self, stream: TextIO, loop: asyncio.AbstractEventLoop):
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._stream, self._loop = stream, loop
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self._stream:
            self._loop.call_soon_threadsafe(self.queue.put_nowait, line.rstrip("\n"))
        self._loop.call_soon_threadsafe(self.queue.put_nowait, None)

    async def readline(self) -> str | None:
        return await self.queue.get()


class TerminalChannel:
    def __init__(self, agent: AgentAPI, stdin: TextIO | None = None, stdout: TextIO | None = None,
                 grace: float = 10.0):
        self.agent = agent
        self.grace = grace
        self.stdin = stdin or sys.stdin
        self.sink = TerminalSink(stdout or sys.stdout)
        self._turn: asyncio.Task | None = None
        self._interrupts = 0
        self._prompt_cancel: asyncio.Event | None = None  # set while the approval prompt waits

    def private_sink_for(self, sender: str) -> TerminalSink | None:
        """The terminal is the operator's: approvers' notes (pairing requests) print here."""
        return self.sink

    def sink_for(self, chat: str, sender: str) -> TerminalSink | None:
        """Job runs created at this terminal print here."""
        return self.sink if chat == CHAT else None

    def _message(self, text: str, parts: tuple[Part, ...] = ()) -> IncomingMessage:
        return IncomingMessage(sender=SENDER, chat=CHAT, text=text, channel="cli", parts=parts)

    async def _attach(self, line: str) -> IncomingMessage | None:
        """`/attach FILE [message]` → a message carrying the file (its type is checked by the
        core, by content); None after telling the user what is wrong."""
        try:
            words = shlex.split(line)[1:]
        except ValueError as exc:
            self.sink.write(f"/attach: {exc}\n")
            return None
        if not words:
            self.sink.write(f"{ATTACH_HELP}\n")
            return None
        path = words[0]
        try:
            data = await asyncio.to_thread(_read_limited, path)
        except OSError as exc:
            self.sink.write(f"/attach: cannot read {path}: {exc.strerror or exc}\n")
            return None
        if data is None:
            self.sink.write(f"/attach: {path} is larger than {MAX_ATTACH_BYTES:,} bytes\n")
            return None
        name = PurePath(path).name
        part: Part = AudioPart(data, name, "audio/ogg") if PurePath(name).suffix.lower() in AUDIO_SUFFIXES \
            else DocumentPart(data, name)
        return self._message(" ".join(words[1:]), (part,))

    def _on_interrupt(self, exit_event: asyncio.Event) -> None:
        self._interrupts += 1
        if self._interrupts > 1:
            exit_event.set()
        elif self._turn is not None and not self._turn.done():
            self.sink.write(f"\n(stopping — {QUIT_HINT[1:]}\n")
            stop = getattr(self.agent, "stop", None)  # cancels the session's running turn
            if stop is None or not stop(self._message("/stop")):
                self._turn.cancel()
        elif self._prompt_cancel is not None:
            self._prompt_cancel.set()
        else:
            self.sink.write(f"\n{QUIT_HINT}\n{PROMPT}")

    def _on_terminate(self, exit_event: asyncio.Event) -> None:
        """SIGTERM: quit once the running turn ends, cancelling it after the grace period."""
        exit_event.set()
        if self._turn is not None and not self._turn.done():
            loop = asyncio.get_running_loop()
            loop.call_later(self.grace, self._cancel_turn)

    def _cancel_turn(self) -> None:
        stop = getattr(self.agent, "stop", None)
        if self._turn is not None and not self._turn.done() and (
                stop is None or not stop(self._message("/stop"))):
            self._turn.cancel()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        exit_event = asyncio.Event()
        try:
            loop.add_signal_handler(signal.SIGINT, self._on_interrupt, exit_event)
            loop.add_signal_handler(signal.SIGTERM, self._on_terminate, exit_event)
        except (NotImplementedError, RuntimeError):
            pass
        reader = LineReader(self.stdin, loop)
        self.sink.write("myclaw — type a message, /help for commands, /attach FILE to send a file, "
                        "Ctrl-D to quit.\n")
        try:
            await self._loop(reader, exit_event)
            await self._deny_waiting()
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.remove_signal_handler(sig)
                except (NotImplementedError, RuntimeError):
                    pass
        self.sink.write("\nbye\n")
        self.sink.muted = True

    async def _deny_waiting(self) -> None:
        """Nobody is left to answer the requests still waiting: deny them (the model is told)."""
        while self.sink.approvals:
            views = self.sink.approvals.pop(0)
            if len(views) > 1:
                resolution = await self.agent.resolve_batch(views[0].batch, SENDER, "deny")
            else:
                resolution = await self.agent.resolve_approval(views[0].id, SENDER, "deny")
            self.agent.resume_approval(resolution, self.sink)
            if resolution.ok:
                tools = ", ".join(dict.fromkeys(view.tool for view in views))
                self.sink.write(f"(denied {tools}: nobody left to answer)\n")

    async def _next_line(self, reader: LineReader, *events: asyncio.Event) -> str | None:
        """The next line, or None at end of input or when one of `events` is set first."""
        read = asyncio.ensure_future(reader.readline())
        waits = [asyncio.ensure_future(event.wait()) for event in events]
        done, _ = await asyncio.wait({read, *waits}, return_when=asyncio.FIRST_COMPLETED)
        for wait in waits:
            wait.cancel()
        if read not in done:
            read.cancel()
            return None
        return read.result()

    async def _loop(self, reader: LineReader, exit_event: asyncio.Event) -> None:
        while not exit_event.is_set():
            self.sink.write(PROMPT)
            line = await self._next_line(reader, exit_event)
            if line is None:
                return
            if not line.strip():
                continue
            self._interrupts = 0
            message = self._message(line)
            if line.split(maxsplit=1)[0] == "/attach":
                message = await self._attach(line)
                if message is None:
                    continue
            await self._run_turn(self.agent.handle(message, self.sink))
            if line.strip() == "/help":
                self.sink.write(f"{ATTACH_HELP}\n")
            while self.sink.approvals and not exit_event.is_set():
                if not await self._ask(self.sink.approvals.pop(0), reader, exit_event):
                    return

    async def _run_turn(self, coro: Any) -> None:
        self._turn = asyncio.ensure_future(coro)
        try:
            await self._turn
        except asyncio.CancelledError:
            if not self._turn.cancelled():
                raise
            self.sink.write("Stopped.\n")
        finally:
            self._turn = None

    async def _ask(self, views: ApprovalView | tuple[ApprovalView, ...], reader: LineReader,
                   exit_event: asyncio.Event) -> bool:
        """Ask until the answer is y, n (or Enter), or a when Always is offered — for a batch,
        a (all), d (all denied, or Enter) or one of those letters per call. False when the
        terminal is quitting; the request is denied then, like on a first Ctrl-C."""
        if isinstance(views, ApprovalView):
            views = (views,)
        if len(views) == 1:
            view = views[0]
            always = f" / [a]lways: {view.always}" if view.always else ""
            self.sink.write(f"\nApproval needed — {view.tool} (risk {view.risk})\n{view.summary}\n"
                            f"Approve? [y]es / [N]o{always}: ")
            choices = "y (yes), n (no) or a (always)" if view.always else "y (yes) or n (no)"
        else:
            self.sink.write(batch_prompt(views))
            choices = "a (approve all), d (deny all) or one of y, n, a per call (e.g. " \
                      f"{'yn' * (len(views) // 2) + 'y' * (len(views) % 2)!r})"
        self._prompt_cancel = asyncio.Event()
        try:
            answer = await self._answer(reader, exit_event, self._prompt_cancel,
                                        lambda text: parse_answer(text, views), choices)
        finally:
            self._prompt_cancel = None
        if answer is None:
            self.sink.approvals.insert(0, views)  # denied by _deny_waiting on the way out
            return False
        if answer == "cancelled":
            self.sink.write(f"\n(denied — {QUIT_HINT[1:]}\n")
            answer = "deny"
        if isinstance(answer, str) and len(views) > 1:
            resolutions = [await self.agent.resolve_batch(views[0].batch, SENDER, answer)]
        else:
            answers = [answer] if isinstance(answer, str) else answer
            resolutions = [await self.agent.resolve_approval(view.id, SENDER, choice)
                           for view, choice in zip(views, answers, strict=True)]
        for resolution in resolutions:
            self.agent.resume_approval(resolution, self.sink)
            if not resolution.ok:
                self.sink.write(f"{resolution.reason}\n")
        drain = getattr(getattr(self.agent, "queue", None), "drain", None)
        if drain is not None and any(r.ok for r in resolutions):
            await self._run_turn(drain())
        return True

    async def _answer(self, reader: LineReader, exit_event: asyncio.Event, cancel: asyncio.Event,
                      parse: Any, choices: str) -> str | list[str] | None:
        while True:
            answer = await self._next_line(reader, exit_event, cancel)
            if answer is None:
                return "cancelled" if cancel.is_set() and not exit_event.is_set() else None
            parsed = parse(answer)
            if parsed is not None:
                return parsed
            self.sink.write(f"Please answer {choices}, not {answer.strip()[:40]!r}: ")


def batch_prompt(views: tuple[ApprovalView, ...]) -> str:
    """Every call of the step with its whole preview, numbered, then the question."""
    lines = [f"\nApproval needed — {len(views)} calls:"]
    for number, view in enumerate(views, start=1):
        always = f" — [a]lways: {view.always}" if view.always else ""
        lines.append(f"{number}. {view.tool} (risk {view.risk}){always}\n{view.summary}")
    return "\n".join(lines) + ("\nApprove? [a]ll / [D]eny all / a letter per call in order, "
                               "y, n or a (always): ")


def parse_answer(text: str, views: tuple[ApprovalView, ...]) -> str | list[str] | None:
    """One request: approve, deny or always. Several: approve or deny (all of them), or one
    choice per call in order ("yna"). None when the answer is none of these."""
    answer = text.strip().lower()
    if len(views) == 1:
        choice = CHOICES.get(answer)
        return choice if choice is not None and (choice != "always" or views[0].always) else None
    if answer in BATCH_CHOICES:
        return BATCH_CHOICES[answer]
    letters = answer.replace(" ", "")
    if len(letters) != len(views) or any(c not in "yna" for c in letters):
        return None
    picked = [CHOICES[c] for c in letters]
    if any(choice == "always" and not view.always for choice, view in zip(picked, views, strict=True)):
        return None
    return picked


def _read_limited(path: str) -> bytes | None:
    with Path(path).expanduser().open("rb") as handle:
        data = handle.read(MAX_ATTACH_BYTES + 1)
    return None if len(data) > MAX_ATTACH_BYTES else data


def create(config: Any, agent: AgentAPI) -> TerminalChannel:
    return TerminalChannel(agent)
