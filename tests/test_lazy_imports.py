"""Channel libraries, model SDKs and every optional part (MCP, the console, media decoders,
PDF, PostgreSQL, cron, templates, webhooks, JSON Schema) are imported only when the
configuration uses them (start-up and memory)."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.telegram_server import FakeTelegram
from tests.support.waiting import eventually

ROOT = Path(__file__).resolve().parent.parent
STARTUP_S = 90
# What a Telegram bot polling for updates, with no MCP server, console, health endpoint, jobs,
# PostgreSQL or other model provider configured, has no use for.
UNUSED_BY_TELEGRAM_POLLING = {"discord", "mcp", "prompt_toolkit", "PIL", "pypdf", "asyncpg",
                              "croniter", "dateutil", "jinja2", "jsonschema", "slack_bolt",
                              "slack_sdk", "openai", "aiohttp.web", "channels.discord",
                              "channels.slack", "channels.whatsapp", "channels.cli",
                              "channels.telegram.webhook", "bot.ops.console.server",
                              "bot.ops.health", "bot.toolbox.mcp", "bot.store.postgres",
                              # the other commands' code: `myclaw run` parses with its own only
                              "bot.ops.cli.safety", "bot.ops.cli.doctor", "bot.ops.cli.console",
                              "bot.ops.cli.jobs", "bot.ops.cli.store_admin", "bot.ops.cli.models",
                              # a tool's machinery, with its first call: the shell's sandbox and
                              # command classifier, web_fetch's HTML parser
                              "tools._bwrap", "tools._shell_risk", "tools._shell_shapes",
                              "tools._shell_secrets", "tools._html", "html.parser",
                              # photos, documents, voice notes and spoken answers: with the
                              # first message (or answer) that has one
                              "bot.media.intake", "bot.media.documents", "bot.media.transcribe",
                              "bot.media.speech"}
# `myclaw run`, and on SIGUSR1 the loaded modules (top-level names and dotted ones) to argv[1].
RUN_AND_REPORT = """
import json, signal, sys
out = sys.argv[1]
def report(*_):
    names = set(sys.modules) | {m.split(".")[0] for m in sys.modules}
    with open(out + ".tmp", "w") as f:
        json.dump(sorted(names), f)
    import os; os.replace(out + ".tmp", out)
signal.signal(signal.SIGUSR1, report)
from bot.ops.cli import main
sys.exit(main(["run"]))
"""

PROBE = """
import asyncio, json, sys, tempfile
MODELS = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
from bot.config import settings as config_mod
from bot.app import App
from bot.ops.cli.main import build_parser

async def main():
    build_parser()  # every subcommand module, as `myclaw` loads them
    tmp = tempfile.mkdtemp()
    cfg = config_mod.from_dict({"agent": {"workspace": tmp + "/ws", **MODELS.get("agent", {})},
                                "models": MODELS.get("models", {}), "store": {"path": tmp + "/db"}},
                               env={"HOME": tmp, "ANTHROPIC_API_KEY": "x"})
    app = await App.open(cfg)
    await app.start_services()
    loaded = sorted({m.split(".")[0] for m in sys.modules}
                    & {"telegram", "discord", "mcp", "anthropic", "openai"})
    await app.close()
    print(json.dumps({"channels": app.configured_channels(), "loaded": loaded}))

asyncio.run(main())
"""


def test_without_tokens_neither_telegram_nor_discord_nor_mcp_nor_openai_is_imported():
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"channels": [],
                                                                "loaded": ["anthropic"]}


def test_a_config_of_only_local_models_imports_openai_and_not_anthropic():
    local = {"provider": "openai", "base_url": "http://127.0.0.1:11434/v1", "model": "qwen3:14b"}
    models = {"models": {"local": local},
              "agent": {"model": "local", "small_model": "local", "supra_model": "local"}}
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(models)], capture_output=True,
                          text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1])["loaded"] == ["openai"]


async def _loaded_by_a_running_telegram_bot(tmp_path: Path, tg: FakeTelegram,
                                            fake: FakeAnthropic) -> set[str]:
    config = tmp_path / "myclaw.toml"
    config.write_text(f'[agent]\nworkspace = "{tmp_path / "ws"}"\n'
                      f'[store]\npath = "{tmp_path / "myclaw.db"}"\n'
                      f'[senders]\n"telegram:4242" = "full"\n'
                      f'[telegram]\nbase_url = "{tg.base_url}"\n'
                      f'base_file_url = "{tg.base_file_url}"\n')
    config.chmod(0o600)
    out = tmp_path / "modules.json"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT),
           "MYCLAW_CONFIG": str(config), "ANTHROPIC_API_KEY": "test",
           "ANTHROPIC_BASE_URL": fake.base_url, "TELEGRAM_BOT_TOKEN": tg.token}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", RUN_AND_REPORT, str(out), env=env, cwd=tmp_path,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        await tg.wait_for("getUpdates", timeout=STARTUP_S)
        tg.private_message(4242, "hello")
        await tg.wait_for("sendMessage", timeout=STARTUP_S)
        proc.send_signal(signal.SIGUSR1)
        await eventually(out.exists, "the module report")
        return set(json.loads(out.read_text()))
    finally:
        proc.terminate()
        await proc.wait()


async def test_a_telegram_bot_polling_after_a_turn_has_imported_nothing_it_does_not_use(tmp_path):
    async with FakeTelegram() as tg, FakeAnthropic() as fake:
        loaded = await _loaded_by_a_running_telegram_bot(tmp_path, tg, fake)
    assert {"telegram", "anthropic", "channels.telegram"} <= loaded
    assert sorted(loaded & UNUSED_BY_TELEGRAM_POLLING) == []
