"""Channel libraries, and model SDKs, are imported only when the configuration uses them
(start-up and memory)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

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
