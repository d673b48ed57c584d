"""fs_write: create or overwrite a text file in the workspace, atomically and revertibly.

The helpers at the bottom (`change_summary`, `undo_record`, `revert_write`) are shared with
fs_edit: both tools replace a whole file and undo the same way.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
from typing import Any, ClassVar

from bot.tool import BaseTool, CallContext, ToolMeta, UnrevertibleError
from tools._sandbox import (
    display_path,
    read_if_exists,
    remove_empty_dirs,
    remove_file,
    resolve_in_workspace,
    write_atomic,
)

MAX_CONTENT_CHARS = 2_000_000
# Previous content larger than this is not kept for undo (it would bloat the undo log).
MAX_UNDO_BYTES = 2_000_000


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
            returns_untrusted=False,
            idempotent=True,
            supports_dry_run=True,
            capability_required=f"fs:write:{workspace}/*",
        )

    async def dry_run(self, ctx: CallContext, path: str, content: str, **_: Any) -> dict[str, Any]:
        real = resolve_in_workspace(ctx, path, must_exist=False, for_write=True)
        previous = read_if_exists(ctx, real)
        new = content.encode("utf-8")
        shown = display_path(ctx, real)
        return {"path": shown, "creates_file": previous is None, "would_write": len(new),
                "summary": change_summary(shown, previous, new)}

    async def execute(self, ctx: CallContext, path: str, content: str, **_: Any) -> dict[str, Any]:
        real = resolve_in_workspace(ctx, path, must_exist=False, for_write=True)
        previous = read_if_exists(ctx, real)
        new = content.encode("utf-8")
        created_dirs = write_atomic(ctx, real, new)
        shown = display_path(ctx, real)
        return {"path": shown, "created": previous is None, "bytes_written": len(new),
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


def line_changes(old: str, new: str) -> tuple[int, int]:
    """(lines added, lines removed) between two texts."""
    added = removed = 0
    matcher = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "delete"):
            removed += i2 - i1
        if tag in ("replace", "insert"):
            added += j2 - j1
    return added, removed


def change_summary(shown: str, previous: bytes | None, new: bytes) -> str:
    """"Create notes/a.md (1.2 KB)" or "Overwrite notes/a.md (3.0 KB → 1.2 KB, +12 −40 lines)"."""
    if previous is None:
        return f"Create {shown} ({format_size(len(new))})"
    sizes = f"{format_size(len(previous))} → {format_size(len(new))}"
    old_text = previous.decode("utf-8", errors="replace")
    added, removed = line_changes(old_text, new.decode("utf-8"))
    return f"Overwrite {shown} ({sizes}, +{added} −{removed} lines)"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def undo_record(previous: bytes | None, new: bytes, created_dirs: list[str]) -> dict[str, Any]:
    """What revert needs: the previous content (or that the file was created) and a hash of
    what was written, so a later change by someone else is never clobbered."""
    record: dict[str, Any] = {"written_sha256": sha256(new)}
    if previous is None:
        record["created"] = True
        record["created_dirs"] = created_dirs
    elif len(previous) > MAX_UNDO_BYTES:
        record["previous_kept"] = False
    else:
        try:
            record["previous_text"] = previous.decode("utf-8")
        except UnicodeDecodeError:
            record["previous_b64"] = base64.b64encode(previous).decode("ascii")
    return record


async def revert_write(ctx: CallContext, result: dict[str, Any]) -> dict[str, Any]:
    undo = result.get("undo")
    shown = result.get("path")
    if not isinstance(undo, dict) or not isinstance(shown, str):
        raise UnrevertibleError("This result carries no undo information.")
    real = resolve_in_workspace(ctx, shown, must_exist=False, for_write=True)
    current = read_if_exists(ctx, real)
    if current is None or sha256(current) != undo.get("written_sha256"):
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


def build(config: Any = None) -> FsWrite:
    return FsWrite(str(config.workspace) if config is not None else "<workspace>")
