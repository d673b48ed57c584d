"""The tool registry: discovery, registration, validation and per-sender catalogs.

Built-ins are the modules of the `tools` package exposing `build()`; custom tools and MCP tools
register through the same `register` call. `build()` may take the `Config` as its one argument.
A tool whose prerequisites are missing raises `ToolUnavailable` from `build()` and is listed in
`unavailable` with the reason. JSON-Schema validators are made once, at registration
(bot.config.json_schema: jsonschema itself only for a schema beyond the keywords it knows).
"""

from __future__ import annotations

import importlib
import inspect
import logging
import pkgutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bot.config.json_schema import SchemaProblem, check_schema, validator
from bot.core.identity import Sender
from bot.core.policy import Caller, Decision, Profile, could_ever_run
from bot.core.tool import NAME_RE, Tool, ToolError, ToolUnavailable

log = logging.getLogger(__name__)


class RegistrationError(ValueError):
    """A tool was refused at registration (bad name, bad schema, duplicate)."""


@dataclass
class Entry:
    tool: Tool
    source: str
    validator: Any   # iter_errors(args): bot.config.json_schema.validator


@dataclass
class Registry:
    profile: Profile = field(default_factory=Profile)
    entries: dict[str, Entry] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)  # name/module -> why
    generation: int = 0  # bumped whenever the set of tools changes (catalog caches key on it)
    _catalogs: dict[tuple, tuple[dict[str, Any], ...]] = field(default_factory=dict)

    # --- registration --------------------------------------------------------------------

    def register(self, tool: Tool, source: str = "") -> None:
        meta = tool.meta
        source = source or type(tool).__module__
        if not NAME_RE.match(meta.name):
            raise RegistrationError(f"{source}: tool name {meta.name!r} is not lower_snake_case")
        if not meta.description.strip():
            raise RegistrationError(f"{source}: tool {meta.name} has no description")
        if meta.name in self.entries:
            other = self.entries[meta.name].source
            raise RegistrationError(
                f"tool {meta.name!r} from {source} clashes with the one already loaded from {other}"
            )
        try:
            check_schema(meta.schema)
        except SchemaProblem as exc:
            raise RegistrationError(
                f"{source}: tool {meta.name} has an invalid JSON Schema: {exc.message}"
            ) from exc
        if meta.schema.get("type") != "object":
            raise RegistrationError(f"{source}: tool {meta.name} schema must be an object schema")
        self.entries[meta.name] = Entry(tool, source, validator(meta.schema))
        self._changed()

    def unregister(self, name: str) -> None:
        if self.entries.pop(name, None) is not None:
            self._changed()

    def _changed(self) -> None:
        self.generation += 1
        self._catalogs.clear()

    def discover(self, package: str, config: Any = None) -> None:
        """Import every public module of `package` and register what its `build()` returns."""
        pkg = importlib.import_module(package)
        for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
            if info.name.startswith("_"):
                continue
            module_name = f"{package}.{info.name}"
            module = importlib.import_module(module_name)
            self.register_from_module(module, module_name, config)

    def register_from_module(self, module: Any, source: str, config: Any = None) -> list[str]:
        build = getattr(module, "build", None)
        if not callable(build):
            return []
        try:
            built = build(config) if takes_argument(build) else build()
        except ToolUnavailable as exc:
            self.unavailable[source.rpartition(".")[2]] = str(exc)
            return []
        tools = list(built) if isinstance(built, Iterable) else [built]
        for tool in tools:
            self.register(tool, source)
        return [t.meta.name for t in tools]

    # --- lookup ----------------------------------------------------------------------------

    def get(self, name: str) -> Tool | None:
        entry = self.entries.get(name)
        return entry.tool if entry else None

    def source_of(self, name: str) -> str:
        return self.entries[name].source


    def validate(self, name: str, args: Any) -> ToolError | None:
        """Check args against the tool's compiled schema; a ToolError (invalid_args) if wrong."""
        if not isinstance(args, dict):
            return ToolError("invalid_args", f"{name}: arguments must be a JSON object",
                             "Call the tool again with an object matching its input schema.")
        errors = sorted(self.entries[name].validator.iter_errors(args), key=lambda e: list(e.path))
        if not errors:
            return None
        problems = [f"{'/'.join(map(str, e.absolute_path)) or '(args)'}: {e.message}"
                    for e in errors[:5]]
        return ToolError(
            "invalid_args",
            f"{name}: invalid arguments: " + "; ".join(problems),
            "Fix the listed arguments to match the input schema (required fields, types, no "
            "extra keys) and call the tool again.",
            {"errors": problems},
        )

    def list_all(self) -> list[Tool]:
        return [self.entries[name].tool for name in sorted(self.entries)]

    def names(self) -> list[str]:
        return sorted(self.entries)

    # --- per-sender views ----------------------------------------------------------------

    def visibility(self, caller: Caller) -> dict[str, Decision]:
        """For every tool, the catalog-time decision for this caller (deny = hidden, with why)."""
        return {name: could_ever_run(self.entries[name].tool.meta, caller, self.profile)
                for name in sorted(self.entries)}

    def list_for_sender(self, sender: str, autonomy: str,
                        run_allowlist: Iterable[str] | None = None) -> list[Tool]:
        caller = Caller(sender, autonomy,
                        frozenset(run_allowlist) if run_allowlist is not None else None)
        return [self.entries[name].tool for name, decision in self.visibility(caller).items()
                if decision.verdict != "deny"]

    def catalog_for_prompt(self, sender: str, autonomy: str,
                           run_allowlist: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """The Anthropic `tools` list for this sender: sorted by name, byte-stable, cached.

        The result depends only on (channel kind, autonomy, allowlist), so it is cached on that
        key and rebuilt only when a tool is registered or removed. Do not mutate it.
        """
        allow = frozenset(run_allowlist) if run_allowlist is not None else None
        is_cli = Sender.parse(sender).in_terminal
        key = (is_cli, autonomy, allow)
        cached = self._catalogs.get(key)
        if cached is None:
            tools = self.list_for_sender(sender, autonomy, allow)
            cached = tuple(
                {"name": t.meta.name, "description": t.meta.description,
                 "input_schema": t.meta.schema}
                for t in tools
            )
            self._catalogs[key] = cached
        return list(cached)



def takes_argument(func: Any) -> bool:
    """Does `build` accept the config as a positional argument?"""
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
