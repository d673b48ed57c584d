"""An MCP tool through the whole agent: real runtime and SDK, fake Anthropic on 127.0.0.1, the
echo MCP server over stdio. High risk without preview: the full-autonomy sender is asked, the
approval names the server and its tool above every argument, and the call runs only after
Approve."""

from __future__ import annotations

import pytest

from bot.core.approval_cards import ApprovalNeeded
from bot.core.events import CollectingSink, IncomingMessage
from bot.toolbox.mcp.client import MCPManager
from tests.fakes.anthropic_server import reply, text, tool_use
from tests.support.runtime_tools import answer
from tests.toolbox.test_mcp import echo_server


@pytest.fixture
async def app_with_echo(app_factory):
    app = await app_factory({"mcp": {"servers": {"echo": echo_server()}}})
    manager = MCPManager(app.config, app.services.registry, base_delay=0.05)
    await manager.start()
    yield app
    await manager.stop()


def from_terminal(text_: str) -> IncomingMessage:
    return IncomingMessage(sender="cli:local", chat="local", text=text_, channel="cli")


async def test_an_mcp_call_asks_with_the_no_preview_text_and_runs_after_approval(app_with_echo,
                                                                               fake_anthropic):
    app = app_with_echo
    fake_anthropic.script(reply(text("Echoing."), tool_use("echo__echo", {"text": "ciao"})))
    sink = CollectingSink()
    await app.agent.handle(from_terminal("echo ciao"), sink)
    catalog = {t["name"] for t in fake_anthropic.requests[0].json["tools"]}
    assert {"echo__echo", "echo__add"} <= catalog
    (needed,) = sink.of(ApprovalNeeded)
    view = needed.approval
    assert view.tool == "echo__echo" and view.risk == "high"
    assert view.summary == ("No preview: the MCP server echo is asked to run its tool echo with "
                            'these arguments:\n{"text": "ciao"}')
    assert len(fake_anthropic.requests) == 1  # nothing ran yet: the turn waits for the tap

    fake_anthropic.script(text("The server said ciao."))
    follow = CollectingSink()
    resolution = await answer(app.agent, view.id, "cli:local", "approve", follow)
    await app.agent.queue.drain(10)
    assert resolution.ok and follow.text == "The server said ciao."
    result = fake_anthropic.last_request.json["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and not result.get("is_error")
    assert "<untrusted-" in result["content"] and "ciao" in result["content"]
    receipts = await app.services.store.fetchall("SELECT tool, approver FROM receipts")
    assert [(r["tool"], r["approver"]) for r in receipts] == [("echo__echo", "cli:local")]
