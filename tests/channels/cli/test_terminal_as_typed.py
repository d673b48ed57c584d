"""`myclaw chat` on a real pseudo-terminal, typed as a person types: line editing, a paste in
bracketed-paste escapes, Alt-Enter, Ctrl-C and Ctrl-D as keys, and an approval answered in the
web console while the terminal is asking it."""

from __future__ import annotations

import http.cookiejar
import os
import re
import socket
import sqlite3
import stat
import urllib.parse
import urllib.request
from pathlib import Path

from tests.channels.cli.test_cli_prompts import COLUMNS, ROWS, exit_code, terminal
from tests.fakes.anthropic_server import FakeAnthropic, text, tool_use
from tests.ops.test_cli import base_env, run_cli, write_config
from tests.support.vt_screen import VtScreen

PASTE = b"\x1b[200~first line\r\nsecond line\r\nthird line\x1b[201~"
CSRF = re.compile(r'name="csrf" value="([0-9a-f]{64})"')


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def user_texts(fake) -> list[str]:
    texts = []
    for request in fake.fake.requests:
        content = request.json["messages"][-1]["content"]
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        texts.append(" | ".join(b["text"] for b in blocks if b.get("type") == "text"))
    return texts


def approve_in_console(env: dict[str, str], db: Path) -> None:
    """What the operator does in a browser: open a login link, press Approve."""
    link = run_cli("console", "login", env=env).stdout.strip()
    browser = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    base = link.split("/login/")[0]
    browser.open(link, timeout=30).read()
    token = CSRF.search(browser.open(f"{base}/", timeout=30).read().decode()).group(1)
    with sqlite3.connect(db) as store:
        (approval,) = store.execute("SELECT id FROM approvals WHERE status = 'pending'").fetchone()
    form = urllib.parse.urlencode({"csrf": token, "choice": "approve"}).encode()
    browser.open(f"{base}/approvals/{approval}", data=form, timeout=30).read()


def test_a_person_edits_pastes_and_gets_an_approval_withdrawn_when_the_console_answers(tmp_path):
    write_config(tmp_path, '[senders]\n"cli:local" = "supervised"\n'
                           f'[console]\nenabled = true\nport = {free_port()}\n')
    with FakeAnthropic.start_in_thread() as fake:
        fake.script(text("one"), text("pasted"), text("two lines"),
                    tool_use("fs_write", {"path": "a.txt", "content": "x"}), text("Written."))
        env = base_env(tmp_path, ANTHROPIC_API_KEY="test", ANTHROPIC_BASE_URL=fake.base_url)
        with terminal(env) as (pid, fd, screen):
            screen.expect(b"you> ")
            os.write(fd, b"helo\x1b[Dl\r")           # a typo mended with the left arrow
            screen.expect(b"myclaw> one")
            os.write(fd, PASTE + b"\r")              # three lines pasted, then Enter
            screen.expect(b"myclaw> pasted")
            os.write(fd, b"two\x1b\rlines\r")       # Alt-Enter between the two lines
            screen.expect(b"myclaw> two lines")
            os.write(fd, b"\x03")                    # Ctrl-C at an idle prompt
            screen.expect(b"(press Ctrl-C again or Ctrl-D to quit)")
            os.write(fd, b"write a file\r")
            screen.expect(b"Approve? [y]es / [N]o / [a]lways: files in the workspace root in this chat: ")
            os.write(fd, b"than")                    # typed into the question, not sent
            screen.expect(b"than")
            approve_in_console(env, tmp_path / "data" / "myclaw.db")
            screen.expect(b"(the request to run fs_write was approved by console:operator)")
            screen.expect(b"myclaw> Written.")
            os.write(fd, b"ks\r")                    # the next message's draft, finished
            screen.expect(b"myclaw> ok: thanks")
            read = VtScreen(COLUMNS, ROWS).read(screen.raw)
            asked = read.index("you> write a file")
            outcome = read.index("(the request to run fs_write was approved by console:operator)")
            assert not [line for line in read[outcome:] if "Approve?" in line], read[outcome:]
            assert read[outcome:].count("you> thanks") == 1, read[outcome:]
            assert "you>" not in read[asked:-1], "a prompt that gave way was left on the screen"
            assert b"CPR" not in screen.seen   # prompt_toolkit never asked where the cursor is
            os.write(fd, b"\x04")                    # Ctrl-D on an empty line
            screen.expect(b"bye")
            assert exit_code(pid) == 0
        sent = user_texts(fake)
    assert sent[:3] == ["hello", "first line\nsecond line\nthird line", "two\nlines"]
    assert sent[-1] == "thanks" and len(sent) == 6   # the paste was one message, one model call
    assert (tmp_path / "ws" / "a.txt").read_text() == "x"
    (history,) = (tmp_path / "data" / "terminal").iterdir()
    assert stat.S_IMODE(history.stat().st_mode) == 0o600
    assert "+hello" in history.read_text() and "+two\n+lines" in history.read_text()
