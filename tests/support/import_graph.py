"""The project's import graph, read from the source with `ast` (nothing is imported), and the
rules that keep its shape: dependencies point inward.

- `bot/` is the core: only `bot/app.py` (the composition root) may name `channels` or `tools`.
- `tools/` and `channels/` never import each other.
- Each package of the core imports only the packages `ALLOWED` lists for it (a DAG with `core`
  at the bottom); `tools/` imports only the contract (`bot.core`).
- No import cycle at all: between modules, and between packages.

What counts as an import: `import x`, `from x import y` (y counted as the module `x.y` when that
module exists in the tree), relative imports, and `importlib.import_module("x")` /
`__import__("x")` with a literal name.

Function-level imports (inside a def) and `if TYPE_CHECKING:` imports count for every rule: a
deferred or type-only dependency is still one a reader has to hold in mind.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGES = ("bot", "channels", "tools")
COMPOSITION_ROOT = "bot.app"
# (importer package, imported package): never allowed, except from the composition root.
FORBIDDEN = (("bot", "channels"), ("bot", "tools"), ("tools", "channels"), ("channels", "tools"))
# The packages of the core and what each may import (besides itself): dependencies point inward.
ALLOWED: dict[str, frozenset[str]] = {
    "core": frozenset(),
    "config": frozenset({"core"}),
    "language": frozenset({"core"}),
    "store": frozenset({"core", "config"}),
    # toolbox: the words a failed call says to a person (language: an MCP server's failure or
    # an OS error as a Phrase, as tools/ write theirs)
    "toolbox": frozenset({"language", "core", "config"}),
    "access": frozenset({"language", "core", "config", "store"}),
    "money": frozenset({"language", "core", "config", "store"}),
    "approvals": frozenset({"language", "core", "config", "store", "access", "toolbox"}),
    "media": frozenset({"language", "core", "config", "store", "access", "toolbox"}),
    "llm": frozenset({"language", "core", "config", "store", "money", "toolbox"}),
    "conversation": frozenset({"language", "core", "config", "store", "access", "money",
                               "approvals", "media"}),
    "jobs": frozenset({"language", "core", "config", "store", "access", "conversation"}),
    "runtime": frozenset({"language", "core", "config", "store", "access", "money", "approvals",
                          "media", "llm", "conversation", "jobs", "toolbox"}),
    "ops": frozenset({"language", "core", "config", "store", "access", "money", "approvals",
                      "media", "llm", "conversation", "jobs", "toolbox", "runtime", "app"}),
}
ROOT_MODULES = {"app", ""}   # bot.app (the composition root) and bot itself
# What the outer rings may import of the core. Tools: the contract, the words they write for a
# person (language: a preview's Phrase, rendered later in each reader's language), plus two
# shared helpers they reach directly: the worker pool (bot.toolbox.offload) and image sniffing
# and file-name display (bot.media).
# Channels: the contract (the inbox, held and sent messages, the configuration they read and
# what an approval request shows are ports of it) and the reader's words (language: catalogs
# and formats, below everything but core).
OUTER_ALLOWED = {"tools": frozenset({"core", "language", "toolbox", "media"}),
                 "channels": frozenset({"core", "language"})}


@dataclass(frozen=True)
class Import:
    importer: str
    target: str
    line: int
    eager: bool   # module level and run time: counts for cycles


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files(root: Path) -> dict[str, Path]:
    files = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")) if (root / package).is_dir() else ():
            files[module_name(root, path)] = path
    return files


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk(node: ast.AST, eager: bool) -> Iterator[tuple[ast.AST, bool]]:
    """Every node with whether it runs when the module is imported."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _walk(child, False)
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            yield child.test, eager
            for stmt in child.body:
                yield stmt, False
                yield from _walk(stmt, False)
            for stmt in child.orelse:
                yield stmt, eager
                yield from _walk(stmt, eager)
        else:
            yield child, eager
            yield from _walk(child, eager)


def _targets(node: ast.AST, module: str, is_package: bool, known: set[str]) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            anchor = module.split(".") if is_package else module.split(".")[:-1]
            anchor = anchor[:len(anchor) - (node.level - 1)]
            base = ".".join([*anchor, base] if base else anchor)
        found = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known]
        return found or [base]
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
            return [node.args[0].value]
    return []


def imports(root: Path) -> list[Import]:
    files = source_files(root)
    known = set(files)
    found = []
    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        is_package = path.name == "__init__.py"
        for node, eager in _walk(tree, True):
            for target in _targets(node, module, is_package, known):
                found.append(Import(module, target, getattr(node, "lineno", 0), eager))
    return found


def _package(module: str) -> str:
    return module.split(".")[0]


def layering_violations(root: Path) -> list[str]:
    problems = []
    for imp in imports(root):
        pair = (_package(imp.importer), _package(imp.target))
        if pair in FORBIDDEN and imp.importer != COMPOSITION_ROOT:
            problems.append(f"{imp.importer} (line {imp.line}) imports {imp.target}: "
                            f"{pair[0]}/ must not depend on {pair[1]}/")
    return problems


def core_package(module: str) -> str | None:
    """`bot.store.sqlite` -> "store"; the root modules (bot.app, bot.__main__) -> "app"."""
    parts = module.split(".")
    if parts[0] != "bot":
        return None
    if len(parts) == 1 or (len(parts) == 2 and parts[1] in ROOT_MODULES):
        return "app"
    if parts[1] == "__main__":
        return "ops"   # `python -m bot` is the operator's command line
    return parts[1]


def package_violations(root: Path) -> list[str]:
    """Imports between the core's packages (and from tools/) that the DAG does not allow."""
    problems = []
    for imp in imports(root):
        target = core_package(imp.target)
        if target is None or (target == "app" and core_package(imp.importer) == "app"):
            continue
        importer = core_package(imp.importer)
        if importer is None:
            allowed = OUTER_ALLOWED.get(_package(imp.importer))
            if allowed is not None and target not in allowed:
                problems.append(f"{imp.importer} (line {imp.line}) imports {imp.target}: "
                                f"{_package(imp.importer)}/ may import only {sorted(allowed)}")
            continue
        if importer == "app" or importer == target:
            continue
        if target not in ALLOWED.get(importer, frozenset()):
            problems.append(f"{imp.importer} (line {imp.line}) imports {imp.target}: "
                            f"bot/{importer}/ may not depend on bot/{target}/")
    return problems


def cycles(root: Path) -> list[list[str]]:
    """Import cycles among the project's modules, every kind of import counted."""
    known = set(source_files(root))
    graph: dict[str, set[str]] = {module: set() for module in known}
    for imp in imports(root):
        if imp.target in known and imp.target != imp.importer:
            graph[imp.importer].add(imp.target)
    return [sorted(c) for c in _strongly_connected(graph) if len(c) > 1]


def package_cycles(root: Path) -> list[list[str]]:
    """Cycles between packages: the core's packages and channels/<name>, tools, app."""
    graph: dict[str, set[str]] = {}
    for imp in imports(root):
        a, b = _unit(imp.importer), _unit(imp.target)
        graph.setdefault(a, set())
        graph.setdefault(b, set())
        if a != b:
            graph[a].add(b)
    return [sorted(c) for c in _strongly_connected(graph) if len(c) > 1]


def _unit(module: str) -> str:
    package = core_package(module)
    if package is not None:
        return f"bot.{package}"
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "channels" else parts[0]


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (no recursion limit on a deep graph)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(component)
    return components
