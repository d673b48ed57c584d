"""Voice replies in the terminal, driven through `myclaw chat`: the answer printed, then the
spoken answer saved as an OGG/Opus file (real espeak-ng) whose path is shown; off, nothing."""

from __future__ import annotations

import re
from pathlib import Path

from tests.fakes.anthropic_server import FakeAnthropic, text
from tests.ops.test_cli import base_env, run_cli
from tests.support.voice_support import assert_voice_message

SAVED = re.compile(r"🔊 voice reply \(\d+\.\d s\): (\S+\.ogg)")


def chat(tmp_path: Path, stdin: str, *answers: str):
    with FakeAnthropic.start_in_thread() as fake:
        fake.script(*(text(a) for a in answers))
        env = base_env(tmp_path, ANTHROPIC_API_KEY="sk-test", ANTHROPIC_BASE_URL=fake.base_url)
        return run_cli("chat", env=env, stdin=stdin)


def test_voice_on_in_the_terminal_prints_the_answer_then_the_saved_voice_file(tmp_path):
    proc = chat(tmp_path, "/voice on\nhow are you?\n", "I am fine, thank you.")
    assert proc.returncode == 0, proc.stderr
    assert "Voice replies: on" in proc.stdout
    assert proc.stdout.index("I am fine, thank you.") < proc.stdout.index("🔊 voice reply")
    (path,) = SAVED.findall(proc.stdout)
    saved = Path(path)
    assert saved.parent == tmp_path / "data" / "voice" and saved.stat().st_mode & 0o777 == 0o600
    assert_voice_message(saved.read_bytes())


def test_voice_off_and_auto_for_typed_messages_in_the_terminal_save_nothing(tmp_path):
    proc = chat(tmp_path, "hello\n/voice off\nagain\n", "Hi.", "Hi again.")
    assert proc.returncode == 0, proc.stderr
    assert "Hi again." in proc.stdout and "🔊" not in proc.stdout
    assert not (tmp_path / "data" / "voice").exists()
