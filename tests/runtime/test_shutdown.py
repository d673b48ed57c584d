"""Graceful shutdown: SIGTERM with a turn in flight finishes it (or, past the grace period,
cancels it with its state recorded), closes the channels and the store; nothing is lost."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.fakes.anthropic_server import FakeAnthropic, text
from tests.fakes.telegram_server import FakeTelegram

ROOT = Path(__file__).resolve().parents[2]
ADA = 4242
STARTUP_S = 90


def write_config(tmp_path: Path, tg: FakeTelegram, grace: float, extra: str = "") -> Path:
    path = tmp_path / "myclaw.toml"
    path.write_text(
        f'[agent]\nworkspace = "{tmp_path / "ws"}"\nllm_max_retries = 0\n'
        f"shutdown_grace_seconds = {grace}\n"
        f'[store]\npath = "{tmp_path / "data" / "myclaw.db"}"\n'
        f'[senders]\n"telegram:{ADA}" = "full"\n'
        f'[telegram]\nbase_url = "{tg.base_url}"\nbase_file_url = "{tg.base_file_url}"\n{extra}')
    path.chmod(0o600)
    return path


async def start_bot(tmp_path: Path, tg: FakeTelegram, fake: FakeAnthropic, grace: float,
                    extra: str = ""):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT),
           "MYCLAW_CONFIG": str(write_config(tmp_path, tg, grace, extra)), "ANTHROPIC_API_KEY": "test",
           "ANTHROPIC_BASE_URL": fake.base_url, "TELEGRAM_BOT_TOKEN": tg.token}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "run", env=env, cwd=ROOT,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    await polling_started(proc, tg)
    return proc


async def polling_started(proc: asyncio.subprocess.Process, tg: FakeTelegram) -> None:
    """The bot's first getUpdates. A bot that exits or does not poll in time fails the test with
    its own last words. The limit is generous: on a loaded machine (parallel test workers)
    importing the bot alone can take many seconds."""
    polling = asyncio.ensure_future(tg.wait_for("getUpdates", timeout=STARTUP_S))
    exited = asyncio.ensure_future(proc.wait())
    await asyncio.wait({polling, exited}, return_when=asyncio.FIRST_COMPLETED)
    exited.cancel()
    if polling.done() and polling.exception() is None:
        return
    polling.cancel()
    if proc.returncode is None:
        proc.kill()
    _, stderr = await proc.communicate()
    raise AssertionError(f"myclaw run did not start polling (exit code {proc.returncode}): "
                         f"{stderr.decode()[-2000:]}")


def stored_history(tmp_path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(tmp_path / "data" / "myclaw.db") as db:
        rows = db.execute("SELECT role, content FROM messages ORDER BY id").fetchall()
    return [(role, json.loads(content)[-1].get("text", "")) for role, content in rows]


async def test_sigterm_lets_the_turn_in_flight_finish_and_deliver_its_answer(tmp_path):
    async with FakeTelegram() as tg, FakeAnthropic() as fake:
        proc = await start_bot(tmp_path, tg, fake, grace=20)
        fake.script(text("answer after a while", delay=1.5))
        tg.private_message(ADA, "a slow question")
        await fake.wait_for_requests(1, timeout=20)
        proc.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 0, stderr.decode()[-2000:]
        assert any("answer after a while" in m.get("text", "") for m in tg.messages.values())
        assert "Traceback" not in stderr.decode()
    assert stored_history(tmp_path) == [("user", "a slow question"),
                                        ("assistant", "answer after a while")]


async def test_sigterm_past_the_grace_period_cancels_and_the_next_start_goes_on(tmp_path):
    async with FakeTelegram() as tg, FakeAnthropic() as fake:
        proc = await start_bot(tmp_path, tg, fake, grace=0.5)
        fake.script(text("never delivered", delay=30))
        tg.private_message(ADA, "remember me")
        await fake.wait_for_requests(1, timeout=20)
        proc.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(proc.communicate(), 20)
        assert proc.returncode == 0, stderr.decode()[-2000:]
        assert stored_history(tmp_path) == [("user", "remember me")]

        proc = await start_bot(tmp_path, tg, fake, grace=5)
        fake.script(text("I remember"))
        tg.private_message(ADA, "still there?")
        await fake.wait_for_requests(2, timeout=20)
        await tg.wait_until(lambda: any("I remember" in m.get("text", "")
                                        for m in tg.messages.values()), timeout=20)
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.communicate(), 20)
        sent = fake.last_request.json["messages"]
        assert [b["text"] for b in sent[0]["content"]] == ["remember me", "still there?"]


async def test_myclaw_run_serves_healthz_when_enabled(tmp_path):
    import re
    import socket
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with FakeTelegram() as tg, FakeAnthropic() as fake:
        health = f'[health]\nenabled = true\nlisten = "127.0.0.1"\nport = {port}\n'
        proc = await start_bot(tmp_path, tg, fake, grace=5, extra=health)
        try:
            def get() -> tuple[int, dict]:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as answer:
                    return answer.status, json.loads(answer.read())
            status, body = await asyncio.to_thread(get)
        finally:
            proc.send_signal(signal.SIGTERM)
            _, stderr = await asyncio.wait_for(proc.communicate(), 20)
    assert status == 200 and body["store"] is True and body["channels"] == {"telegram": True}
    assert re.search(r"health endpoint on http://127\.0\.0\.1:\d+/healthz", stderr.decode())
