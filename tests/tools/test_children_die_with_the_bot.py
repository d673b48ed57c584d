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
from tests.support.waiting import eventually

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


SHELL_BOT = textwrap.dedent("""
    import asyncio, sys
    sys.path.insert(0, {root!r})
    from tools._proc import run_process

    async def main():
        command = 'echo $$ > {pidfile}; exec sleep 300'
        await run_process(["/bin/sh", "-c", command], {tmp!r}, {{"PATH": "/usr/bin:/bin"}},
                          timeout=600, cap=1000, stop=asyncio.Event())
    asyncio.run(main())
""")


async def test_a_killed_bot_takes_a_running_command_down_with_it(tmp_path: Path):
    pidfile = tmp_path / "command.pid"
    script = SHELL_BOT.format(root=str(Path.cwd()), pidfile=pidfile, tmp=str(tmp_path))
    bot = await asyncio.create_subprocess_exec(sys.executable, "-c", script)
    await eventually(lambda: pidfile.exists() and pidfile.read_text().strip(),
                     "the command wrote its pid", timeout=30)
    command = int(pidfile.read_text())
    os.kill(bot.pid, signal.SIGKILL)
    try:
        assert await all_gone([command], within=5.0)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(command, signal.SIGKILL)
        await asyncio.wait_for(bot.wait(), 10)


def test_a_command_whose_bot_died_before_it_could_ask_for_the_signal_does_not_run(monkeypatch):
    from tools import _proc

    monkeypatch.setattr(_proc.os, "getpid", lambda: 1)   # "the bot" is some other process
    in_the_child = _proc.dies_with_us()
    monkeypatch.undo()
    done = subprocess.run(["/bin/sh", "-c", "echo ran"], preexec_fn=in_the_child,
                          capture_output=True, timeout=30)
    assert (done.returncode, done.stdout) == (137, b"")


def test_a_command_asks_to_die_with_its_bot():
    from tools import _proc

    ask = ("import ctypes; v = ctypes.c_int(); "
           "ctypes.CDLL(None).prctl(2, ctypes.byref(v)); print(v.value)")   # PR_GET_PDEATHSIG
    done = subprocess.run([sys.executable, "-c", ask], preexec_fn=_proc.dies_with_us(),
                          capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == str(int(signal.SIGKILL))


def stdio_server_run(monkeypatch, bot_pid: int | None) -> subprocess.CompletedProcess[bytes]:
    """Start "echo started" as an MCP stdio server would be started, by the bot `bot_pid`."""
    from bot.toolbox.mcp import transport
    from bot.toolbox.mcp.config import ServerSpec

    if bot_pid is not None:
        monkeypatch.setattr(transport.os, "getpid", lambda: bot_pid)
    params = transport.stdio_parameters(ServerSpec(name="s", command="echo", args=("started",)),
                                        {"PATH": "/usr/bin:/bin"})
    monkeypatch.undo()
    return subprocess.run([params.command, *params.args], env=params.env, capture_output=True,
                          timeout=30)


def test_an_mcp_stdio_server_starts_under_the_bot_that_asked_for_it(monkeypatch):
    done = stdio_server_run(monkeypatch, None)
    assert (done.returncode, done.stdout) == (0, b"started\n")


def test_an_mcp_stdio_server_whose_bot_died_before_setpriv_ran_does_not_start(monkeypatch):
    done = stdio_server_run(monkeypatch, 1)   # its parent is not the bot that asked any more
    assert (done.returncode, done.stdout) == (137, b"")
