"""A real turn through `myclaw run` with known fake secrets: no log line contains them, every
line is JSON with --log-format json, and the turn line carries its fields."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

from tests.fakes.anthropic_server import FakeAnthropic, text, tool_use
from tests.fakes.telegram_server import FakeTelegram

ROOT = Path(__file__).resolve().parents[2]
ADA = 4242
ANTHROPIC_KEY = "sk-ant-api03-FAKEfakeFAKEfakeFAKEfake0123456789"
WEBHOOK_SECRET = "webhook-secret-FAKE-0123456789"


async def test_a_logged_turn_contains_no_secret_and_one_structured_turn_line(tmp_path):
    async with FakeTelegram() as tg, FakeAnthropic() as fake:
        config = tmp_path / "myclaw.toml"
        config.write_text(
            f'[agent]\nworkspace = "{tmp_path / "ws"}"\nllm_max_retries = 0\n'
            f'[store]\npath = "{tmp_path / "data" / "myclaw.db"}"\n'
            f'[senders]\n"telegram:{ADA}" = "full"\n'
            f'[telegram]\nbase_url = "{tg.base_url}"\nbase_file_url = "{tg.base_file_url}"\n')
        config.chmod(0o600)
        secrets = {"ANTHROPIC_API_KEY": ANTHROPIC_KEY, "TELEGRAM_BOT_TOKEN": tg.token,
                   "TELEGRAM_WEBHOOK_SECRET": WEBHOOK_SECRET}
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT),
               "ANTHROPIC_BASE_URL": fake.base_url, **secrets}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "--config", str(config), "--log-format", "json",
            "--log-level", "DEBUG", "run", env=env, cwd=ROOT,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        await tg.wait_for("getUpdates", timeout=30)
        fake.script(tool_use("time_now", {}), text("It is late."))
        tg.private_message(ADA, "what time is it?")
        await tg.wait_until(lambda: any("It is late." in m.get("text", "")
                                        for m in tg.messages.values()), timeout=20)
        proc.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0
    lines = [line for line in stderr.decode().splitlines() if line.strip()]
    assert len(lines) > 5
    for line in lines:
        for name, value in secrets.items():
            assert value not in line, f"{name} leaked into a log line: {line[:200]}"
        assert tg.token.split(":")[1] not in line
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    (turn,) = [r for r in records if r.get("msg") == "turn"]
    assert turn["sender"] == f"telegram:{ADA}" and turn["session"]
    assert turn["tools"] == ["time_now:allow"]
    assert turn["tokens"]["output_tokens"] > 0 and turn["latency_ms"] > 0
