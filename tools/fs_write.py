"""fs_write: create or overwrite a text file in the workspace, atomically and revertibly.

The helpers at the bottom (`change_summary`, `undo_record`, `revert_write`) are shared with
fs_edit: both tools replace a whole file and undo the same way.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

from bot.tool import BaseTool, CallContext, ToolMeta, ToolNotFoundError, UnrevertibleError
from tools._sandbox import (
    display_path,
    read_regular_file,
    remove_empty_dirs,
    remove_file,
    resolve_in_workspace,
    write_atomic,
)

MAX_CONTENT_CHARS = 2_000_000
# Previous content larger than this is not read whole nor kept for undo (it would bloat the
# undo log); such an overwrite is previewed by size only and cannot be reverted.
MAX_UNDO_BYTES = 2_000_000
MAX_DIFF_LINES = 20_000  # line counting is quadratic in the worst case: skip it beyond this
MAX_PREVIEW_CHARS = 20_000  # of the diff a dry_run returns (the approval shows less)


@dataclass(frozen=True)
class Previous:
    """The file about to be replaced: absent, too large to keep (content None), or its bytes."""

    exists: bool
    size: int = 0
    content: bytes | None = None


def read_previous(ctx: CallContext, real: Path) -> Previous:
    try:
        data, size = read_regular_file(ctx, real, limit=MAX_UNDO_BYTES + 1)
    except ToolNotFoundError:
        return Previous(exists=False)
    return Previous(True, size, data if len(data) <= MAX_UNDO_BYTES else None)


class FsWrite(BaseTool):
    examples: ClassVar[list[dict[str, Any]]] = [
        {"path": "notes/conformance.md", "content": "# Conformance\n"},
    ]

    def __init__(self, workspace: str) -> None:
        self.meta = ToolMeta(
            name="fs_write",
            description=(
                "Create or overwrite a UTF-8 text file inside the workspace with `content` "
                "(parent folders are created). `path` is relative to the workspace. Replaces the "
                "whole file: to change part of an existing file prefer fs_edit."
            ),
            schema={
                "type": "object",
                "properties": {
                    "path": {"type": "string", "minLength": 1, "maxLength": 4096,
                             "description": "File path relative to the workspace"},
                    "content": {"type": "string", "maxLength": MAX_CONTENT_CHARS,
                                "description": "The complete new content of the file"},
                },
                "required": ["path", "content"],
                "additionalProperties": False,
            },
            has_side_effects=True,
            risk="medium",
            returns_untrusted=True,  # a path shown after symlinks is a name someone else chose
            idempotent=True,
            supports_dry_run=True,
            capability_required=f"fs:write:{workspace}/*",
        )

    def approval_scope(self, args: dict[str, Any]) -> tuple[str, str] | None:
        """An "Always" covers files written in the same folder of the workspace."""
        folder = PurePosixPath(str(args.get("path", ""))).parent.as_posix()
        if ".." in folder.split("/") or folder.startswith("/"):
            return None
        shown = "the workspace root" if folder in ("", ".") else f"`{folder}/`"
        return f"folder:{folder}", f"files in {shown}"

    async def dry_run(self, ctx: CallContext, path: str, content: str, **_: Any) -> dict[str, Any]:
        real = resolve_in_workspace(ctx, path, must_exist=False, for_write=True)
        previous = read_previous(ctx, real)
        new = content.encode("utf-8")
        shown = display_path(ctx, real)
        return {"path": shown, "creates_file": not previous.exists, "would_write": len(new),
                "summary": change_summary(shown, previous, new),
                "diff": preview_diff(shown, previous, content)}

    async def execute(self, ctx: CallContext, path: str, content: str, **_: Any) -> dict[str, Any]:
        real = resolve_in_workspace(ctx, path, must_exist=False, for_write=True)
        previous = read_previous(ctx, real)
        new = content.encode("utf-8")
        created_dirs = write_atomic(ctx, real, new)
        shown = display_path(ctx, real)
        return {"path": shown, "created": not previous.exists, "bytes_written": len(new),
                "summary": change_summary(shown, previous, new),
                "undo": undo_record(previous, new, created_dirs)}

    async def revert(self, ctx: CallContext, args: dict[str, Any], result: dict[str, Any]) -> dict:
        return await revert_write(ctx, result)


# --- shared with fs_edit -----------------------------------------------------------------


def format_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def line_changes(old: str, new: str) -> tuple[int, int] | None:
    """(lines added, lines removed) between two texts; None when they are too long to compare."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    if max(len(old_lines), len(new_lines)) > MAX_DIFF_LINES:
        return None
    added = removed = 0
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "delete"):
            removed += i2 - i1
        if tag in ("replace", "insert"):
            added += j2 - j1
    return added, removed


def change_summary(shown: str, previous: Previous, new: bytes) -> str:
    """"Create notes/a.md (1.2 KB)" or "Overwrite notes/a.md (3.0 KB → 1.2 KB, +12 −40 lines)"."""
    if not previous.exists:
        return f"Create {shown} ({format_size(len(new))})"
    sizes = f"{format_size(previous.size)} → {format_size(len(new))}"
    if previous.content is None:
        return f"Overwrite {shown} ({sizes}; too large to compare, cannot be undone)"
    return f"Overwrite {shown} ({sizes}, {describe_lines(previous.content, new)})"


def preview_diff(shown: str, previous: Previous, new: str) -> str:
    """What the write puts in the file, as a unified diff (a creation is all '+' lines), so the
    approval shows the content and not only its size. Empty when it cannot be compared."""
    if previous.exists and previous.content is None:
        return ""
    old = previous.content.decode("utf-8", errors="replace") if previous.content else ""
    old_lines, new_lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
    if previous.exists and max(len(old_lines), len(new_lines)) > MAX_DIFF_LINES:
        return ""  # comparing is quadratic in the worst case (a creation is not compared)
    lines = difflib.unified_diff(old_lines, new_lines, fromfile="/dev/null" if not previous.exists
                                 else f"a/{shown}", tofile=f"b/{shown}", n=3)
    out: list[str] = []
    size = 0
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
        size += len(out[-1])
        if size > MAX_PREVIEW_CHARS:
            out.append(f"… (diff cut at {MAX_PREVIEW_CHARS} characters)\n")
            break
    return "".join(out)


def describe_lines(old: bytes, new: bytes) -> str:
    changes = line_changes(old.decode("utf-8", errors="replace"),
                           new.decode("utf-8", errors="replace"))
    return "lines not compared" if changes is None else f"+{changes[0]} −{changes[1]} lines"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def undo_record(previous: Previous, new: bytes, created_dirs: list[str]) -> dict[str, Any]:
    """What revert needs: the previous content (or that the file was created) and the size and
    hash of what was written, so a later change by someone else is never clobbered."""
    record: dict[str, Any] = {"written_bytes": len(new), "written_sha256": sha256(new)}
    if not previous.exists:
        record["created"] = True
        record["created_dirs"] = created_dirs
    elif previous.content is None:
        record["previous_kept"] = False
    else:
        try:
            record["previous_text"] = previous.content.decode("utf-8")
        except UnicodeDecodeError:
            record["previous_b64"] = base64.b64encode(previous.content).decode("ascii")
    return record


async def revert_write(ctx: CallContext, result: dict[str, Any]) -> dict[str, Any]:
    undo = result.get("undo")
    shown = result.get("path")
    if not isinstance(undo, dict) or not isinstance(shown, str):
        raise UnrevertibleError("This result carries no undo information.")
    real = resolve_in_workspace(ctx, shown, must_exist=False, for_write=True)
    if not _still_as_written(ctx, real, undo):
        raise UnrevertibleError(
            f"{shown} changed after it was written; reverting would lose those changes.",
            "Tell the user the file was modified since; offer to restore it by hand.",
            {"path": shown},
        )
    if undo.get("created"):
        remove_file(ctx, real)
        removed_dirs = remove_empty_dirs(ctx, list(undo.get("created_dirs") or []))
        return {"path": shown, "reverted": True, "removed": True, "removed_dirs": removed_dirs}
    if "previous_text" in undo:
        previous = str(undo["previous_text"]).encode("utf-8")
    elif "previous_b64" in undo:
        previous = base64.b64decode(undo["previous_b64"])
    else:
        raise UnrevertibleError(f"The previous content of {shown} was too large to keep for undo.")
    write_atomic(ctx, real, previous)
    return {"path": shown, "reverted": True, "restored_bytes": len(previous)}


def _still_as_written(ctx: CallContext, real: Path, undo: dict[str, Any]) -> bool:
    expected_size = undo.get("written_bytes")
    if not isinstance(expected_size, int):
        return False
    try:  # read one byte more than written: a grown file differs without reading all of it
        current, _ = read_regular_file(ctx, real, limit=expected_size + 1)
    except ToolNotFoundError:
        return False
    return len(current) == expected_size and sha256(current) == undo.get("written_sha256")


def build(config: Any = None) -> FsWrite:
    return FsWrite(str(config.workspace) if config is not None else "<workspace>")
