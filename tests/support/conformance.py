"""The conformance checks every tool must pass (built-in, custom or MCP).

Plain functions that raise AssertionError, so the parametrized suite in test_conformance.py and
the proof that the suite can fail (test_conformance_catches_broken_tools) share them.

Sample args: a tool may define `examples` (a list of arg dicts, the first is used); otherwise
they are generated from the schema's required properties.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

from bot.core.tool import NAME_RE, CallContext, Tool, ToolException
from bot.store.copy import count_rows, describe
from bot.store.sqlite import Store
from bot.toolbox.failures import to_tool_error
from bot.toolbox.registry import Registry


def sample_value(schema: dict[str, Any]) -> Any:
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    if "default" in schema:
        return schema["default"]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0]
    if kind == "string":
        return "conformance.txt"
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return False
    if kind == "array":
        return []
    if kind == "object":
        return sample_args({"properties": schema.get("properties", {}),
                            "required": schema.get("required", [])})
    return "x"


def sample_args(schema_or_tool: Any) -> dict[str, Any]:
    examples = getattr(schema_or_tool, "examples", None)
    if examples:
        return dict(examples[0])
    schema = schema_or_tool.meta.schema if hasattr(schema_or_tool, "meta") else schema_or_tool
    props = schema.get("properties", {})
    return {name: sample_value(props.get(name, {})) for name in schema.get("required", [])}


def _schemas_are_strict(schema: Any, where: str = "") -> None:
    if isinstance(schema, dict):
        if schema.get("type") == "object" or "properties" in schema:
            assert schema.get("additionalProperties") is False, (
                f"object schema at {where or '/'} must set additionalProperties: false"
            )
        for key, sub in schema.items():
            if key in ("properties", "patternProperties", "$defs", "definitions"):
                for name, child in sub.items():
                    _schemas_are_strict(child, f"{where}/{key}/{name}")
            elif key in ("items", "additionalItems", "not", "if", "then", "else"):
                _schemas_are_strict(sub, f"{where}/{key}")
            elif key in ("anyOf", "oneOf", "allOf", "prefixItems"):
                for i, child in enumerate(sub):
                    _schemas_are_strict(child, f"{where}/{key}/{i}")


def check_egress_declared(tool: Tool) -> None:
    """The tool says whether a call can put data in front of anyone but the requester:
    `egress=True`, or `egress=False` (with `egress_for(args)` when it depends on the call)."""
    assert tool.meta.egress is not None, (
        f"{tool.meta.name} does not declare egress: set ToolMeta(egress=True) when a call can "
        "reach anyone but the requester (network, the chat, later), else egress=False")


def check_metadata(tool: Tool) -> None:
    meta = tool.meta
    assert NAME_RE.match(meta.name), f"{meta.name!r} is not lower_snake_case"
    assert meta.description.strip(), f"{meta.name} has an empty description"
    assert meta.schema.get("type") == "object", f"{meta.name}: the schema must be an object"
    _schemas_are_strict(meta.schema)
    assert meta.risk in ("low", "medium", "high"), f"{meta.name}: risk {meta.risk!r}"
    assert meta.capability_required, f"{meta.name}: capability_required is empty"
    if meta.has_side_effects and not meta.supports_dry_run:
        assert meta.risk == "high", f"{meta.name}: a side effect without preview must be high"


def check_unique_names(registry: Registry) -> None:
    names = [t.meta.name for t in registry.list_all()]
    assert len(names) == len(set(names)), f"duplicate tool names: {names}"


def snapshot_tree(root: Path) -> dict[str, str]:
    """Every path below root with a digest of its content (or its kind)."""
    state: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            state[os.path.relpath(os.path.join(dirpath, name), root)] = "dir"
        for name in filenames:
            full = os.path.join(dirpath, name)
            try:
                with open(full, "rb") as handle:
                    state[os.path.relpath(full, root)] = hashlib.sha256(handle.read()).hexdigest()
            except OSError:
                state[os.path.relpath(full, root)] = "unreadable"
    return state


async def snapshot_store(store: Store) -> dict[str, int]:
    return {name: await count_rows(store, name) for name in await describe(store)}


async def outcome(coro: Any) -> dict[str, Any]:
    """Run a tool method; a raised tool exception becomes its ToolError dict."""
    try:
        return {"result": await coro}
    except ToolException as exc:
        return {"error": to_tool_error(exc).to_dict()}


def _without_volatile(value: Any) -> Any:
    """Drop fields that legitimately differ between two calls (clock readings, timings)."""
    if isinstance(value, dict):
        return {k: _without_volatile(v) for k, v in value.items()
                if k not in ("now", "unix", "elapsed_ms", "retrieved_at", "duration_ms")}
    if isinstance(value, list):
        return [_without_volatile(v) for v in value]
    return value


async def check_dry_run(tool: Tool, ctx: CallContext, store: Store) -> None:
    args = sample_args(tool)
    tree_before = snapshot_tree(ctx.workspace)
    store_before = await snapshot_store(store)
    dry = await outcome(tool.dry_run(ctx, **args))
    # An egress tool's preview must not make the call (that would send what approval guards),
    # so like a side-effect tool it only has to leave everything as it was.
    if tool.meta.has_side_effects or tool.meta.egress:
        assert snapshot_tree(ctx.workspace) == tree_before, f"{tool.meta.name}: dry_run changed files"
        assert await snapshot_store(store) == store_before, f"{tool.meta.name}: dry_run wrote the store"
        if tool.meta.supports_dry_run and "result" in dry:
            summary = dry["result"].get("summary")
            assert isinstance(summary, str) and summary.strip(), (
                f"{tool.meta.name}: dry_run must return a non-empty 'summary'"
            )
    else:
        executed = await outcome(tool.execute(ctx, **args))
        assert _without_volatile(dry) == _without_volatile(executed), (
            f"{tool.meta.name}: a side-effect-free tool's dry_run must return what execute returns"
        )


def check_invalid_args_rejected(registry: Registry, name: str) -> None:
    error = registry.validate(name, {"__not_a_real_argument__": object.__name__})
    assert error is not None and error.kind == "invalid_args", (
        f"{name}: args with an unknown key were not rejected before dispatch"
    )
    error = registry.validate(name, "not an object")  # type: ignore[arg-type]
    assert error is not None and error.kind == "invalid_args"


_WRAPPED = re.compile(r"<untrusted-([0-9a-f]+)(?: [^>]*)?>.*?</untrusted-\1>", re.DOTALL)


def outside_wrappers(content: str) -> str:
    """What is left of a tool_result's text once every <untrusted-…> block is removed: the part
    the model reads as the bot's own words."""
    return _WRAPPED.sub("", content)
