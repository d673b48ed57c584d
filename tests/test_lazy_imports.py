"""Channel libraries are imported only when that channel is configured (start-up and memory)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import asyncio, json, sys, tempfile
from bot.config import settings as config_mod
from bot.app import App
from bot.ops.cli.main import build_parser

async def main():
    build_parser()  # every subcommand module, as `myclaw` loads them
    tmp = tempfile.mkdtemp()
    cfg = config_mod.from_dict({"agent": {"workspace": tmp + "/ws"}, "store": {"path": tmp + "/db"}},
                               env={"HOME": tmp, "ANTHROPIC_API_KEY": "x"})
    app = await App.open(cfg)
    await app.start_services()
    loaded = sorted({m.split(".")[0] for m in sys.modules} & {"telegram", "discord", "mcp"})
    await app.close()
    print(json.dumps({"channels": app.configured_channels(), "loaded": loaded}))

asyncio.run(main())
"""


def test_without_tokens_neither_telegram_nor_discord_nor_mcp_is_imported():
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"channels": [], "loaded": []}
