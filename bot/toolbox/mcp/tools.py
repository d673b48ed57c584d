"""MCP tool adapter: a server's remote tool as a registry Tool named `<server>__<tool>`.

Safety defaults, overridable per server or per tool: side effects assumed, risk high, output
untrusted, no dry_run (the approval shows every argument of the call and names the server and
its tool: `mcp_server`, `remote_name`). The input schema is closed where it declares
properties, and results are flattened to text (binary content is described, not passed on).

A server's descriptions reach the model inside the tool catalog, so they are the server's words,
not the operator's: they are labelled as such, and characters that show nothing (zero-width,
bidi controls, Unicode tags that can smuggle hidden text) are dropped from them and from every
description and title in the input schema.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import unicodedata
from typing import Any, Protocol

from mcp_types import CallToolResult

from bot.core.tool import NO_PREVIEW, CallContext, ToolMeta
from bot.toolbox.mcp.config import ServerSpec, lower_snake

log = logging.getLogger(__name__)


class ServerRunner(Protocol):
    """The connection to one MCP server a remote tool calls through (`bot.toolbox.mcp.client`)."""

    async def call(self, name: str, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]: ...

MAX_NAME = 64                 # Anthropic tool names are at most 64 characters
MAX_DESCRIPTION = 1024
MAX_RESULT_CHARS = 100_000


def local_name(server: str, remote: str) -> str:
    name = f"{server}__{lower_snake(remote) or 'tool'}"
    if len(name) > MAX_NAME:
        name = f"{name[:MAX_NAME - 9]}_{hashlib.sha256(remote.encode()).hexdigest()[:8]}"
    return name


def strict_schema(schema: Any) -> dict[str, Any]:
    """The server's input schema, closed where it declares properties.

    The top level is closed over every property any of its branches names, so a schema built
    with anyOf/oneOf/allOf still accepts its own arguments and refuses unknown ones. Branches
    of allOf are not closed one by one (each would forbid the others' properties).
    """
    if not isinstance(schema, dict):
        schema = {}
    out = copy.deepcopy(schema)
    out["type"] = "object"
    _close_objects(out)
    properties = out.setdefault("properties", {})
    for key in ("anyOf", "oneOf", "allOf"):
        for branch in out.get(key) or []:
            if isinstance(branch, dict):
                for name in branch.get("properties") or {}:
                    properties.setdefault(name, {})
    out.setdefault("additionalProperties", False)
    return out


def _close_objects(schema: Any) -> None:
    # Free-form objects (no properties) stay open: closing them would forbid every key.
    if not isinstance(schema, dict):
        return
    if "properties" in schema:
        schema.setdefault("additionalProperties", False)
    for key, sub in schema.items():
        if key in ("properties", "$defs", "definitions", "patternProperties") and isinstance(sub, dict):
            for child in sub.values():
                _close_objects(child)
        elif key in ("items", "not", "if", "then", "else", "additionalProperties"):
            _close_objects(sub)
        elif key in ("anyOf", "oneOf", "prefixItems") and isinstance(sub, list):
            for child in sub:
                _close_objects(child)
        elif key == "allOf" and isinstance(sub, list):
            for child in sub:  # close what lies inside each part, not the part itself
                for grandchild in (child.get("properties") or {}).values() if isinstance(child, dict) else ():
                    _close_objects(grandchild)


def tool_meta(spec: ServerSpec, remote: Any) -> ToolMeta:
    override = spec.tools.get(remote.name) or spec.tools.get(lower_snake(remote.name)) or {}
    risk = override.get("risk") or spec.risk or "high"
    side_effects = override.get("has_side_effects", spec.has_side_effects)
    if side_effects is None:  # a risk below high vouches that the tool only reads
        side_effects = risk == "high"
    if side_effects and risk != "high":
        log.warning("MCP %s/%s: side effects without preview are always high risk (risk %s ignored)",
                    spec.name, remote.name, risk)
        risk = "high"
    description = server_words(remote.description or remote.name)
    return ToolMeta(
        name=local_name(spec.name, remote.name),
        description=f"[MCP server {spec.name}; its own description, not the operator's] "
                    f"{description}",
        schema=_clean_texts(strict_schema(remote.input_schema)), has_side_effects=side_effects, risk=risk,
        returns_untrusted=override.get("returns_untrusted", True), idempotent=False,
        supports_dry_run=False, capability_required=f"mcp:{spec.name}",
        # Its arguments reach the server, and through it anyone: a way out unless the operator
        # marks the server (or this tool) local.
        egress=not override.get("local", spec.local),
    )


def server_words(text: str, limit: int = MAX_DESCRIPTION) -> str:
    """A server-supplied text on one line, without invisible characters, at most `limit` long."""
    shown = "".join(ch for ch in text if unicodedata.category(ch) not in _HIDDEN_CATEGORIES)
    return " ".join(shown.split())[:limit]


_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cn", "Cs"})


def _clean_texts(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {key: server_words(value) if key in ("description", "title")
                and isinstance(value, str) else _clean_texts(value)
                for key, value in schema.items()}
    if isinstance(schema, list):
        return [_clean_texts(item) for item in schema]
    return schema


class MCPTool:
    """One remote tool. It holds its server, not a connection, so it survives reconnects."""

    def __init__(self, meta: ToolMeta, server: ServerRunner, remote_name: str,
                 server_name: str = ""):
        self.meta = meta
        self._server = server
        self.remote_name = remote_name
        self.mcp_server = server_name   # as configured ([mcp.servers.<name>])

    async def execute(self, ctx: CallContext, **args: Any) -> dict[str, Any]:
        return await self._server.call(self.remote_name, args, ctx)

    async def dry_run(self, ctx: CallContext, **args: Any) -> dict[str, Any]:
        if not self.meta.has_side_effects:
            return await self.execute(ctx, **args)
        return {"summary": NO_PREVIEW}


def result_to_dict(result: CallToolResult) -> dict[str, Any]:
    parts: list[str] = []
    for block in result.content:
        if block.type == "text":
            parts.append(block.text)
        elif block.type in ("image", "audio"):
            parts.append(f"[{block.type} {block.mime_type}, {len(block.data)} base64 chars omitted]")
        elif block.type == "resource_link":
            parts.append(f"[resource {block.uri}]")
        elif block.type == "resource":
            inner = block.resource
            parts.append(getattr(inner, "text", None) or f"[binary resource {inner.uri}]")
    text = "\n".join(parts)
    out: dict[str, Any] = {"text": text[:MAX_RESULT_CHARS]}
    if len(text) > MAX_RESULT_CHARS:
        out["truncated"] = True
    if result.structured_content is not None:
        out["structured"] = result.structured_content
    return out
