"""/stop during a long shell_run kills the whole process tree within a second."""

from __future__ import annotations

import asyncio
import os
import time

from bot.events import CollectingSink, IncomingMessage, Notice, ToolStarted
from tests.fakes.anthropic_server import text, tool_use


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A killed child not yet reaped by its parent shows as a zombie: gone for our purpose.
    with open(f"/proc/{pid}/stat") as handle:
        return handle.read().split(") ", 1)[1].split()[0] != "Z"


class Watch(CollectingSink):
    def __init__(self) -> None:
        super().__init__()
        self.started = asyncio.Event()

    async def emit(self, event) -> None:
        await super().emit(event)
        if isinstance(event, ToolStarted):
            self.started.set()


async def test_stop_during_a_long_shell_command_kills_its_process_tree(app_factory, fake_anthropic):
    app = await app_factory({"profiles": {"default": {"auto_approve": ["shell_run"]}}})
    pids = app.config.workspace / "pids"
    command = f"(sleep 30 & echo $! >> {pids.name}; wait) & echo $! >> {pids.name}; sleep 30"
    fake_anthropic.script(tool_use("shell_run", {"command": command}))
    sink = Watch()
    turn = asyncio.create_task(app.agent.handle(IncomingMessage("cli:local", "local", "go"), sink))
    await asyncio.wait_for(sink.started.wait(), 10)
    async with asyncio.timeout(10):
        # The shell's own processes give no event to wait on: poll the file they write.
        while not pids.exists() or len(pids.read_text().split()) < 2:  # noqa: ASYNC110
            await asyncio.sleep(0.02)
    tree = [int(p) for p in pids.read_text().split()]
    assert all(alive(p) for p in tree)

    stopped_at = time.monotonic()
    await app.agent.handle(IncomingMessage("cli:local", "local", "/stop"), CollectingSink())
    await asyncio.wait_for(turn, 5)
    async with asyncio.timeout(1.0):
        while any(alive(p) for p in tree):  # noqa: ASYNC110 — process death has no event here
            await asyncio.sleep(0.02)
    assert time.monotonic() - stopped_at < 1.0
    assert any(n.text == "Stopped." for n in sink.of(Notice))

    fake_anthropic.script(text("ok"))
    await app.agent.handle(IncomingMessage("cli:local", "local", "next"), CollectingSink())
    result = fake_anthropic.last_request.json["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["content"] == "(cancelled)"
