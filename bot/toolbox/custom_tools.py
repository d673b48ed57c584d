"""Custom tool modules: Python files the operator drops next to the bot, loaded like built-ins.

Where they come from, in this order: `<cwd>/.myclaw/tools/` (project), `~/.myclaw/tools/`
(user; `~` is the configured environment's HOME so tests can redirect it) and every entry of
`[tools] custom_paths` (relative to cwd, `~` expanded; a directory of modules or one `.py` file).
Each module exposes `build()` or `build(config)` returning a tool or a list, as built-ins do.

What the loader guarantees:
- a file reached twice (listed twice, or through a symlink) is loaded once;
- `.md` / `.json` files are metadata: listed, never executed;
- a module that fails (syntax error, exception at import, `build()` raising) is recorded with a
  one-line error and skipped — the bot still starts, and `myclaw doctor` shows the error;
- a name clashing with a built-in or an earlier custom tool is refused, naming both files;
- code the agent itself could have written (inside its workspace, or world-writable) is refused,
  so a prompt-injected `fs_write` cannot become code execution at the next start.

Custom tools are normal tools afterwards (same registry, policy and conformance suite). One
shape is accepted, the documented one (docs/extending.md): an object whose `meta` is a
`ToolMeta`, with `async def execute`; anything else is refused naming that shape.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import inspect
import logging
import os
import re
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from bot.core.tool import NAME_RE, NO_PREVIEW, RISKS, CallContext, ToolMeta, ToolUnavailable
from bot.toolbox.registry import RegistrationError, Registry, takes_argument

log = logging.getLogger(__name__)

METADATA_SUFFIXES = (".md", ".json")
_BOOL_FIELDS = ("has_side_effects", "returns_untrusted", "idempotent", "supports_dry_run", "cli_only")
EXPECTED_SHAPE = ("a tool object with `meta = ToolMeta(name=..., description=..., schema=...)` and "
                  "`async def execute(self, ctx, **args)` (e.g. a bot.core.tool.BaseTool subclass; see "
                  "docs/extending.md)")


class CustomToolError(ValueError):
    """A custom module or the object its build() returned cannot be used as a tool."""


@dataclass
class LoadReport:
    """What `load_custom_tools` did, for the log and for `myclaw doctor`."""

    loaded: dict[str, str] = field(default_factory=dict)    # tool name -> file
    errors: dict[str, str] = field(default_factory=dict)    # file -> one-line error
    metadata: list[str] = field(default_factory=list)       # .md/.json files seen, not executed
    searched: list[str] = field(default_factory=list)       # every location looked at

    def add_error(self, path: Path | str, message: str) -> None:
        key = str(path)
        self.errors[key] = f"{self.errors[key]}; {message}" if key in self.errors else message


# --- discovery -----------------------------------------------------------------------------


def search_locations(config: Any, cwd: Path) -> list[tuple[Path, bool]]:
    """(path, explicitly configured) in load order; default directories may be absent."""
    home = _home(config)
    locations = [(cwd / ".myclaw" / "tools", False), (home / ".myclaw" / "tools", False)]
    for entry in config["tools"].get("custom_paths", []):
        locations.append((_expand(entry, home, cwd), True))
    return locations


def _home(config: Any) -> Path:
    env = getattr(config, "env", None) or {}
    return Path(env["HOME"]) if env.get("HOME") else Path.home()


def _expand(entry: str, home: Path, cwd: Path) -> Path:
    if entry == "~" or entry.startswith("~/"):
        path = home / entry[2:]
    else:
        path = Path(os.path.expanduser(entry))
    return path if path.is_absolute() else cwd / path


def _candidates(location: Path, configured: bool, report: LoadReport) -> list[Path]:
    """The files of one location: modules and metadata, sorted for a stable load order."""
    if not location.exists():
        if configured:
            report.add_error(location, "configured custom tool path does not exist")
        return []
    if location.is_file():
        if location.suffix == ".py" or location.suffix in METADATA_SUFFIXES:
            return [location]
        report.add_error(location, "not a Python module (.py)")
        return []
    try:
        entries = list(location.iterdir())
    except OSError as exc:
        report.add_error(location, f"cannot list the folder: {exc.strerror or exc}")
        return []
    return sorted(p for p in entries
                  if p.is_file() and (p.suffix in METADATA_SUFFIXES
                                      or (p.suffix == ".py" and not p.name.startswith("_"))))


def load_custom_tools(registry: Registry, config: Any, cwd: Path) -> LoadReport:
    """Discover, import and register custom tool modules; never raises for a bad module."""
    report = LoadReport()
    seen: set[Path] = set()
    workspace = _workspace(config)
    for location, configured in search_locations(config, cwd):
        report.searched.append(str(location))
        for path in _candidates(location, configured, report):
            resolved = path.resolve()
            if resolved in seen:
                continue
            seen.add(resolved)
            if resolved.suffix in METADATA_SUFFIXES:
                report.metadata.append(str(path))
                continue
            _load_one(registry, config, path, resolved, workspace, report)
    if report.loaded:
        log.info("custom tools loaded: %s", ", ".join(sorted(report.loaded)))
    for path, error in report.errors.items():
        log.warning("custom tool module %s skipped: %s", path, error)
    return report


def _workspace(config: Any) -> Path | None:
    try:
        return config.workspace
    except (AttributeError, KeyError):
        return None


def _load_one(registry: Registry, config: Any, path: Path, resolved: Path,
              workspace: Path | None, report: LoadReport) -> None:
    try:
        _check_trusted(resolved, workspace)
        module = import_module_from_path(resolved)
        tools = [normalise_tool(obj, str(path)) for obj in _build(module, config)]
    except ToolUnavailable as exc:
        registry.unavailable[str(path)] = str(exc)
        return
    except CustomToolError as exc:
        report.add_error(path, str(exc))
        return
    for tool in tools:
        try:
            _register(registry, tool, str(path))
        except RegistrationError as exc:
            report.add_error(path, str(exc))
            continue
        report.loaded[tool.meta.name] = str(path)


def _check_trusted(path: Path, workspace: Path | None) -> None:
    if workspace is not None and path.is_relative_to(workspace):
        raise CustomToolError(
            f"refusing to execute {path}: it is inside the agent workspace {workspace}, where the "
            "agent itself can write files; move it out of the workspace")
    for target in (path, path.parent):
        try:
            mode = target.stat().st_mode
        except OSError as exc:
            raise CustomToolError(f"cannot inspect {target}: {exc.strerror or exc}") from exc
        if mode & stat.S_IWOTH:
            raise CustomToolError(f"refusing to execute {path}: {target} is world-writable")


def import_module_from_path(path: Path) -> ModuleType:
    """Import one file under a unique name (two `tools.py` in different folders never collide)."""
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    stem = re.sub(r"\W", "_", path.stem)
    name = f"myclaw_custom_{digest}_{stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CustomToolError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and typing resolve names through sys.modules
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(name, None)
        raise CustomToolError(f"syntax error at line {exc.lineno}: {exc.msg}") from exc
    except (Exception, SystemExit) as exc:  # foreign code: any failure at import
        sys.modules.pop(name, None)
        log.warning("importing custom tool module %s failed", path, exc_info=exc)
        raise CustomToolError(f"import failed: {type(exc).__name__}: {_one_line(exc)}") from exc
    return module


def _build(module: ModuleType, config: Any) -> list[Any]:
    build = getattr(module, "build", None)
    if not callable(build):
        raise CustomToolError("the module has no build() function")
    try:
        built = build(config) if takes_argument(build) else build()
    except (ToolUnavailable, CustomToolError):
        raise
    except Exception as exc:  # foreign code; the traceback goes to the log
        log.warning("build() of custom tool module %s failed", module.__file__, exc_info=exc)
        raise CustomToolError(f"build() failed: {type(exc).__name__}: {_one_line(exc)}") from exc
    if inspect.isawaitable(built):
        if inspect.iscoroutine(built):
            built.close()
        raise CustomToolError("build() must be a plain function returning tools, not async")
    if isinstance(built, (list, tuple)):
        return list(built)
    return [built]


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] or "(no message)"


def _register(registry: Registry, tool: Any, source: str) -> None:
    """Register, with a clash message that names both files (built-ins are module names)."""
    name = tool.meta.name
    if registry.get(name) is not None:
        other = _describe_source(registry.source_of(name))
        raise RegistrationError(
            f"tool {name!r} in {source} clashes with the tool of the same name already loaded "
            f"from {other}; rename one of them")
    registry.register(tool, source)


def _describe_source(source: str) -> str:
    module = sys.modules.get(source)
    file = getattr(module, "__file__", None)
    return f"{file} ({source})" if file else source


# --- normalisation -------------------------------------------------------------------------


def normalise_tool(obj: Any, source: str) -> Any:
    """Return a registrable Tool for what build() returned, or raise CustomToolError.

    The one accepted shape: an object whose `meta` is a `ToolMeta`, with `async def execute`
    (and `async def dry_run` when it declares supports_dry_run). Its metadata is checked (name,
    description, closed schema, boolean flags); a tool without its own dry_run gets one that
    runs a side-effect-free tool and shows NO_PREVIEW for the others.
    """
    if inspect.isclass(obj):
        raise CustomToolError(f"build() returned the class {obj.__name__}; return an instance")
    declared = None if isinstance(obj, dict) else getattr(obj, "meta", None)
    if not isinstance(declared, ToolMeta):
        what = ("a dict" if isinstance(obj, dict)
                else f"a {type(obj).__name__} object whose `meta` is not a ToolMeta")
        raise CustomToolError(f"build() returned {what}; expected {EXPECTED_SHAPE}")
    meta = _safe_meta(dataclasses.asdict(declared), source)
    meta = declared if meta == declared else meta
    execute = getattr(obj, "execute", None)
    if not inspect.iscoroutinefunction(execute):
        raise CustomToolError(f"tool {meta.name!r}: execute must be an `async def` method")
    dry_run = getattr(obj, "dry_run", None)
    if dry_run is not None and not inspect.iscoroutinefunction(dry_run):
        raise CustomToolError(f"tool {meta.name!r}: dry_run must be an `async def` method")
    if meta.supports_dry_run and dry_run is None:
        raise CustomToolError(f"tool {meta.name!r} declares supports_dry_run but has no dry_run")
    if dry_run is not None and meta is declared:
        return obj  # already a well-formed Tool: register the author's own object
    return CustomTool(meta, obj)


def _safe_meta(fields: dict[str, Any], source: str) -> ToolMeta:
    name = fields.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise CustomToolError(f"tool name {name!r} must be lower_snake_case text")
    if "__" in name:  # the policy admits `<server>__<tool>` names as MCP tools
        raise CustomToolError(f"tool name {name!r}: a double underscore is reserved for MCP tools")
    if not isinstance(fields.get("description"), str) or not fields["description"].strip():
        raise CustomToolError(f"tool {name!r} needs a non-empty description")
    schema = fields.get("schema", {"type": "object", "properties": {}})
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise CustomToolError(f"tool {name!r}: schema must be a JSON Schema object ({{'type': 'object'}})")
    # Args are validated against this schema before dispatch; keys the tool never declared
    # must not slip through, so an open top level is closed.
    fields["schema"] = schema if "additionalProperties" in schema else {
        **schema, "additionalProperties": False}
    if fields.get("risk", "high") not in RISKS:
        raise CustomToolError(f"tool {name!r}: risk must be one of {', '.join(RISKS)}")
    wrong = [key for key in _BOOL_FIELDS if key in fields and not isinstance(fields[key], bool)]
    if wrong:
        raise CustomToolError(f"tool {name!r}: {', '.join(wrong)} must be true or false")
    if fields.get("egress") is None:   # not declared: it may send data anywhere
        fields["egress"] = True
    elif not isinstance(fields["egress"], bool):
        raise CustomToolError(f"tool {name!r}: egress must be true or false")
    meta = ToolMeta(**fields)  # a side effect without dry_run makes its risk high
    if not meta.capability_required:
        meta = dataclasses.replace(meta, capability_required=f"custom:{name}")
    return meta


class CustomTool:
    """Adapter for a custom tool whose checked metadata differs from what it declared, or that
    has no dry_run of its own.

    Optional methods (revert, risk_for, on_session) and `examples` are looked up on the wrapped
    object, so `getattr(tool, "revert", None)` answers exactly what the author defined.
    """

    def __init__(self, meta: ToolMeta, target: Any):
        self.meta = meta
        self._target = target

    def _method(self, name: str) -> Any:
        return getattr(self._target, name, None)

    async def execute(self, ctx: CallContext, **args: Any) -> dict[str, Any]:
        return await self._method("execute")(ctx, **args)

    async def dry_run(self, ctx: CallContext, **args: Any) -> dict[str, Any]:
        own = self._method("dry_run")
        if own is not None:
            return await own(ctx, **args)
        if not self.meta.has_side_effects:
            return await self.execute(ctx, **args)
        return {"summary": NO_PREVIEW}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name in ("meta", "execute", "dry_run"):
            raise AttributeError(name)
        found = self._method(name)
        if found is None:
            raise AttributeError(name)
        return found
