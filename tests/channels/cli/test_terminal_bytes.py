"""Any bytes in, valid text out, at the terminal: a byte that is not UTF-8 (0xFF, or "é" from a
Latin-1 terminal) typed, pasted or piped into `myclaw chat` reaches the model as U+FFFD, the
person is told so, and the conversation goes on (no traceback)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.channels.cli.test_cli_prompts import exit_code, terminal
from tests.channels.cli.test_terminal_as_typed import user_texts
from tests.fakes.anthropic_server import FakeAnthropic, text
from tests.ops.test_cli import ROOT, base_env

LATIN1_CAFE = "café".encode("latin-1")   # b"caf\xe9": not UTF-8
TOLD = b"could not be read"


def test_invalid_bytes_typed_and_pasted_at_a_terminal_become_replacement_characters(tmp_path):
    with FakeAnthropic.start_in_thread() as fake:
        fake.script(text("one"), text("two"), text("three"))
        env = base_env(tmp_path, ANTHROPIC_API_KEY="test", ANTHROPIC_BASE_URL=fake.base_url)
        with terminal(env) as (pid, fd, screen):
            screen.expect(b"you> ")
            os.write(fd, LATIN1_CAFE + b" \xff\r")
            screen.expect(TOLD)
            screen.expect(b"myclaw> one")
            os.write(fd, b"\x1b[200~pasted \xed\xa0\x80 lone\x1b[201~\r")   # an encoded surrogate
            screen.expect(b"myclaw> two")
            os.write(fd, "fine \u202eRTL e\u0301\r".encode())
            screen.expect(b"myclaw> three")
            os.write(fd, b"\x04")
            screen.expect(b"bye")
            assert exit_code(pid) == 0
        said = user_texts(fake)
        assert said[0] == "caf\ufffd \ufffd"
        assert said[1].startswith("pasted ") and said[1].endswith(" lone")
        assert "\ufffd" in said[1] and all(not 0xD800 <= ord(c) <= 0xDFFF for c in said[1])
        assert said[2] == "fine \u202eRTL e\u0301"


def test_invalid_bytes_piped_into_chat_become_replacement_characters(tmp_path):
    with FakeAnthropic.start_in_thread() as fake:
        fake.script(text("one"), text("two"))
        env = base_env(tmp_path, ANTHROPIC_API_KEY="test", ANTHROPIC_BASE_URL=fake.base_url)
        for locale in ({"LC_ALL": "C"}, {"LC_ALL": "C.UTF-8", "PYTHONIOENCODING": "utf-8"}):
            done = subprocess.run([sys.executable, "-m", "bot", "chat"], cwd=ROOT,
                                  input=LATIN1_CAFE + b"\n\xff\x00nul\n", capture_output=True,
                                  timeout=60, env={**env, **locale})
            assert done.returncode == 0, done.stderr.decode(errors="replace")
            assert b"Traceback" not in done.stderr and TOLD in done.stdout
            fake.script(text("one"), text("two"))
        assert user_texts(fake)[:2] == ["caf\ufffd", "\ufffd\ufffdnul"]
        assert user_texts(fake)[2:4] == ["caf\ufffd", "\ufffd\ufffdnul"]
