"""Every way out is egress: each built-in says whether a call can put data in front of anyone
other than the requester (now, or later: a reminder, a job), and one that says it cannot is
proven local by what its module reaches. MCP tools are ways out unless marked local; a custom
tool that does not say is one."""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from bot.core.tool import BaseTool, CallContext, ToolMeta, egress_of
from bot.toolbox.mcp.config import parse_spec
from bot.toolbox.mcp.tools import tool_meta
from tests.core.test_conformance import TOOL_NAMES, default_registry
from tests.support import conformance

# What reaches past the requester: the network, the chat (an event sent to it), the scheduler
# (a post later). A module declared local may use none of them.
REACHING_IMPORTS = frozenset({"httpx", "aiohttp", "socket", "urllib", "requests", "http",
                              "tools._netguard", "tools._netaddr", "smtplib"})
REACHING_NAMES = frozenset({"FileOut"})
PORTS_OUT = frozenset({"jobs", "model"})
# Proven local by reason, not by text: the stronger model is the operator's own provider, the
# same that reads the whole conversation on every turn (no new audience).
LOCAL_BY_REASON = {"supra_llm": {"model"}}

# Each built-in, and what it is for a few calls: a way out (True) or not.
EXPECTED = {
    "web_fetch": [({"url": "https://example.org/"}, True)],
    "web_search": [({"query": "weather"}, True)],
    "http_request": [({"method": "GET", "url": "https://example.org/"}, True)],
    "send_file": [({"path": "chart.png"}, True)],
    "schedule": [({"action": "create", "name": "r", "at": "in 1 minute", "message": "hi"}, True),
                 ({"action": "list"}, False), ({"action": "cancel", "job_id": "x"}, False)],
    "shell_run": [({"command": "ls"}, False), ({"command": "curl x", "network": True}, True)],
    "fs_read": [({"path": "a.txt"}, False)],
    "fs_write": [({"path": "a.txt", "content": "x"}, False)],
    "fs_edit": [({"path": "a.txt", "old": "x", "new": "y"}, False)],
    "glob_list": [({"pattern": "*"}, False)],
    "memory_fetch": [({"query": "x"}, False)],
    "memory_store": [({"action": "store", "text": "x"}, False)],
    "time_now": [({}, False)],
    "supra_llm": [({"question": "why"}, False)],
    "share_private": [({"path": "notes.md"}, True)],
}


def _module_tree(tool) -> tuple[str, ast.AST]:
    module = sys.modules[type(tool).__module__]
    return module.__name__, ast.parse(Path(module.__file__).read_text())


def _reaches(tree: ast.AST, allowed: set[str]) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in REACHING_IMPORTS
                      or a.name in REACHING_IMPORTS]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module in REACHING_IMPORTS or node.module.split(".")[0] in REACHING_IMPORTS:
                found.append(node.module)
            found += [a.name for a in node.names if a.name in REACHING_NAMES]
        elif isinstance(node, ast.Attribute) and node.attr not in allowed:
            through_ports = isinstance(node.value, ast.Attribute) and node.value.attr == "ports"
            if node.attr in ("emit", "event_sink") or (through_ports and node.attr in PORTS_OUT):
                found.append(f".{node.attr}")
    return found


@pytest.mark.parametrize("name", TOOL_NAMES)
def test_every_builtin_declares_whether_it_is_a_way_out(tmp_path, name):
    conformance.check_egress_declared(default_registry(tmp_path).get(name))


@pytest.mark.parametrize("name", TOOL_NAMES)
def test_a_builtin_declared_local_is_proven_local_by_what_its_module_reaches(tmp_path, name):
    tool = default_registry(tmp_path).get(name)
    if tool.meta.egress or callable(getattr(tool, "egress_for", None)):
        return   # a way out (always, or for the arguments egress_for names)
    module, tree = _module_tree(tool)
    reached = _reaches(tree, LOCAL_BY_REASON.get(name, set()))
    assert reached == [], f"{name} says it is local but {module} reaches {reached}"


@pytest.mark.parametrize("name", TOOL_NAMES)
def test_each_builtin_is_a_way_out_exactly_for_the_calls_expected(tmp_path, name):
    tool = default_registry(tmp_path).get(name)
    assert name in EXPECTED, f"{name}: add its calls to EXPECTED (is it a way out?)"
    for args, expected in EXPECTED[name]:
        assert egress_of(tool, args) is expected, (name, args)


def test_the_registry_holds_every_tool_of_the_table(tmp_path):
    missing = set(EXPECTED) - set(TOOL_NAMES) - {"web_search"}   # needs its API key
    assert missing == set()


class Undeclared(BaseTool):
    meta = ToolMeta(name="undeclared", description="posts somewhere", returns_untrusted=False,
                    schema={"type": "object", "properties": {}, "additionalProperties": False},
                    has_side_effects=False, risk="low")

    async def execute(self, ctx: CallContext, **args):
        return {}


def test_conformance_fails_for_a_tool_that_does_not_say_whether_it_is_a_way_out():
    with pytest.raises(AssertionError, match="egress"):
        conformance.check_egress_declared(Undeclared())


def test_a_builtin_declared_local_that_sends_to_the_chat_is_caught():
    tree = ast.parse("from bot.core.events import FileOut\n"
                     "async def execute(ctx):\n    await ctx.emit(FileOut('a', b''))\n")
    assert _reaches(tree, set()) == ["FileOut", ".emit"]
    assert _reaches(ast.parse("import httpx\n"), set()) == ["httpx"]


def _mcp(table: dict, tools: dict | None = None):
    spec = parse_spec("srv", {"command": "x", **table, "tools": tools or {}}, {})
    return tool_meta(spec, SimpleNamespace(name="look_up", description="", input_schema={
        "type": "object", "properties": {}}))


def test_an_mcp_tool_is_a_way_out_unless_its_server_or_the_tool_is_marked_local():
    assert _mcp({}).egress is True
    assert _mcp({"risk": "low", "has_side_effects": False}).egress is True   # reads still go out
    assert _mcp({"local": True}).egress is False
    assert _mcp({}, {"look_up": {"local": True}}).egress is False


def test_a_custom_tool_that_does_not_say_is_a_way_out():
    from bot.toolbox.custom_tools import _safe_meta

    fields = {"name": "mine", "description": "d", "schema": {"type": "object"}}
    assert _safe_meta(dict(fields), "test").egress is True
    assert _safe_meta({**fields, "egress": False}, "test").egress is False
