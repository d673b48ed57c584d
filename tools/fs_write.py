"""fs_write: create or overwrite a text file in the workspace, atomically and revertibly.

The helpers at the bottom (`change_summary`, `undo_record`, `revert_write`) are shared with
fs_edit: both tools replace a whole file and undo the same way.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

from bot.core.tool import BaseTool, CallContext, ToolMeta, ToolNotFoundError, UnrevertibleError
from bot.language.phrase import Phrase
from tools._diff import Diff, unified_diff
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
            egress=False,   # local: files of the workspace only
        )

    def approval_scope(self, args: dict[str, Any]) -> tuple[str, str] | None:
        """An "Always" covers files written in the same folder of the workspace."""
        folder = PurePosixPath(str(args.get("path", ""))).parent.as_posix()
        if ".." in folder.split("/") or folder.startswith("/"):
            return None
        if folder in ("", "."):
            return f"folder:{folder}", Phrase("files in the workspace root")
        return f"folder:{folder}", Phrase("files in {folder}", folder=f"`{folder}/`")

    async def dry_run(self, ctx: CallContext, path: str, content: str, **_: Any) -> dict[str, Any]:
        real = resolve_in_workspace(ctx, path, must_exist=False, for_write=True)
        previous = read_previous(ctx, real)
        new = content.encode("utf-8")
        shown = display_path(ctx, real)
        diff = await content_diff(shown, previous, content)
        return {"path": shown, "creates_file": not previous.exists, "would_write": len(new),
                "summary": change_summary(shown, previous, new, diff), "diff": diff.text}

    async def execute(self, ctx: CallContext, path: str, content: str, **_: Any) -> dict[str, Any]:
        real = resolve_in_workspace(ctx, path, must_exist=False, for_write=True)
        previous = read_previous(ctx, real)
        new = content.encode("utf-8")
        diff = await content_diff(display_path(ctx, real), previous, content)
        created_dirs = write_atomic(ctx, real, new)
        shown = display_path(ctx, real)
        return {"path": shown, "created": not previous.exists, "bytes_written": len(new),
                "summary": change_summary(shown, previous, new, diff),
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


def change_summary(shown: str, previous: Previous, new: bytes, diff: Diff) -> Phrase:
    """"Create notes/a.md (1.2 KB)" or "Overwrite notes/a.md (3.0 KB → 1.2 KB, +12 −40 lines)",
    in the reader's language when shown."""
    if not previous.exists:
        return Phrase("Create {path} ({size})", path=shown, size=format_size(len(new)))
    old, size = format_size(previous.size), format_size(len(new))
    if previous.content is None:
        return Phrase("Overwrite {path} ({old} → {size}; too large to compare, cannot be undone)",
                      path=shown, old=old, size=size)
    return Phrase("Overwrite {path} ({old} → {size}, {lines})", path=shown, old=old, size=size,
                  lines=describe_lines(diff))


def describe_lines(diff: Diff) -> Phrase:
    if diff.exact:
        return Phrase("+{added} −{removed} lines", added=diff.added, removed=diff.removed)
    return Phrase("+{added} −{removed} lines; the changed region is shown as one block",
                  added=diff.added, removed=diff.removed)


async def content_diff(shown: str, previous: Previous, new: str) -> Diff:
    """What the write puts in the file, as a whole unified diff (a creation is all '+' lines), so
    an approval shows the content and not only its size. When the old content is too large to
    compare, every new line is shown as added."""
    if previous.exists and previous.content is not None:
        old = previous.content.decode("utf-8", errors="replace")
        return await unified_diff(old, new, f"a/{shown}", f"b/{shown}")
    fromfile = "/dev/null" if not previous.exists else f"a/{shown} (not compared)"
    return await unified_diff("", new, fromfile, f"b/{shown}")


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
        raise UnrevertibleError(Phrase("This result carries no undo information."))
    real = resolve_in_workspace(ctx, shown, must_exist=False, for_write=True)
    if not real.exists() and not real.is_symlink():
        # Removed since (a shell `rm`, by hand): nothing of this write is left to take back.
        raise UnrevertibleError(
            Phrase("{path} was deleted after it was written; there is nothing left to revert.",
                   path=shown),
            "Tell the user the file no longer exists; offer to write it again if they want it.",
            {"path": shown},
        )
    if not _still_as_written(ctx, real, undo):
        raise UnrevertibleError(
            Phrase("{path} changed after it was written; reverting would lose those changes.",
                   path=shown),
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
        raise UnrevertibleError(Phrase("The previous content of {path} was too large to keep for "
                                       "undo.", path=shown))
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
