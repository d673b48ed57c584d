"""The terminal channel's loop with a stand-in agent: a line over the limit is refused whole,
and a question answered elsewhere is withdrawn with the outcome said, the next line being a
message again (on a pipe and at the prompt, through prompt_toolkit's pipe input)."""

from __future__ import annotations

import asyncio
import io
import os
from contextlib import contextmanager

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output.plain_text import PlainTextOutput

from bot.core.approval_cards import ApprovalNeeded, ApprovalResolved, ApprovalView
from bot.core.events import MAX_MESSAGE_CHARS, Done
from bot.language.names import supported
from channels.cli import TerminalChannel
from channels.cli.prompt import PromptLines
from tests.support.languages import EN, LANGUAGES
from tests.support.waiting import eventually

VIEW = ApprovalView("A" * 16, "fs_write", "medium", "Create a.txt", "cli:local", "local", "cli",
                    {}, 0.0)


class Agent:
    """Asks one approval on "write", echoes anything else; remembers what it was sent."""

    def __init__(self, gate: asyncio.Event | None = None):
        self.sent: list[str] = []
        self.refs: list[tuple[str, str, str]] = []
        self.answers: list[str] = []
        self.gate = gate   # set: the request is asked (else at once)

    async def handle(self, message, sink):
        self.sent.append(message.text)
        if message.text == "write":
            if self.gate is not None:
                await self.gate.wait()
            await sink.emit(ApprovalNeeded(VIEW))
        else:
            await sink.emit(Done(f"ok: {message.text}", {}))

    async def set_approval_message_ref(self, approval_id, ref, channel):
        self.refs.append((approval_id, ref, channel))

    async def resolve_approval(self, approval_id, resolver, choice):
        self.answers.append(choice)

        class Resolution:
            ok, reason = True, ""
        return Resolution()

    def resume_approval(self, resolution, sink):
        return False

    def translator(self, reader, hint=""):
        return LANGUAGES.get(supported(hint), EN)


async def test_a_line_over_the_limit_is_refused_with_the_limit_named_and_the_next_goes_through():
    agent, out = Agent(), io.StringIO()
    long = "x" * (MAX_MESSAGE_CHARS + 1)
    channel = TerminalChannel(agent, stdin=io.StringIO(f"{long}\nshort\n"), stdout=out)
    await asyncio.wait_for(channel.run(), 30)
    assert agent.sent == ["short"]
    assert f"That message is {len(long):,} characters; the limit is {MAX_MESSAGE_CHARS:,}" \
        in out.getvalue()


async def test_an_approval_answered_elsewhere_withdraws_the_question_and_the_prompt_returns(tmp_path):
    agent, out = Agent(), io.StringIO()
    with create_pipe_input() as keys:
        channel = TerminalChannel(agent)
        channel.lines = lines = PromptLines(history=None, limit=100, input=keys, colours=False,
                                            on_interrupt=channel._interrupt,
                                            output=PlainTextOutput(out))
        channel.sink.writer = lines.writer
        running = asyncio.ensure_future(channel.run())
        keys.send_text("write\r")
        await eventually(lambda: channel._asking is not None, "the approval question")
        assert agent.refs == [(VIEW.id, "terminal", "cli")]   # found by an answer elsewhere
        await channel.approval_resolved(ApprovalResolved(VIEW, "approve", "console:operator",
                                                         1.0, "terminal"))
        await eventually(lambda: channel._asking is None
                         and lines._sessions["message"].app.is_running, "the prompt back")
        keys.send_text("y\r")        # typed after the question went: a message
        await eventually(lambda: "y" in agent.sent, "the next message")
        keys.send_text("\x04")
        await asyncio.wait_for(running, 30)
    shown = out.getvalue()
    assert "(the request to run fs_write was approved by console:operator)" in shown
    assert agent.sent == ["write", "y"] and agent.answers == []
    assert "ok: y" in shown


@contextmanager
def at_the_prompt(agent):
    """The channel on prompt_toolkit's pipe input: (channel, its prompt, keys, what it showed)."""
    out = io.StringIO()
    with create_pipe_input() as keys:
        channel = TerminalChannel(agent)
        channel.lines = lines = PromptLines(history=None, limit=100, input=keys, colours=False,
                                            on_interrupt=channel._interrupt,
                                            output=PlainTextOutput(out))
        channel.sink.writer = lines.writer
        yield channel, lines, keys, out


async def test_a_message_half_typed_when_a_question_comes_is_back_after_the_answer():
    gate = asyncio.Event()
    agent = Agent(gate)
    with at_the_prompt(agent) as (channel, lines, keys, _):
        message = lines._sessions["message"]
        running = asyncio.ensure_future(channel.run())
        keys.send_text("write\r")
        await eventually(lambda: agent.sent == ["write"] and message.app.is_running,
                         "the prompt while the turn runs")
        keys.send_text("half a mess")
        await eventually(lambda: message.default_buffer.text == "half a mess", "the draft")
        gate.set()   # the turn asks its request now
        await eventually(lambda: channel._asking is not None, "the approval question")
        keys.send_text("y\r")
        await eventually(lambda: agent.answers == ["approve"], "the answer")
        await eventually(lambda: message.app.is_running, "the message prompt back")
        assert message.default_buffer.text == "half a mess"
        keys.send_text("age\r")
        await eventually(lambda: len(agent.sent) == 2, "the message")
        keys.send_text("\x04")
        await asyncio.wait_for(running, 30)
    assert agent.sent == ["write", "half a message"]   # "y" was the answer, not a message


async def test_an_expired_request_waiting_on_a_pipe_is_withdrawn_and_the_line_is_a_message():
    agent, out = Agent(), io.StringIO()
    read_end, write_end = os.pipe()
    with os.fdopen(read_end) as stdin:
        with os.fdopen(write_end, "w") as pipe:
            channel = TerminalChannel(agent, stdin=stdin, stdout=out)
            running = asyncio.ensure_future(channel.run())
            pipe.write("write\n")
            pipe.flush()
            await eventually(lambda: channel._asking is not None, "the approval question")
            await channel.approval_resolved(ApprovalResolved(VIEW, "expire", "myclaw", 1.0,
                                                             "terminal"))
            pipe.write("n\n")
        await asyncio.wait_for(running, 30)   # the end of the pipe ends the chat
    assert "(the request to run fs_write expired — nobody answered in time)" in out.getvalue()
    assert agent.sent == ["write", "n"] and agent.answers == []


@pytest.mark.parametrize(("lang", "heading", "question"), [
    ("it_IT.UTF-8", "Approvazione richiesta", "Approvare? [y] sì / [N] no"),
    ("es_ES.UTF-8", "Se necesita aprobación", "¿Aprobar? [y] sí / [N] no"),
    ("C.UTF-8", "Approval needed", "Approve? [y]es / [N]o"),
])
async def test_the_terminal_speaks_the_language_lang_names(monkeypatch, lang, heading, question):
    for name in ("LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", lang)
    agent, out = Agent(), io.StringIO()
    channel = TerminalChannel(agent, stdin=io.StringIO("write\nn\n"), stdout=out)
    await asyncio.wait_for(channel.run(), 30)
    shown = out.getvalue()
    assert heading in shown and question in shown
    assert agent.answers == ["deny"]      # the answer letters are the same in every language
