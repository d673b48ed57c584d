"""Outside text reaches the model only inside the untrusted wrapper — for every tool, on its
result path and its error path.

A hostile world is planted around a real App: workspace files and file names (a symlink whose
target is named by someone else), web pages, response headers, redirects and HTTP errors, a
stored memory, the stronger model's answer and error, an MCP server's result and error text, a
custom tool. Every one carries MARK. Each tool is then called through the whole agent (the fake
Anthropic API plays the model, approvals are granted), and the `tool_result` the model receives
next is checked: MARK may appear only inside an <untrusted-…> block.

The wrapping is the dispatcher's job, decided from `meta.returns_untrusted`; a tool that quotes
outside text while declaring it returns none fails here.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from bot.core.approval_cards import ApprovalNeeded
from bot.core.events import CollectingSink, IncomingMessage
from bot.core.tool import BaseTool, CallContext, ToolExternalError, ToolMeta
from bot.runtime.services import Network
from bot.toolbox.mcp.client import MCPManager
from tests.fakes.anthropic_server import error, text, tool_use
from tests.support import conformance
from tests.support.runtime_tools import answer
from tests.toolbox.test_mcp import echo_server

MARK = "qzx-outside-4d1"
ME = "cli:local"
BRAVE = "api.search.brave.com"


def web(request: httpx.Request) -> httpx.Response:
    """Every site of the planted world; MARK in bodies, headers, redirect targets."""
    path = request.url.path
    if request.headers.get("host") == BRAVE:   # the guard connects to the address it resolved
        if "fail" in str(request.url):
            return httpx.Response(500, text=f"search broke: {MARK}")
        results = [{"title": f"Result {MARK}", "url": f"https://{MARK}.example/",
                    "description": f"snippet {MARK}"}]
        return httpx.Response(200, json={"web": {"results": results}})
    if path == "/binary":  # a plain MIME type, so it used to be quoted in the error as is
        return httpx.Response(200, headers={"content-type": f"application/x-{MARK}"}, content=b"\0")
    if path == "/moved":
        return httpx.Response(302, headers={"location": f"/{MARK}/gone"})
    if path.endswith("/gone"):
        return httpx.Response(404, text=f"not here {MARK}")
    if path == "/broken":
        return httpx.Response(503, text=f"down {MARK}", headers={"x-note": MARK})
    page = f"<html><head><title>{MARK}</title></head><body><p>Page {MARK}</p></body></html>"
    return httpx.Response(200, headers={"content-type": "text/html", "x-note": MARK}, text=page)


class FileQuoter(BaseTool):
    """A custom tool that reads a workspace file: its result and its error quote it."""

    meta = ToolMeta(
        name="file_quoter", description="Quotes a file.", risk="low",
        schema={"type": "object", "additionalProperties": False,
                "properties": {"path": {"type": "string"}, "fail": {"type": "boolean"}},
                "required": ["path"]},
        has_side_effects=False, returns_untrusted=True, supports_dry_run=True,
        capability_required="custom:file_quoter")

    async def execute(self, ctx: CallContext, path: str, fail: bool = False, **_: Any) -> dict:
        content = (ctx.workspace / path).read_text()
        if fail:
            raise ToolExternalError(f"cannot use {content}")
        return {"content": content}


# Per tool: argument sets that make it read MARK (result path) and fail quoting it (error path).
# The arguments themselves never contain MARK: it can only come from the world.
SCENARIOS: dict[str, list[dict[str, Any]]] = {
    "fs_read": [{"path": "notes.txt"}, {"path": "dir_link"}],
    "fs_write": [{"path": "link.txt", "content": "new"}, {"path": "dir_link", "content": "x"}],
    "fs_edit": [{"path": "notes.txt", "old_text": "second", "new_text": "2nd"},
                {"path": "dir_link", "old_text": "a", "new_text": "b"}],
    "glob_list": [{"pattern": "*"}, {"pattern": "**/*"}],
    "shell_run": [{"command": "cat notes.txt"}, {"command": "ls; exit 3"}],
    "web_fetch": [{"url": "http://pages.example/"}, {"url": "http://pages.example/binary"},
                  {"url": "http://pages.example/moved"}],
    "http_request": [{"method": "GET", "url": "http://pages.example/"},
                     {"method": "GET", "url": "http://pages.example/broken"},
                     {"method": "GET", "url": "http://pages.example/moved"}],
    "web_search": [{"query": "tomatoes"}, {"query": "fail"}],
    "memory_fetch": [{"query": "favourite colour"}],
    "supra_llm": [{"question": "What is it?"}, {"question": "And now?"}],
    "echo__getenv": [{"name": "CONFORMANCE_MARK"}],
    "echo__fail_with_env": [{"name": "CONFORMANCE_MARK"}],
    "file_quoter": [{"path": "notes.txt"}, {"path": "notes.txt", "fail": True}],
}
# What the stronger model answers, per supra_llm scenario (in order): an answer repeating its
# context, then an API error whose message the remote side wrote.
SUPRA_REPLIES = [text(f"The context said {MARK}"),
                 error(400, "invalid_request_error", f"bad request: {MARK}")]


@pytest.fixture
async def world(app_factory):
    app = await app_factory(
        {"senders": {ME: "full"}, "tools": {"net": {"allow_hosts": []}},
         "agent": {"llm_max_retries": 0},
         "mcp": {"servers": {"echo": echo_server(env={"CONFORMANCE_MARK": MARK})}}},
        env={"BRAVE_API_KEY": "brave-test-key"})
    workspace = app.config.workspace
    (workspace / "notes.txt").write_text(f"first {MARK}\nsecond\nthird {MARK}\n")
    (workspace / f"{MARK}.txt").write_text("target\n")
    (workspace / "link.txt").symlink_to(f"{MARK}.txt")
    (workspace / f"{MARK}-dir").mkdir()
    (workspace / "dir_link").symlink_to(f"{MARK}-dir")

    async def resolver(host: str) -> list[str]:
        return ["93.184.216.34"]   # public, so the guard lets it through to the fake transport

    app.services.network = Network(resolver=resolver, http_transport=httpx.MockTransport(web))
    memory = app.services.registry.get("memory_store")
    await memory.execute(app.services.call_context(sender=ME, level="full", session_id="s", chat="c",
                                                   workspace=workspace),
                         text=f"My favourite colour is {MARK}")
    app.services.registry.register(FileQuoter(), "tests")
    manager = MCPManager(app.config, app.services.registry, base_delay=0.05)
    await manager.start()
    yield app
    await manager.stop()


async def what_the_model_reads(app, fake_anthropic, name: str, args: dict[str, Any],
                               between: list[Any]) -> str:
    """Run one call through the agent (approving it if asked); the tool_result's content."""
    call_id = f"call_{len(fake_anthropic.requests)}"
    fake_anthropic.script(tool_use(name, args, id=call_id), *between, text("ok"))
    sink = CollectingSink()
    await app.agent.handle(IncomingMessage(ME, "local", f"please use {name}", "cli"), sink)
    for needed in sink.of(ApprovalNeeded):
        await answer(app.agent, needed.approval.id, ME, "approve", CollectingSink())
    await app.agent.queue.drain(20)
    for request in reversed(fake_anthropic.requests):
        for message in request.json.get("messages", []):
            for block in message["content"] if isinstance(message["content"], list) else []:
                if block.get("type") == "tool_result" and block.get("tool_use_id") == call_id:
                    content = block["content"]
                    return content if isinstance(content, str) else json.dumps(content)
    raise AssertionError(f"{name} never produced a tool_result for the model")


async def test_outside_text_reaches_the_model_only_inside_the_wrapper(world, fake_anthropic):
    app = world
    names = app.services.registry.names()
    # share_private reads only in a group conversation: its wrapping is held by
    # tests/runtime/test_audience.py.
    missing = [n for n in names if app.services.registry.get(n).meta.returns_untrusted
               and n not in SCENARIOS and not n.startswith("echo__") and n != "share_private"]
    assert missing == [], f"tools that read outside content without a scenario here: {missing}"
    leaks, reached = [], set()
    for name in sorted(names):
        tool = app.services.registry.get(name)
        scenarios = SCENARIOS.get(name) or ([conformance.sample_args(tool)]
                                            if not name.startswith("echo__")
                                            and name != "share_private" else [])
        supra = list(SUPRA_REPLIES)
        for args in scenarios:
            between = [supra.pop(0)] if name == "supra_llm" else []
            content = await what_the_model_reads(app, fake_anthropic, name, args, between)
            if MARK in content:
                reached.add(name)
            if MARK in conformance.outside_wrappers(content):
                leaks.append(f"{name} {args}: {content[:300]}")
    assert leaks == [], "outside text reached the model unwrapped:\n" + "\n".join(leaks)
    # The world really reached every reading tool (else the check above proves nothing).
    assert set(SCENARIOS) <= reached, f"never saw the planted text: {set(SCENARIOS) - reached}"


def test_the_check_catches_text_outside_a_wrapper():
    wrapped = '<untrusted-ab12 source="x" retrieved_at="t">\n"qzx"\n</untrusted-ab12>\nnote'
    assert "qzx" not in conformance.outside_wrappers(wrapped)
    assert "qzx" in conformance.outside_wrappers("error: qzx\n" + wrapped)
    forged = '<untrusted-ab12 source="x">"a"</untrusted-ffff> qzx </untrusted-ab12>'
    assert "qzx" not in conformance.outside_wrappers(forged)  # the nonce pairs the tags
