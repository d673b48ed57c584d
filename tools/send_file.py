"""send_file: send a workspace file (a chart, a converted document) to the chat of the conversation.

Read-only and low risk: it reads one file inside the workspace sandbox (the same checks as
fs_read: no path outside, no symlink escape, none of the bot's own files) and hands it to the
channel as a `FileOut` event through the call context; the channel uploads it with its own
library. The tool knows each platform's upload limit only as a number, so the model gets a clear
error instead of a failed upload.
"""

from __future__ import annotations

import asyncio
import mimetypes
from pathlib import Path
from typing import Any

from bot.core.events import FileOut
from bot.core.secrets.files import DEFAULT, SecretFiles
from bot.core.tool import BaseTool, CallContext, Risk, ToolMeta, ToolUnsupportedError
from bot.language.catalogs import N_
from bot.language.phrase import Number, Phrase
from bot.media.images import FORMATS, sniff_image
from bot.media.received import shown_name
from tools._sandbox import (
    display_path,
    is_secret_file,
    leads_to_secret_file,
    read_regular_file,
    resolve_in_workspace,
)

# What each channel can upload (bytes). Telegram bots: 50 MB; Discord without boosts: 10 MiB.
UPLOAD_LIMITS = {"telegram": 50_000_000, "discord": 10 * 1024 * 1024}
DEFAULT_LIMIT = 50_000_000
MAX_CAPTION = 1000
PREVIEW = N_("Send {path} to this chat")
SECRET_PREVIEW = N_("Send the secret file {path} to this chat (its content is not redacted)")


class SendFile(BaseTool):
    def __init__(self, workspace: str, secrets: SecretFiles = DEFAULT) -> None:
        self.workspace = workspace   # where a call runs when the caller does not say
        self.secrets = secrets
        self.meta = ToolMeta(
            name="send_file",
            description=(
                "Send a file from the workspace to the user, in the chat of this conversation "
                "(e.g. a chart you made, a converted document, a photo they sent earlier from "
                "inbox/). `path` is relative to the workspace; `caption` is an optional short "
                "text shown with it. Size limits: Telegram 50 MB, Discord 10 MB."
            ),
            schema={
                "type": "object",
                "properties": {
                    "path": {"type": "string", "minLength": 1, "maxLength": 4096,
                             "description": "File path relative to the workspace"},
                    "caption": {"type": "string", "maxLength": MAX_CAPTION,
                                "description": "Short text shown with the file"},
                },
                "required": ["path"],
                "additionalProperties": False,
            },
            has_side_effects=False,
            risk="low",
            returns_untrusted=False,
            idempotent=False,
            supports_dry_run=True,
            capability_required=f"fs:read:{workspace}/*",
            egress=True,   # the file is put in front of everyone in the chat
        )

    def risk_for(self, args: dict[str, Any], workspace: Path | None = None) -> Risk:
        """Sending a secret file — by its name, or through a link to one — puts it in the
        chat: only in a call a person approves."""
        return "high" if self._secret(args, workspace) else "low"

    def approval_scope(self, args: dict[str, Any],
                       workspace: Path | None = None) -> tuple[str, str] | None:
        if self._secret(args, workspace):
            return None
        return "files", Phrase("sending files that are not secret files")

    def _secret(self, args: dict[str, Any], workspace: Path | None) -> bool:
        return leads_to_secret_file(workspace or self.workspace, str(args.get("path", "")),
                                    self.secrets)

    async def dry_run(self, ctx: CallContext, path: str, caption: str = "", **_: Any) -> dict[str, Any]:
        real = resolve_in_workspace(ctx, path, must_exist=True, for_write=False, previewing=True)
        text = SECRET_PREVIEW if is_secret_file(ctx, path, real) else PREVIEW
        return {"summary": Phrase(text, path=display_path(ctx, real))}

    async def execute(self, ctx: CallContext, path: str, caption: str = "", **_: Any) -> dict[str, Any]:
        real = resolve_in_workspace(ctx, path, must_exist=True, for_write=False)
        shown = display_path(ctx, real)
        limit = UPLOAD_LIMITS.get(ctx.channel, DEFAULT_LIMIT)
        # Up to 50 MB: read in a worker thread, not on the event loop.
        data, size = await asyncio.to_thread(read_regular_file, ctx, real, limit + 1)
        if size > limit:
            raise ToolUnsupportedError(
                Phrase("{path} is {size} MB; {channel} accepts files up to {limit} MB.", path=shown,
                       size=Number(round(size / 1_000_000, 1)), channel=ctx.channel,
                       limit=Number(round(limit / 1_000_000, 1))),
                "Send a smaller file: compress it, split it, or reduce an image's size first.",
                {"path": shown, "size_bytes": size})
        # The chat shows this name: no control or format characters (a right-to-left override
        # would let "invoice<U+202E>gpj.exe" pass for "invoiceexe.jpg").
        event = FileOut(name=shown_name(real.name, "file"), data=data, path=shown, caption=caption,
                        media_type=_media_type(real.name, data))
        if not await ctx.emit(event):
            raise ToolUnsupportedError(Phrase("There is no chat to send the file to."),
                                       "Tell the user the file's path instead.")
        return {"sent": shown, "size_bytes": size, "channel": ctx.channel}


def _media_type(name: str, data: bytes) -> str:
    kind = sniff_image(data)
    if kind is not None:
        return FORMATS[kind][1]
    if data.startswith(b"%PDF-"):
        return "application/pdf"
    return mimetypes.guess_type(name)[0] or "application/octet-stream"


def build(config: Any = None) -> SendFile:
    return SendFile(str(config.workspace) if config is not None else "<workspace>",
                    SecretFiles.from_config(config))
