"""The terminal channel: `myclaw chat`, and `myclaw run` when no other channel is configured.

Sender `cli:local` — the only channel where `cli_only` and `excluded_tools` tools appear.
On a terminal the input is a prompt_toolkit prompt (channels.cli.prompt) that stays usable while
the answer streams above it; on a pipe, one message per line. Approvals are asked as a
y / n / a(lways) question; several calls of one step in one question: a (approve all),
d (deny all), or a letter per call. A request answered elsewhere (the console, an approver's
phone, expiry) withdraws the question, says who decided, and the normal prompt returns.
The first Ctrl-C stops what is in progress (the running turn; at the approval question it
answers "no"; at an idle prompt it only says how to quit); a second Ctrl-C in a row, or Ctrl-D,
quits. A request still waiting when the terminal quits is denied, never left pending.
`/attach FILE [message]` sends a photo, document or voice note; a file the agent sends
back (send_file) is already in the workspace, so its path is shown.
"""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import sys
from pathlib import Path
from typing import Any, TextIO

from bot.core.approval_cards import ApprovalResolved, ApprovalView
from bot.core.events import MAX_MESSAGE_CHARS, AgentAPI, IncomingMessage, Part
from bot.core.identity import Sender
from bot.language.names import terminal_language
from bot.language.translator import Translator
from channels.cli import answers, texts
from channels.cli.attach import attachment
from channels.cli.lines import WOKEN, Lines, PipeLines
from channels.cli.sink import TerminalSink

SENDER = Sender.of("cli", "local")
CHAT = "local"
MESSAGE_REF = "terminal"   # the terminal's "message" showing a request: there is one screen


class TerminalChannel:
    def __init__(self, agent: AgentAPI, stdin: TextIO | None = None, stdout: TextIO | None = None,
                 grace: float = 10.0, history: Path | None = None, lines: Lines | None = None,
                 voice_dir: Path | None = None):
        self.agent = agent
        self.grace = grace
        self.lines = lines or _lines_for(stdin, stdout, history, self._interrupt)
        # The terminal's language: /language, else the environment's (LC_ALL, LC_MESSAGES, LANG)
        self.language_hint = terminal_language(os.environ)
        self.sink = TerminalSink(self.lines.writer, self._approval_arrived, voice_dir=voice_dir,
                                 reader=self._reader)
        self._turn: asyncio.Task | None = None
        self._typed: collections.deque[tuple[IncomingMessage, str]] = collections.deque()
        self._interrupts = 0
        self._exit = asyncio.Event()
        self._wake = asyncio.Event()        # something for the loop to do: look again
        self._asking: tuple[ApprovalView, ...] | None = None
        self._cancel_answer = asyncio.Event()   # Ctrl-C at the approval question
        self._withdrawn = asyncio.Event()       # the question was answered elsewhere
        self._outcome: list[str] = []           # ... and what became of it, said once it is down
        self._running = False                   # between the welcome and the goodbye

    @property
    def connected(self) -> bool:
        """Up while the conversation runs (health: /healthz and the console's page)."""
        return self._running

    def private_sink_for(self, sender: str) -> TerminalSink | None:
        """The terminal is the operator's: approvers' notes (pairing requests) print here."""
        return self.sink

    def sink_for(self, chat: str, sender: str) -> TerminalSink | None:
        """Job runs created at this terminal, and conversations resumed after an answer given
        elsewhere, print here."""
        return self.sink if chat == CHAT else None

    def _message(self, text: str, parts: tuple[Part, ...] = ()) -> IncomingMessage:
        return IncomingMessage(sender=SENDER, chat=CHAT, text=text, channel="cli", parts=parts,
                               language_hint=self.language_hint)

    def _reader(self) -> Translator:
        return self.agent.translator(SENDER, self.language_hint)

    # --- Ctrl-C and SIGTERM --------------------------------------------------------------

    def _busy(self) -> bool:
        return self._turn is not None and not self._turn.done()

    def _interrupt(self) -> None:
        self._interrupts += 1
        if self._interrupts > 1:
            self._exit.set()
        elif self._busy():
            self.sink.end_line()
            self.sink.line(self.sink.say(texts.STOPPING))
            self._stop_turn()
        elif self._asking is not None:
            self._cancel_answer.set()
        else:
            self.sink.line(self.sink.say(texts.QUIT_HINT))
            self._wake.set()   # the prompt is shown again under the hint

    def _on_terminate(self) -> None:
        """SIGTERM: quit once the running turn ends, cancelling it after the grace period."""
        self._exit.set()
        if self._busy():
            asyncio.get_running_loop().call_later(self.grace, self._stop_turn)

    def _stop_turn(self) -> None:
        stop = getattr(self.agent, "stop", None)   # cancels the session's running turn
        if self._busy() and (stop is None or not stop(self._message("/stop"))):
            assert self._turn is not None
            self._turn.cancel()

    # --- the conversation ----------------------------------------------------------------

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        handlers = {signal.SIGINT: self._interrupt, signal.SIGTERM: self._on_terminate}
        for sig, handler in handlers.items():
            try:
                loop.add_signal_handler(sig, handler)
            except (NotImplementedError, RuntimeError):
                pass
        if self.lines.at_terminal:   # on a pipe the output is the answers alone
            self.sink.line(self.sink.say(texts.WELCOME))
            self.sink.line(self.sink.say(texts.KEYS_HINT))
        self.lines.open()
        self._running = True
        try:
            await self._loop()
            await self._deny_waiting()
        finally:
            self._running = False
            for sig in handlers:
                try:
                    loop.remove_signal_handler(sig)
                except (NotImplementedError, RuntimeError):
                    pass
            self.lines.close()
        self.sink.end_line()
        if self.lines.at_terminal:
            self.sink.line(f"\n{self.sink.say(texts.BYE)}")
        self.sink.muted = True

    async def _loop(self) -> None:
        while not self._exit.is_set():
            self._reap()
            if not self._busy() and self.sink.approvals:
                if not await self._ask(self.sink.approvals.pop(0)):
                    return
            elif not self._busy() and self._typed:
                self._start(self._conversation(*self._typed.popleft()))
            elif self._busy() and not self.lines.reads_while_busy:
                await _first(self._turn, self._exit)
            else:
                self._wake.clear()
                line = await self.lines.read(self.sink.say(texts.PROMPT), (self._exit, self._wake))
                if line is None:   # end of input: what runs finishes first (Ctrl-C stops it)
                    await _first(self._turn, self._exit)
                    self._reap()
                    return
                if isinstance(line, str):
                    await self._take(line)

    async def _take(self, line: str) -> None:
        """A line typed at the prompt: a message (or /attach) to send once nothing runs."""
        if not line.strip():
            return
        self._interrupts = 0
        if len(line) > MAX_MESSAGE_CHARS:   # refused whole, never cut
            self.sink.line(self.sink.say(texts.TOO_LONG, length=len(line), limit=MAX_MESSAGE_CHARS),
                           "class:error")
            return
        message: IncomingMessage | None = self._message(line)
        if line.split(maxsplit=1)[0] == "/attach":
            message = await attachment(line, self.sink, self._message)
        if message is not None:
            self._typed.append((message, line))

    async def _conversation(self, message: IncomingMessage, line: str) -> None:
        await self.agent.handle(message, self.sink)
        if line.strip() == "/help":
            self.sink.line(self.sink.say(texts.ATTACH_HELP))

    def _start(self, work: Any) -> None:
        self._turn = asyncio.ensure_future(work)
        self._turn.add_done_callback(self._ended)

    def _ended(self, turn: asyncio.Task) -> None:
        """A turn is over: "Stopped." when Ctrl-C cancelled it. The prompt is only taken down
        (woken) when there is something to do next, or a failure to raise (in `_reap`)."""
        if turn.cancelled():
            self.sink.end_line()
            self.sink.line(self.sink.say(texts.STOPPED))
        if self._typed or self.sink.approvals or not self.lines.reads_while_busy or (
                not turn.cancelled() and turn.exception() is not None):
            self._wake.set()

    def _reap(self) -> None:
        """A finished turn is forgotten; its failure is raised here."""
        turn = self._turn
        if turn is None or not turn.done():
            return
        self._turn = None
        if not turn.cancelled():
            turn.result()

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
                self.sink.line(self.sink.say(texts.DENIED_ON_EXIT, tools=tools))

    # --- approvals -----------------------------------------------------------------------

    async def _approval_arrived(self, views: tuple[ApprovalView, ...]) -> None:
        """A request to ask: remembered as shown here, so an answer given elsewhere finds it."""
        remember = getattr(self.agent, "set_approval_message_ref", None)
        if remember is not None:
            for view in views:
                await remember(view.id, MESSAGE_REF, "cli")
        self._wake.set()

    async def _ask(self, views: tuple[ApprovalView, ...]) -> bool:
        """Ask until the answer is understood (see channels.cli.answers). False when the terminal
        is quitting: the request is denied then, like on a first Ctrl-C. True when it was answered
        here, or elsewhere meanwhile (the question is withdrawn)."""
        self.sink.line(answers.heading(views, self._reader()), "class:approval")
        self._asking = views
        self._cancel_answer.clear()
        self._withdrawn.clear()
        question = answers.question(views, self._reader())
        try:
            while True:
                answer = await self.lines.read(
                    question, (self._exit, self._cancel_answer, self._withdrawn), kind="answer")
                if self._withdrawn.is_set():   # the question is down: who decided
                    self._say_outcome()
                    if isinstance(answer, str) and not self.lines.at_terminal:
                        await self._take(answer)   # on a pipe, the next line: a message
                    return True
                if answer is WOKEN and not self._exit.is_set():   # Ctrl-C: no
                    self.sink.end_line()
                    self.sink.line(self.sink.say(texts.DENIED_HERE))
                    parsed: str | list[str] | None = "deny"
                    break
                if not isinstance(answer, str):
                    self.sink.approvals.insert(0, views)  # denied by _deny_waiting on the way out
                    return False
                parsed = answers.parse_answer(answer, views)
                if parsed is not None:
                    break
                question = answers.ask_again(views, answer, self._reader())
        finally:
            self._asking = None
            if self._outcome:   # answered elsewhere as it was answered (or quit) here
                self._say_outcome()
        assert parsed is not None
        await self._resolve(views, parsed)
        return True

    async def _resolve(self, views: tuple[ApprovalView, ...], answer: str | list[str]) -> None:
        if isinstance(answer, str) and len(views) > 1:
            resolutions = [await self.agent.resolve_batch(views[0].batch, SENDER, answer)]
        else:
            choices = [answer] if isinstance(answer, str) else answer
            resolutions = [await self.agent.resolve_approval(view.id, SENDER, choice)
                           for view, choice in zip(views, choices, strict=True)]
        for resolution in resolutions:
            self.agent.resume_approval(resolution, self.sink)
            if not resolution.ok:
                self.sink.line(f"{resolution.reason}")
        drain = getattr(getattr(self.agent, "queue", None), "drain", None)
        if drain is not None and any(r.ok for r in resolutions):
            self._start(drain())   # the resumed conversation is the running turn

    async def approval_resolved(self, outcome: ApprovalResolved) -> None:
        """A request answered away from this terminal: the question about it is withdrawn (or
        never asked), the outcome is said, and calls of its batch still open are asked again."""
        calls = outcome.batch or ()
        ids = {outcome.approval.id} | {call.approval.id for call in calls}
        asking = self._asking is not None and bool(ids & {view.id for view in self._asking})
        waiting = self.sink.withdraw(ids)
        if not asking and not waiting:
            return   # answered here, or not a question of this terminal
        shown = self._asking if asking else waiting[0]
        assert shown is not None
        decided = [(call.approval.tool, call.choice, call.resolver) for call in calls
                   if call.choice and call.approval.id in {view.id for view in shown}] \
            or [(outcome.approval.tool, outcome.choice, outcome.resolver)]
        self._outcome += [answers.outcome_line(tool, choice, resolver, self._reader())
                         for tool, choice, resolver in decided]
        still_open = tuple(call.approval for call in calls if not call.choice)
        if still_open:
            self.sink.approvals.insert(0, still_open)
        if asking:
            self._withdrawn.set()   # said by _ask once the question is off the screen
        else:
            self._say_outcome()
        self._wake.set()

    def _say_outcome(self) -> None:
        lines, self._outcome = self._outcome, []
        self.sink.end_line()
        for line in lines:
            self.sink.line(line, "class:notice")


async def _first(task: asyncio.Task | None, event: asyncio.Event) -> None:
    """Until `task` ends or `event` is set."""
    if task is None or task.done():
        return
    wait = asyncio.ensure_future(event.wait())
    await asyncio.wait({task, wait}, return_when=asyncio.FIRST_COMPLETED)
    wait.cancel()


def _lines_for(stdin: TextIO | None, stdout: TextIO | None, history: Path | None,
               interrupt: Any) -> Lines:
    """A person at a terminal gets the prompt; a pipe, a file or a test gets plain lines. Typed
    at a terminal with the output going elsewhere (`myclaw chat | tee log`), the prompt is
    drawn on stderr's terminal and stdout gets a plain transcript: keys are never sent raw."""
    if stdin is None and stdout is None and sys.stdin.isatty():
        screen = next((out for out in (sys.stdout, sys.stderr) if out.isatty()), None)
        if screen is not None:
            from channels.cli.prompt import PromptLines

            return PromptLines(history=history, on_interrupt=interrupt, limit=MAX_MESSAGE_CHARS,
                               screen=screen, copy=None if screen is sys.stdout else sys.stdout)
    return PipeLines(stdin or sys.stdin, stdout or sys.stdout)


def create(config: Any, agent: AgentAPI) -> TerminalChannel:
    from channels.cli.history import history_path

    return TerminalChannel(agent, grace=config["agent"]["shutdown_grace_seconds"],
                           history=history_path(config.data_dir), voice_dir=config.data_dir / "voice")
