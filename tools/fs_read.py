"""fs_read: read a text file from the workspace (untrusted output: a file can say anything).

A secret file (bot/core/secrets/files.py) is read only in a call a person approves: naming one is
high risk, its preview names it without showing it, no "Always" covers it, and the sandbox
refuses it (by any other name too) in a call that was not approved.
"""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import Any

from bot.core.secrets.files import DEFAULT, SecretFiles
from bot.core.tool import (
    BaseTool,
    CallContext,
    Risk,
    ToolInvalidArgsError,
    ToolMeta,
    ToolUnsupportedError,
)
from bot.language.catalogs import N_
from bot.language.phrase import Phrase
from tools._sandbox import (
    display_path,
    is_secret_file,
    leads_to_secret_file,
    read_regular_file,
    resolve_in_workspace,
)

SECRET_PREVIEW = N_("Read the secret file {path} (its values reach the model redacted)")
DEFAULT_MAX_BYTES = 50_000
MAX_BYTES = 500_000
# Encodings in which NUL bytes are ordinary text; for every other one a NUL means "binary".
_WIDE_ENCODINGS = ("utf-16", "utf-32")


class FsRead(BaseTool):
    def __init__(self, workspace: str, secrets: SecretFiles = DEFAULT) -> None:
        self.workspace = workspace   # where a call runs when the caller does not say
        self.secrets = secrets
        self.meta = ToolMeta(
            name="fs_read",
            description=(
                "Read a text file inside the workspace. `path` is relative to the workspace "
                "(e.g. notes/todo.md). Returns the content (at most `max_bytes`, with "
                "`truncated` set when the file is longer), its size and the encoding used. "
                "Binary files are refused. Use glob_list to find files first. Secret files "
                "(.env, keys, credentials) need the user's approval, and their values are "
                "shown redacted."
            ),
            schema={
                "type": "object",
                "properties": {
                    "path": {"type": "string", "minLength": 1, "maxLength": 4096,
                             "description": "File path relative to the workspace"},
                    "max_bytes": {"type": "integer", "minimum": 1, "maximum": MAX_BYTES,
                                  "default": DEFAULT_MAX_BYTES,
                                  "description": "Read at most this many bytes"},
                    "encoding": {"type": "string", "minLength": 1, "maxLength": 40,
                                 "default": "utf-8", "description": "Text encoding"},
                },
                "required": ["path"],
                "additionalProperties": False,
            },
            has_side_effects=False,
            risk="low",
            returns_untrusted=True,
            idempotent=True,
            supports_dry_run=True,
            capability_required=f"fs:read:{workspace}/*",
            egress=False,   # local: files of the workspace only
        )

    def risk_for(self, args: dict[str, Any], workspace: Path | None = None) -> Risk:
        """A secret file — by its name, or through a link to one (notes/soft.txt -> ../.env, a
        hard link of .env) — is high: asked, naming it."""
        return "high" if self._secret(args, workspace) else "low"

    def approval_scope(self, args: dict[str, Any],
                       workspace: Path | None = None) -> tuple[str, str] | None:
        """An "Always" covers reading files that are not secrets; a secret's approval covers
        that one call only."""
        if self._secret(args, workspace):
            return None
        return "files", Phrase("reading files that are not secret files")

    def _secret(self, args: dict[str, Any], workspace: Path | None) -> bool:
        return leads_to_secret_file(workspace or self.workspace, str(args.get("path", "")),
                                    self.secrets)

    async def dry_run(self, ctx: CallContext, path: str, **args: Any) -> dict[str, Any]:
        real = resolve_in_workspace(ctx, path, must_exist=True, for_write=False, previewing=True)
        if not is_secret_file(ctx, path, real):
            return await self.execute(ctx, path, **args)
        return {"summary": Phrase(SECRET_PREVIEW, path=display_path(ctx, real))}

    async def execute(self, ctx: CallContext, path: str, max_bytes: int = DEFAULT_MAX_BYTES,
                      encoding: str = "utf-8", **_: Any) -> dict[str, Any]:
        codec = _codec(encoding)
        real = resolve_in_workspace(ctx, path, must_exist=True, for_write=False)
        data, size = read_regular_file(ctx, real, limit=max_bytes)
        truncated = size > len(data)
        shown = display_path(ctx, real)
        if b"\x00" in data and not codec.name.startswith(_WIDE_ENCODINGS):
            raise _binary(shown, size)
        try:
            # An incremental decoder tolerates a multi-byte character cut by the byte limit.
            content = codec.incrementaldecoder("strict").decode(data, final=not truncated)
        except UnicodeDecodeError as exc:
            raise _binary(shown, size, codec.name) from exc
        return {"path": shown, "content": content, "size_bytes": size,
                "bytes_read": len(data), "truncated": truncated, "encoding": codec.name}


def _codec(encoding: str) -> codecs.CodecInfo:
    try:
        codec = codecs.lookup(encoding)
    except LookupError as exc:
        raise ToolInvalidArgsError(
            Phrase("Unknown encoding {encoding}.", encoding=repr(encoding)),
            "Use a standard text encoding such as 'utf-8', 'latin-1' or 'utf-16', or omit it.",
        ) from exc
    if not getattr(codec, "_is_text_encoding", True):
        raise ToolInvalidArgsError(Phrase("{encoding} is not a text encoding.", encoding=repr(encoding)),
                                   "Use a text encoding such as 'utf-8' or 'latin-1'.")
    return codec


def _binary(shown: str, size: int, encoding: str = "") -> ToolUnsupportedError:
    return ToolUnsupportedError(
        Phrase("{path} is not valid {encoding} text; fs_read only returns text.", path=shown,
               encoding=encoding) if encoding else
        Phrase("{path} looks binary (it contains NUL bytes); fs_read only returns text.", path=shown),
        "If it is text in another encoding, call fs_read again with encoding='latin-1' (or the "
        "right one). If it is really binary (image, archive, database), do not read it: tell "
        "the user what kind of file it is, or inspect it with a suitable tool if one is offered.",
        {"path": shown, "size_bytes": size},
    )


def build(config: Any = None) -> FsRead:
    return FsRead(str(config.workspace) if config is not None else "<workspace>",
                  SecretFiles.from_config(config))
