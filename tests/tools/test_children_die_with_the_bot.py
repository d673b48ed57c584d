"""Child processes die with the bot: a SIGKILLed bot leaves no MCP stdio server behind, even one
that would not notice its stdin closing."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support.process_tree import all_gone

# A "server" that never speaks MCP and ignores the end of its stdin: only a signal ends it. It
# tells its pid on stderr, which it shares with the bot.
DEAF_SERVER = ("import os, signal, sys\nsys.stdin.close()\n"
               "print(os.getpid(), file=sys.stderr, flush=True)\nwhile True:\n    signal.pause()\n")

BOT = textwrap.dedent("""
    import asyncio, sys
    sys.path.insert(0, {root!r})
    from pathlib import Path
    from bot.toolbox.mcp.client import MCPManager
    from bot.core.policy import Profile
    from bot.toolbox.registry import Registry
    from tests.conftest import make_config

    async def main():
        servers = {{"deaf": {{"command": sys.executable, "args": ["-c", {server!r}],
                              "startup_timeout_seconds": 600}}}}
        config = make_config(Path({tmp!r}), {{"mcp": {{"servers": servers}}}})
        await MCPManager(config, Registry(Profile.from_config(config.profile()))).start()
    asyncio.run(main())
""")


async def test_a_killed_bot_takes_its_mcp_stdio_server_down_with_it(tmp_path: Path):
    script = BOT.format(root=str(Path.cwd()), server=DEAF_SERVER, tmp=str(tmp_path))
    bot = await asyncio.create_subprocess_exec(sys.executable, "-c", script,
                                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    server = int(await asyncio.wait_for(bot.stderr.readline(), 30))
    os.kill(bot.pid, signal.SIGKILL)
    try:
        assert await all_gone([server], within=5.0)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(server, signal.SIGKILL)   # a survivor must not outlive the test either
        # (Waiting for the bot also waits for its pipes, which a survivor would hold open.)
        await asyncio.wait_for(bot.wait(), 10)
