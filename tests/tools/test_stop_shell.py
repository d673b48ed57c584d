"""/stop during a long shell_run kills the whole process tree within a second."""

from __future__ import annotations

import asyncio
import time

from bot.core.events import CollectingSink, IncomingMessage, Notice, ToolStarted
from tests.fakes.anthropic_server import text, tool_use
from tests.support.process_tree import all_gone, descendants


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
    # $! counts in the sandbox's own PID namespace: it only says that the tree is up.
    command = f"(sleep 30 & echo $! >> {pids.name}; wait) & echo $! >> {pids.name}; sleep 30"
    before = set(descendants())
    fake_anthropic.script(tool_use("shell_run", {"command": command}))
    sink = Watch()
    turn = asyncio.create_task(app.agent.handle(IncomingMessage("cli:local", "local", "go"), sink))
    await asyncio.wait_for(sink.started.wait(), 10)
    async with asyncio.timeout(10):
        # The shell's own processes give no event to wait on: poll the file they write.
        while not pids.exists() or len(pids.read_text().split()) < 2:  # noqa: ASYNC110
            await asyncio.sleep(0.02)
    tree = sorted(set(descendants()) - before)  # the sandbox, the shells and both sleeps
    assert len(tree) >= 5

    stopped_at = time.monotonic()
    await app.agent.handle(IncomingMessage("cli:local", "local", "/stop"), CollectingSink())
    await asyncio.wait_for(turn, 5)
    assert await all_gone(tree, within=1.0)
    assert time.monotonic() - stopped_at < 1.0
    assert any(n.text == "Stopped." for n in sink.of(Notice))

    fake_anthropic.script(text("ok"))
    await app.agent.handle(IncomingMessage("cli:local", "local", "next"), CollectingSink())
    result = fake_anthropic.last_request.json["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["content"] == "(cancelled)"
