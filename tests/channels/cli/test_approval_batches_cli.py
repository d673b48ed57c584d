"""Several asks in one model step at the terminal: one prompt listing every call with its
preview; a approves all, d (or Enter) denies all, one letter per call answers each; the turn
resumes once. The real `myclaw chat` on a pipe, and on a pty for Ctrl-C."""

from __future__ import annotations

import os
import signal

from tests.channels.cli.test_cli_prompts import approval_statuses, exit_code, supervised_env, terminal
from tests.fakes.anthropic_server import FakeAnthropic, reply, text, tool_use
from tests.ops.test_cli import run_cli

PROMPT = "Approve? [a]ll / [D]eny all / a letter per call in order, y, n or a (always): "


def two_writes():
    return reply(text("Writing both."), tool_use("fs_write", {"path": "a.txt", "content": "x"}),
                 tool_use("fs_write", {"path": "b.txt", "content": "y"}))


def chat(tmp_path, answers: str, final: str = "Done."):
    with FakeAnthropic.start_in_thread() as fake:
        fake.script(two_writes(), text(final))
        proc = run_cli("chat", env=supervised_env(tmp_path, fake), stdin=f"write both\n{answers}")
        requests = len(fake.fake.requests)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, requests


def test_two_asks_in_one_step_are_one_prompt_and_a_letter_per_call_answers_each(tmp_path):
    out, requests = chat(tmp_path, "ny\n")
    assert out.count("Approval needed — 2 calls:") == 1 and f"{PROMPT.rstrip()}\n" in out
    assert "1. fs_write" in out and "Create a.txt" in out and "Create b.txt" in out
    assert not (tmp_path / "ws" / "a.txt").exists() and (tmp_path / "ws" / "b.txt").exists()
    assert approval_statuses(tmp_path) == ["denied", "executed"] and requests == 2
    assert "Done." in out


def test_a_approves_every_call_and_the_turn_resumes_once(tmp_path):
    _, requests = chat(tmp_path, "a\n")
    assert (tmp_path / "ws" / "a.txt").exists() and (tmp_path / "ws" / "b.txt").exists()
    assert approval_statuses(tmp_path) == ["executed", "executed"] and requests == 2


def test_enter_denies_every_call_and_an_unclear_answer_is_asked_again(tmp_path):
    out, requests = chat(tmp_path, "maybe\nyyy\n\n")
    assert out.count("Please answer a (approve all), d (deny all) or one of y, n, a per call") == 2
    assert approval_statuses(tmp_path) == ["denied", "denied"] and requests == 2
    assert not (tmp_path / "ws" / "a.txt").exists()


def test_ctrl_c_at_a_batch_prompt_denies_every_call_as_for_a_single_request(tmp_path):
    with FakeAnthropic.start_in_thread() as fake:
        fake.script(two_writes(), text("Not written."))
        with terminal(supervised_env(tmp_path, fake)) as (pid, fd, screen):
            screen.expect(b"you> ")
            os.write(fd, b"write both\n")
            screen.expect(PROMPT.encode())
            os.kill(pid, signal.SIGINT)
            screen.expect(b"(denied")
            screen.expect(b"myclaw> Not written.")
            screen.expect(b"you> ")
            os.write(fd, b"\x04")
            screen.expect(b"bye")
            assert exit_code(pid) == 0
    assert approval_statuses(tmp_path) == ["denied", "denied"]


def test_quitting_at_a_batch_prompt_leaves_no_call_pending(tmp_path):
    with FakeAnthropic.start_in_thread() as fake:
        fake.script(two_writes())
        proc = run_cli("chat", env=supervised_env(tmp_path, fake), stdin="write both\n")
    assert proc.returncode == 0, proc.stderr
    assert "(denied fs_write: nobody left to answer)" in proc.stdout
    assert approval_statuses(tmp_path) == ["denied", "denied"]
