"""fs_edit: replace one exact snippet of a workspace text file; previewed as a unified diff."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

from bot.core.tool import (
    BaseTool,
    CallContext,
    ToolInvalidArgsError,
    ToolMeta,
    ToolNotFoundError,
    ToolUnsupportedError,
)
from bot.language.phrase import Phrase, plural_phrase
from tools._diff import unified_diff
from tools._sandbox import display_path, read_regular_file, resolve_in_workspace, write_atomic
from tools.fs_write import (
    MAX_CONTENT_CHARS,
    MAX_UNDO_BYTES,
    Previous,
    describe_lines,
    revert_write,
    undo_record,
)

MAX_RESULT_DIFF_CHARS = 20_000  # of the diff in the result the model reads (a preview is whole)
_COUNT_CAP = 1000  # counting stops here: "1000 or more" is already a clear answer


@dataclass(frozen=True)
class PlannedEdit:
    real: Path
    shown: str
    old_bytes: bytes
    new_text: str
    diff: str
    summary: Phrase


class FsEdit(BaseTool):
    examples: ClassVar[list[dict[str, Any]]] = [
        {"path": "notes/conformance.md", "old_text": "draft", "new_text": "final"},
    ]

    def __init__(self, workspace: str) -> None:
        self.meta = ToolMeta(
            name="fs_edit",
            description=(
                "Edit a UTF-8 text file in the workspace by replacing `old_text` with `new_text`. "
                "`old_text` must match exactly once (whitespace and indentation included): copy "
                "it from fs_read output and include a few surrounding lines if it is not unique. "
                "Use an empty `new_text` to delete the snippet."
            ),
            schema={
                "type": "object",
                "properties": {
                    "path": {"type": "string", "minLength": 1, "maxLength": 4096,
                             "description": "File path relative to the workspace"},
                    "old_text": {"type": "string", "minLength": 1, "maxLength": MAX_CONTENT_CHARS,
                                 "description": "The exact text to replace (must occur once)"},
                    "new_text": {"type": "string", "maxLength": MAX_CONTENT_CHARS,
                                 "description": "The replacement text"},
                },
                "required": ["path", "old_text", "new_text"],
                "additionalProperties": False,
            },
            has_side_effects=True,
            risk="medium",
            returns_untrusted=True,  # the diff quotes the file; names may come via symlinks
            idempotent=False,
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

    async def dry_run(self, ctx: CallContext, path: str, old_text: str, new_text: str,
                      **_: Any) -> dict[str, Any]:
        plan = await plan_edit(ctx, path, old_text, new_text)
        return {"path": plan.shown, "summary": plan.summary, "diff": plan.diff}

    async def execute(self, ctx: CallContext, path: str, old_text: str, new_text: str,
                      **_: Any) -> dict[str, Any]:
        plan = await plan_edit(ctx, path, old_text, new_text)
        new_bytes = plan.new_text.encode("utf-8")
        write_atomic(ctx, plan.real, new_bytes)
        diff = plan.diff
        if len(diff) > MAX_RESULT_DIFF_CHARS:
            diff = (f"{diff[:MAX_RESULT_DIFF_CHARS]}\n… (diff cut at {MAX_RESULT_DIFF_CHARS:,} of "
                    f"{len(plan.diff):,} characters; read the file to see the rest)\n")
        return {"path": plan.shown, "replacements": 1, "summary": plan.summary, "diff": diff,
                "undo": undo_record(Previous(True, len(plan.old_bytes), plan.old_bytes),
                                    new_bytes, [])}

    async def revert(self, ctx: CallContext, args: dict[str, Any], result: dict[str, Any]) -> dict:
        return await revert_write(ctx, result)


async def plan_edit(ctx: CallContext, path: str, old_text: str, new_text: str) -> PlannedEdit:
    if old_text == new_text:
        raise ToolInvalidArgsError(Phrase("old_text and new_text are identical; nothing would change."),
                                   "Pass the replacement you want in new_text.")
    real = resolve_in_workspace(ctx, path, must_exist=True, for_write=True)
    shown = display_path(ctx, real)
    old_bytes, size = read_regular_file(ctx, real, limit=MAX_UNDO_BYTES + 1)
    if size > MAX_UNDO_BYTES or len(old_bytes) > MAX_UNDO_BYTES:
        raise ToolUnsupportedError(
            Phrase("{path} is too large for fs_edit ({size} bytes; the limit is {limit}).",
                   path=shown, size=size, limit=MAX_UNDO_BYTES),
            "Edit a smaller file, or tell the user this file is too large to edit safely here.",
        )
    try:
        content = old_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolUnsupportedError(
            Phrase("{path} is not UTF-8 text; fs_edit only edits UTF-8 files.", path=shown),
            "Read it with fs_read (try encoding='latin-1') and, if the user agrees, rewrite it "
            "as UTF-8 with fs_write.",
        ) from exc
    _require_single_match(shown, content, old_text)
    updated = content.replace(old_text, new_text, 1)
    diff = await unified_diff(content, updated, f"a/{shown}", f"b/{shown}")
    summary = Phrase("Edit {path} ({lines})", path=shown, lines=describe_lines(diff))
    return PlannedEdit(real, shown, old_bytes, updated, diff.text, summary)


def count_occurrences(content: str, needle: str) -> int:
    """Occurrences including overlapping ones ("aa" occurs twice in "aaa"), capped."""
    count, start = 0, content.find(needle)
    while start != -1 and count < _COUNT_CAP:
        count += 1
        start = content.find(needle, start + 1)
    return count


def _require_single_match(shown: str, content: str, old_text: str) -> None:
    count = count_occurrences(content, old_text)
    if count == 1:
        return
    if count == 0:
        hint = ("old_text must match the file exactly, including whitespace, indentation and "
                "line breaks. Read the file with fs_read and copy the snippet verbatim")
        if "\r\n" in content and "\r\n" not in old_text and "\n" in old_text:
            hint += " (this file uses Windows CRLF line endings)"
        raise ToolNotFoundError(Phrase("old_text was found 0 times in {path}.", path=shown), hint + ".",
                                {"path": shown, "matches": 0})
    raise ToolInvalidArgsError(
        plural_phrase("old_text was found {n} or more time in {path}; it must match exactly once.",
                      "old_text was found {n} or more times in {path}; it must match exactly once.",
                      count, path=shown) if count >= _COUNT_CAP else
        plural_phrase("old_text was found {n} time in {path}; it must match exactly once.",
                      "old_text was found {n} times in {path}; it must match exactly once.",
                      count, path=shown),
        "Add surrounding context (the line before or after, or the enclosing function/heading) "
        "to old_text so it identifies one place, then call fs_edit again.",
        {"path": shown, "matches": count},
    )


def build(config: Any = None) -> FsEdit:
    return FsEdit(str(config.workspace) if config is not None else "<workspace>")
