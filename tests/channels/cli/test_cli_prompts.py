"""The terminal's prompts on a real terminal (a pty): Ctrl-C at an idle prompt and at the approval
prompt, Ctrl-D with a request waiting, and answers that are neither y, n nor a."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from tests.fakes.anthropic_server import FakeAnthropic, text, tool_use
from tests.ops.test_cli import ROOT, base_env, run_cli, write_config

COLUMNS, ROWS = 100, 40
APPROVE = b"Approve? [y]es / [N]o / [a]lways: files in the workspace root in this chat: "


# What a person would read: the text, without the escape sequences that colour it or move the
# cursor, and with line ends as plain newlines.
_ESCAPES = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]|\r")


def visible(raw: bytes) -> bytes:
    return _ESCAPES.sub(b"", raw)


class Screen:
    """What the terminal showed, read in order: each expect() continues after the last match, so
    output that arrived in the same chunk as an earlier match is never lost. Matches what a
    person reads (see `visible`), not the bytes that draw it."""

    def __init__(self, fd: int):
        self.fd, self.raw, self.pos = fd, b"", 0

    @property
    def seen(self) -> bytes:
        return visible(self.raw)

    def expect(self, needle: bytes, timeout: float = 60) -> bytes:
        deadline = time.monotonic() + timeout
        while (found := self.seen.find(needle, self.pos)) < 0:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"did not see {needle!r} in {self.seen[-1500:]!r}"
            ready, _, _ = select.select([self.fd], [], [], remaining)
            try:
                chunk = os.read(self.fd, 4096) if ready else b""
            except OSError:  # EIO: the child has exited and closed the terminal
                chunk = b""
            assert chunk or not ready, f"the terminal closed before {needle!r}: {self.seen[-1500:]!r}"
            self.raw += chunk
        shown, self.pos = self.seen[self.pos:found + len(needle)], found + len(needle)
        return shown


@contextmanager
def terminal(env: dict[str, str]):
    """`myclaw chat` on a pty; yields (pid, fd, screen) and makes sure the child is gone after."""
    pid, fd = pty.fork()
    if pid == 0:  # child: the CLI on a real terminal
        os.chdir(ROOT)
        os.execve(sys.executable, [sys.executable, "-m", "bot", "chat"], tty_env(env))
    try:
        yield pid, fd, Screen(fd)
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.close(fd)


def exit_code(pid: int) -> int:
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def approval_statuses(tmp_path: Path) -> list[str]:
    with sqlite3.connect(tmp_path / "data" / "myclaw.db") as db:
        return [row[0] for row in db.execute("SELECT status FROM approvals ORDER BY created_at")]


def supervised_env(tmp_path: Path, fake) -> dict[str, str]:
    write_config(tmp_path, '[senders]\n"cli:local" = "supervised"\n')
    return base_env(tmp_path, ANTHROPIC_API_KEY="test", ANTHROPIC_BASE_URL=fake.base_url)


def tty_env(env: dict[str, str]) -> dict[str, str]:
    """A terminal of a known size. The pty answers no cursor-position requests (a real terminal
    does): the prompt never asks, so no warning about it is printed into the chat."""
    return {**env, "TERM": "xterm", "COLUMNS": str(COLUMNS), "LINES": str(ROWS)}


def test_ctrl_c_at_an_idle_prompt_says_how_to_quit_and_a_second_one_quits(tmp_path):
    with FakeAnthropic.start_in_thread() as fake, \
            terminal(base_env(tmp_path, ANTHROPIC_API_KEY="test",
                              ANTHROPIC_BASE_URL=fake.base_url)) as (pid, fd, screen):
        screen.expect(b"you> ")
        os.kill(pid, signal.SIGINT)
        screen.expect(b"(press Ctrl-C again or Ctrl-D to quit)\nyou> ")
        os.write(fd, b"still here?\n")  # typing something starts the count again
        screen.expect(b"ok: still here?")
        screen.expect(b"you> ")  # the turn is over: nothing is running now
        os.kill(pid, signal.SIGINT)
        assert b"bye" not in screen.expect(b"Ctrl-C again")
        os.kill(pid, signal.SIGINT)
        screen.expect(b"bye")
        assert exit_code(pid) == 0


def test_ctrl_c_at_the_approval_prompt_denies_the_request_and_a_second_one_quits(tmp_path):
    with FakeAnthropic.start_in_thread() as fake:
        fake.script(tool_use("fs_write", {"path": "a.txt", "content": "x"}), text("Not written."))
        with terminal(supervised_env(tmp_path, fake)) as (pid, fd, screen):
            screen.expect(b"you> ")
            os.write(fd, b"write a file\n")
            screen.expect(APPROVE)
            os.kill(pid, signal.SIGINT)
            screen.expect(b"(denied")
            screen.expect(b"myclaw> Not written.")
            screen.expect(b"you> ")
            os.kill(pid, signal.SIGINT)
            screen.expect(b"bye")
            assert exit_code(pid) == 0
        denial = fake.fake.requests[-1].json["messages"][-1]["content"][0]
    assert denial["type"] == "tool_result" and denial["is_error"]
    assert "denied" in str(denial["content"])
    assert not (tmp_path / "ws" / "a.txt").exists()
    assert approval_statuses(tmp_path) == ["denied"]


def test_quitting_with_ctrl_d_at_the_approval_prompt_leaves_no_request_pending(tmp_path):
    with FakeAnthropic.start_in_thread() as fake:
        fake.script(tool_use("fs_write", {"path": "a.txt", "content": "x"}))
        with terminal(supervised_env(tmp_path, fake)) as (pid, fd, screen):
            screen.expect(b"you> ")
            os.write(fd, b"write a file\n")
            screen.expect(APPROVE)
            os.write(fd, b"\x04")  # Ctrl-D on an empty line: end of input
            screen.expect(b"bye")
            assert exit_code(pid) == 0
    assert not (tmp_path / "ws" / "a.txt").exists()
    assert approval_statuses(tmp_path) == ["denied"]


def test_an_answer_other_than_y_n_or_a_is_asked_again(tmp_path):
    with FakeAnthropic.start_in_thread() as fake:
        fake.script(tool_use("fs_write", {"path": "a.txt", "content": "x"}), text("Written."))
        proc = run_cli("chat", env=supervised_env(tmp_path, fake),
                       stdin="write a file\nmaybe\nyes please\ny\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("Please answer y (yes), n (no) or a (always), not ") == 2
    assert "not 'maybe'" in proc.stdout
    assert (tmp_path / "ws" / "a.txt").read_text() == "x"
    assert approval_statuses(tmp_path) == ["executed"]


def test_an_empty_answer_is_the_default_no(tmp_path):
    with FakeAnthropic.start_in_thread() as fake:
        fake.script(tool_use("fs_write", {"path": "a.txt", "content": "x"}), text("Fine."))
        proc = run_cli("chat", env=supervised_env(tmp_path, fake), stdin="write a file\n\n")
    assert proc.returncode == 0, proc.stderr
    assert "Please answer" not in proc.stdout and "Fine." in proc.stdout
    assert approval_statuses(tmp_path) == ["denied"]


def test_a_is_asked_again_when_no_always_is_offered(tmp_path):
    with FakeAnthropic.start_in_thread() as fake:
        fake.script(tool_use("shell_run", {"command": "rm -rf junk"}), text("Left alone."))
        write_config(tmp_path, '[senders]\n"cli:local" = "full"\n')
        proc = run_cli("chat", env=base_env(tmp_path, ANTHROPIC_API_KEY="test",
                                            ANTHROPIC_BASE_URL=fake.base_url),
                       stdin="clean up\na\nn\n")
    assert proc.returncode == 0, proc.stderr
    assert "Approve? [y]es / [N]o:\n" in proc.stdout   # on a line of its own on a pipe
    assert "Please answer y (yes) or n (no), not 'a':\n" in proc.stdout
    assert "Left alone." in proc.stdout and approval_statuses(tmp_path) == ["denied"]


def test_piped_messages_get_their_answers_alone_one_per_message(tmp_path):
    with FakeAnthropic.start_in_thread() as fake:
        proc = run_cli("chat", env=base_env(tmp_path, ANTHROPIC_API_KEY="test",
                                            ANTHROPIC_BASE_URL=fake.base_url),
                       stdin="hi\nthere\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "myclaw> ok: hi\nmyclaw> ok: there\n"   # no prompts, no banner


def test_typed_at_a_terminal_with_stdout_piped_keys_still_edit_and_the_pipe_gets_a_transcript(
        tmp_path):
    """`myclaw chat | tee log`: the prompt is drawn on the terminal (stderr), stdout is plain."""
    with FakeAnthropic.start_in_thread() as fake:
        fake.script(text("one"))
        env = tty_env(base_env(tmp_path, ANTHROPIC_API_KEY="test", ANTHROPIC_BASE_URL=fake.base_url))
        master, slave = os.openpty()
        proc = subprocess.Popen([sys.executable, "-m", "bot", "chat"], cwd=ROOT, env=env,
                                stdin=slave, stdout=subprocess.PIPE, stderr=slave)
        os.close(slave)
        try:
            screen = Screen(master)
            screen.expect(b"you> ")
            os.write(master, b"helo\x1b[Dl\r")      # a typo mended with the left arrow
            screen.expect(b"myclaw> one")
            os.write(master, b"\x04")
            transcript, _ = proc.communicate(timeout=60)
        finally:
            proc.kill()
            os.close(master)
        sent = fake.fake.requests[0].json["messages"][-1]["content"]
    assert proc.returncode == 0
    assert "hello" in str(sent) and "\\x1b" not in str(sent) and "\x1b" not in str(sent)
    assert b"you> hello\nmyclaw> one\n" in transcript and b"\x1b" not in transcript
    assert transcript.rstrip().endswith(b"bye")
