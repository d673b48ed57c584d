"""The terminal's prompt (channels.cli.prompt) driven through prompt_toolkit's pipe input: what
a key or a paste makes of a message, the history file, the length limit, and a prompt taken down
and brought back with what was being typed."""

from __future__ import annotations

import asyncio
import io
import stat
from contextlib import contextmanager

from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output.plain_text import PlainTextOutput

from channels.cli.lines import WOKEN
from channels.cli.prompt import AttachCompleter, PromptLines
from tests.support.waiting import eventually


@contextmanager
def prompt(tmp_path, limit: int = 100):
    interrupts: list[int] = []
    with create_pipe_input() as keys:
        out = io.StringIO()
        lines = PromptLines(history=tmp_path / "state" / "history-me", limit=limit,
                            on_interrupt=lambda: interrupts.append(1), input=keys,
                            output=PlainTextOutput(out), colours=False)
        yield lines, keys, interrupts, out


async def typed(lines, keys, data: str, kind: str = "message", wake=()):
    keys.send_text(data)
    return await asyncio.wait_for(lines.read("you> ", tuple(wake), kind=kind), 30)


async def test_a_bracketed_paste_of_three_lines_is_one_message(tmp_path):
    with prompt(tmp_path) as (lines, keys, _, _):
        line = await typed(lines, keys, "\x1b[200~one\r\ntwo\r\nthree\x1b[201~\r")
    assert line == "one\ntwo\nthree"


async def test_esc_enter_starts_a_new_line_and_enter_sends(tmp_path):
    with prompt(tmp_path) as (lines, keys, _, _):
        assert await typed(lines, keys, "first\x1b\rsecond\r") == "first\nsecond"


async def test_history_keeps_messages_in_a_0600_file_but_never_answers_or_secrets(tmp_path):
    with prompt(tmp_path) as (lines, keys, _, _):
        assert await typed(lines, keys, "remember me\r") == "remember me"
        assert await typed(lines, keys, "hunter2\r", kind="secret") == "hunter2"
        assert await typed(lines, keys, "y\r", kind="answer") == "y"
        assert await typed(lines, keys, "\x1b[A\r") == "remember me"   # ↑ recalls it
    history = tmp_path / "state" / "history-me"
    assert stat.S_IMODE(history.stat().st_mode) == 0o600
    assert "+remember me" in history.read_text()
    assert "hunter2" not in history.read_text() and "+y\n" not in history.read_text()


async def test_a_message_over_the_limit_is_refused_at_enter_and_stays_to_be_shortened(tmp_path):
    with prompt(tmp_path, limit=20) as (lines, keys, _, _):
        line = await typed(lines, keys, "x" * 21 + "\r" + "\x7f" + "\r")
    assert line == "x" * 20   # the first Enter sent nothing and cut nothing


async def test_ctrl_c_clears_a_line_with_text_and_interrupts_on_an_empty_one(tmp_path):
    with prompt(tmp_path) as (lines, keys, interrupts, _):
        assert await typed(lines, keys, "abc\x03" + "\x03" + "kept\r") == "kept"
    assert interrupts == [1]


async def test_ctrl_d_on_an_empty_line_is_the_end_of_input(tmp_path):
    with prompt(tmp_path) as (lines, keys, _, _):
        assert await typed(lines, keys, "\x04") is None


async def test_a_woken_prompt_gives_way_and_what_was_typed_comes_back(tmp_path):
    with prompt(tmp_path) as (lines, keys, _, _):
        wake = asyncio.Event()
        reading = asyncio.ensure_future(lines.read("you> ", (wake,)))
        keys.send_text("half a mess")
        await eventually(lambda: lines._sessions["message"].default_buffer.text == "half a mess",
                         "the keys to reach the prompt")
        wake.set()
        assert await asyncio.wait_for(reading, 30) is WOKEN
        assert await typed(lines, keys, "age\r") == "half a message"


async def woken_with(lines, keys, typed: str, kind: str = "message") -> None:
    """A prompt of `kind` with `typed` in it, taken down (an approval came, or was answered
    elsewhere)."""
    wake = asyncio.Event()
    reading = asyncio.ensure_future(lines.read("> ", (wake,), kind=kind))
    keys.send_text(typed)
    await eventually(lambda: lines._sessions[kind].default_buffer.text == typed,
                     "the keys to reach the prompt")
    wake.set()
    assert await asyncio.wait_for(reading, 30) is WOKEN


async def test_a_draft_waits_through_an_approval_question_and_comes_back_after_it(tmp_path):
    with prompt(tmp_path) as (lines, keys, _, _):
        await woken_with(lines, keys, "half a mess")
        assert await typed(lines, keys, "y\r", kind="answer") == "y"   # the question asked meanwhile
        assert await typed(lines, keys, "age\r") == "half a message"


async def test_what_was_typed_into_a_withdrawn_question_is_the_next_messages_draft(tmp_path):
    with prompt(tmp_path) as (lines, keys, _, _):
        await woken_with(lines, keys, "half a mess")
        await woken_with(lines, keys, "age", kind="answer")   # answered elsewhere: taken down
        assert await typed(lines, keys, "!\r") == "half a message!"


async def test_a_prompt_taken_down_is_erased_and_a_line_sent_stays(tmp_path):
    with prompt(tmp_path) as (lines, keys, _, _):
        await woken_with(lines, keys, "draft")
        assert lines._sessions["message"].app.erase_when_done
        assert await typed(lines, keys, "\r") == "draft"
        assert not lines._sessions["message"].app.erase_when_done


async def test_what_is_written_above_the_prompt_goes_out_a_whole_line_at_a_time(tmp_path):
    with prompt(tmp_path) as (lines, _, _, out):
        lines.writer.write("myclaw> Hel", "class:bot")
        assert out.getvalue() == ""
        lines.writer.write("lo\nand")
        assert out.getvalue().replace("\r\n", "\n") == "myclaw> Hello\n"
        lines.close()
        assert out.getvalue().replace("\r\n", "\n") == "myclaw> Hello\nand"


def test_attach_completes_file_paths_and_nothing_after_the_file(tmp_path):
    (tmp_path / "photo.jpg").write_bytes(b"x")
    (tmp_path / "phone.txt").write_bytes(b"x")
    completer = AttachCompleter()

    def completions(text: str) -> set[str]:
        return {c.text for c in completer.get_completions(Document(text), CompleteEvent(True))}

    assert completions(f"/attach {tmp_path}/pho") == {"to.jpg", "ne.txt"}
    assert completions(f'/attach "{tmp_path}/phot') == {"o.jpg"}
    assert completions(f"/attach {tmp_path}/photo.jpg what is th") == set()
    assert completions("hello pho") == set()
