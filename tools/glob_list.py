"""glob_list: list workspace paths matching a glob pattern (sorted, capped, never outside).

The walk is our own (os.scandir, symlinks never followed) rather than pathlib's glob: a pattern
cannot climb out with `..` or an absolute path, a symlinked directory is listed but not entered,
and the bot's protected files (store, config, keys) are not listed at all. Secret files
(bot/core/secrets/files.py) are left out and counted, unless the call asks for them with
`include_secret_files`: that is high risk, is asked for naming it, and no "Always" covers it.
"""

from __future__ import annotations

import asyncio
import os
import re
import stat
from dataclasses import dataclass, field
from typing import Any, ClassVar

from bot.core.secrets.files import SecretFiles
from bot.core.tool import BaseTool, CallContext, Risk, ToolInvalidArgsError, ToolMeta
from bot.language.catalogs import N_
from bot.language.phrase import Phrase
from tools._refusals import outside_error
from tools._sandbox import (
    Protected,
    protected_paths,
    resolve_in_workspace,
    secret_files,
    workspace_root,
)

DEFAULT_MAX_RESULTS = 200
MAX_RESULTS = 2000
MAX_SCANNED = 200_000  # entries visited before giving up on a huge tree
_MAGIC = re.compile(r"[*?\[]")
SECRET_PREVIEW = N_("List the files matching {pattern}, secret files (.env, keys, credentials) "
                    "included")
SECRETS_HIDDEN_NOTE = ("Secret files (.env, keys, credentials) matching the pattern are not listed; "
                       "include_secret_files=true lists them after the user approves.")


# One glob component as tokens: STAR ('*'), ANY ('?'), a one-character string (a literal), or a
# compiled character class ('[a-z]'). Matched by `_match_component`, never by a regex with
# nested quantifiers: `*?*?*?…x` against a long file name made `re` backtrack for hours while
# holding the GIL, which froze every chat of the bot (glob_list is low risk: anyone may call it).
class _Wildcard:
    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


STAR = _Wildcard("*")
ANY = _Wildcard("?")
Token = _Wildcard | str | re.Pattern[str]
Component = tuple[Token, ...]


@dataclass(frozen=True)
class CompiledPattern:
    parts: tuple[Component | None, ...]   # None is `**`
    base: tuple[str, ...]        # leading literal components: where the walk starts
    max_depth: int | None        # None when the pattern has `**`

    def matches(self, rel: str) -> bool:
        """Whether the workspace-relative path `rel` matches, in O(components × parts) steps.

        A `**` that is not last matches zero or more folders; a last `**` one or more names.
        """
        last = len(self.parts) - 1
        states = self._closure({0})
        for name in rel.split("/"):
            following: set[int] = set()
            for index in states:
                if index > last:
                    continue
                part = self.parts[index]
                if part is None:
                    following.add(index)
                    if index == last:
                        following.add(index + 1)
                elif _match_component(part, name):
                    following.add(index + 1)
            states = self._closure(following)
            if not states:
                return False
        return len(self.parts) in states

    def _closure(self, states: set[int]) -> set[int]:
        """Add the states reachable by letting a non-final `**` match no folder at all."""
        out, todo = set(states), list(states)
        while todo:
            index = todo.pop()
            if index < len(self.parts) - 1 and self.parts[index] is None and index + 1 not in out:
                out.add(index + 1)
                todo.append(index + 1)
        return out


def _match_component(tokens: Component, name: str) -> bool:
    """Wildcard matching with one backtrack point (the last '*'): linear-time per star."""
    t = n = 0
    star, star_n = -1, 0
    while n < len(name):
        token = tokens[t] if t < len(tokens) else None
        if token is not None and token is not STAR and _one(token, name[n]):
            t += 1
            n += 1
        elif token is STAR:
            star, star_n = t, n
            t += 1
        elif star >= 0:
            star_n += 1
            n, t = star_n, star + 1
        else:
            return False
    while t < len(tokens) and tokens[t] is STAR:
        t += 1
    return t == len(tokens)


def _one(token: Token, char: str) -> bool:
    if token is ANY:
        return True
    if isinstance(token, str):
        return token == char
    return token.fullmatch(char) is not None


@dataclass
class Walk:
    root: str
    pattern: CompiledPattern
    protected: Protected
    cancelled: asyncio.Event
    secrets: SecretFiles
    include_secrets: bool = False
    hidden_secrets: int = 0
    found: list[str] = field(default_factory=list)
    scanned: int = 0
    scan_limited: bool = False


class GlobList(BaseTool):
    meta = ToolMeta(
        name="glob_list",
        description=(
            "List files and folders in the workspace matching a glob `pattern`, relative to the "
            "workspace: '*' matches within one folder, '**' any number of folders, '?' one "
            "character, '[abc]' a set. Examples: '*.md', 'notes/**/*.txt', '**/*'. Folders end "
            "with '/'. Results are sorted and capped at `max_results` (`truncated` says so)."
        ),
        schema={
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "minLength": 1, "maxLength": 1000,
                            "description": "Glob pattern relative to the workspace"},
                "max_results": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS,
                                "default": DEFAULT_MAX_RESULTS},
                "include_secret_files": {
                    "type": "boolean", "default": False,
                    "description": "Also list secret files (.env, keys, credentials); high "
                                   "risk: the user is asked first"},
            },
            "required": ["pattern"],
            "additionalProperties": False,
        },
        has_side_effects=False,
        risk="low",
        returns_untrusted=True,  # file names are chosen by whoever wrote the files
        idempotent=True,
        supports_dry_run=True,
        capability_required="fs:list",
        egress=False,   # local: names of the workspace only
    )
    examples: ClassVar[list[dict[str, Any]]] = [{"pattern": "**/*.md"}]

    def risk_for(self, args: dict[str, Any]) -> Risk:
        return "high" if args.get("include_secret_files") is True else "low"

    def approval_scope(self, args: dict[str, Any]) -> tuple[str, str] | None:
        if args.get("include_secret_files") is True:
            return None
        return "names", Phrase("listing files other than secret files")

    async def dry_run(self, ctx: CallContext, pattern: str, **args: Any) -> dict[str, Any]:
        if args.get("include_secret_files") is True:
            return {"summary": Phrase(SECRET_PREVIEW, pattern=pattern)}
        return await self.execute(ctx, pattern, **args)

    async def execute(self, ctx: CallContext, pattern: str,
                      max_results: int = DEFAULT_MAX_RESULTS, include_secret_files: bool = False,
                      **_: Any) -> dict[str, Any]:
        compiled = compile_pattern(ctx, pattern)
        root = workspace_root(ctx)
        # Secret files' names only for a call a person approved (include_secret_files is high).
        include = include_secret_files is True and ctx.approved_by is not None
        walk = Walk(root, compiled, protected_paths(ctx, root), ctx.cancelled, secret_files(ctx),
                    include)
        start = os.path.join(root, *compiled.base)
        # The literal prefix goes through the sandbox like any other path; a prefix that passes
        # through a symlink is not walked, as symlinked folders are never entered.
        if not compiled.base or str(resolve_in_workspace(
                ctx, "/".join(compiled.base), must_exist=False, for_write=False,
                previewing=include)) == start:
            await asyncio.to_thread(_walk_tree, walk, start)
        found = sorted(walk.found)
        result: dict[str, Any] = {
            "pattern": pattern, "matches": found[:max_results], "count": min(len(found), max_results),
            "total_matches": len(found), "truncated": len(found) > max_results or walk.scan_limited,
        }
        if walk.hidden_secrets:
            result["secret_files_not_listed"] = walk.hidden_secrets
            result["note"] = SECRETS_HIDDEN_NOTE
        if walk.scan_limited:
            result["note"] = (f"Stopped after scanning {MAX_SCANNED} entries; use a narrower "
                              "pattern such as 'notes/**/*.md'.")
        elif not found:
            result["note"] = ("Nothing matches. '*' does not cross folders: try '**/' + the "
                              "pattern to search every subfolder, or '**/*' to see everything.")
        return result


def compile_pattern(ctx: CallContext, pattern: str) -> CompiledPattern:
    if "\x00" in pattern:
        raise outside_error(ctx, pattern.replace("\x00", "\\0"), Phrase("it contains a NUL byte"))
    if pattern.startswith(("/", "\\")) or os.path.isabs(pattern) or pattern.startswith("~"):
        raise outside_error(ctx, pattern, Phrase("glob patterns are relative to the workspace"))
    parts = [p for p in pattern.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise outside_error(ctx, pattern, Phrase("'..' would leave the workspace"))
    if not parts:
        raise ToolInvalidArgsError(Phrase("The pattern {pattern} names no files.", pattern=repr(pattern)),
                                   "Use a pattern such as '*' or '**/*.md'.")
    base = []
    for part in parts[:-1]:  # the walk starts in the folder holding the last component
        if _MAGIC.search(part):
            break
        base.append(part)
    max_depth = None if "**" in parts else len(parts)
    try:
        compiled = tuple(None if part == "**" else _tokens(part) for part in parts)
    except re.error as exc:
        raise ToolInvalidArgsError(Phrase("The pattern {pattern} is not a valid glob: {problem}.",
                                          pattern=repr(pattern), problem=str(exc)),
                                   "Check the [...] character sets, e.g. '[a-z]*.md'.") from exc
    return CompiledPattern(compiled, tuple(base), max_depth)


def _tokens(part: str) -> Component:
    out: list[Token] = []
    i = 0
    while i < len(part):
        char = part[i]
        if char == "*":
            if not out or out[-1] is not STAR:  # '**' inside a name is one '*'
                out.append(STAR)
        elif char == "?":
            out.append(ANY)
        elif char == "[" and (end := _class_end(part, i)) != -1:
            body = part[i + 1:end]
            negate = body[:1] in ("!", "^")
            body = body[1:] if negate else body
            # Escape everything but '-' so ranges work and nothing else is regex syntax.
            escaped = "".join(c if c == "-" else re.escape(c) for c in body)
            out.append(re.compile("[" + ("^/" if negate else "") + escaped + "]", re.DOTALL))
            i = end
        else:
            out.append(char)
        i += 1
    return tuple(out)


def _class_end(part: str, start: int) -> int:
    """Index of the ']' closing the set opened at `start`, or -1 (then '[' is literal)."""
    i = start + 1
    if part[i:i + 1] in ("!", "^"):
        i += 1
    if part[i:i + 1] == "]":  # a leading ']' is a member of the set
        i += 1
    return part.find("]", i) if i < len(part) else -1


def _walk_tree(walk: Walk, start: str) -> None:
    """Depth-first scan below `start`, recording matching workspace-relative paths."""
    stack = [start]
    while stack:
        if walk.cancelled.is_set():
            return
        directory = stack.pop()
        try:
            with os.scandir(directory) as entries:
                listed = list(entries)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue  # vanished or unreadable folder: nothing to list there
        for entry in listed:
            if walk.cancelled.is_set():
                return
            walk.scanned += 1
            if walk.scanned > MAX_SCANNED:
                walk.scan_limited = True
                return
            descend = _visit(walk, entry)
            if descend:
                stack.append(entry.path)


def _visit(walk: Walk, entry: os.DirEntry[str]) -> bool:
    """Record `entry` if it matches; True when the walk should enter it."""
    if walk.protected.covers(entry.path, None):
        return False
    if walk.secrets.is_secret_name(entry.name) and not walk.include_secrets:
        walk.hidden_secrets += walk.pattern.matches(_relative(walk, entry.path))
        return False
    try:
        mode = entry.stat(follow_symlinks=False).st_mode
    except OSError:
        return False  # vanished between listing and stat
    is_dir = stat.S_ISDIR(mode)
    if stat.S_ISLNK(mode):
        real = os.path.realpath(entry.path)
        if not real.startswith(walk.root + os.sep) or walk.protected.covers(real, None):
            return False
        if walk.secrets.is_secret_path(os.path.relpath(real, walk.root)) and not walk.include_secrets:
            walk.hidden_secrets += walk.pattern.matches(_relative(walk, entry.path))
            return False
        is_dir = os.path.isdir(real)
    elif not (is_dir or stat.S_ISREG(mode)):
        return False  # devices, FIFOs and sockets are never offered to the model
    rel = _relative(walk, entry.path)
    if walk.pattern.matches(rel):
        walk.found.append(rel + "/" if is_dir else rel)
    depth = rel.count("/") + 1
    within = walk.pattern.max_depth is None or depth < walk.pattern.max_depth
    return is_dir and not stat.S_ISLNK(mode) and within


def _relative(walk: Walk, path: str) -> str:
    return os.path.relpath(path, walk.root).replace(os.sep, "/")


def build() -> GlobList:
    return GlobList()
