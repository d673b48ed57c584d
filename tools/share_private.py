"""share_private: show the group a file or memories of the requester's own.

In a conversation other people read (a group) with per_sender workspaces, a turn works in the
conversation's own folder and memory (bot.access.audience): the requester's private folder and
memory are out of its reach. This is the one way to put something of theirs in front of the
group, and it is a way out (egress) that discloses: asked every time, of the requester, with a
preview naming what is shared and with whom (bot.core.policy) — never its content: the card is
posted in the group, so it names the file or how many memories (and their numbers), not their
words. A file is copied into the
group's folder (`inbox/…`), memories into the group's memory; the result says where. A secret
file is never shared.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import PurePosixPath
from typing import Any

from bot.core.tool import (
    BaseTool,
    CallContext,
    ToolMeta,
    ToolPermissionError,
    ToolUnsupportedError,
)
from bot.language.phrase import Number, Phrase, plural_phrase
from bot.media.received import write_new_file
from tools._sandbox import display_path, is_secret_file, read_regular_file, resolve_in_workspace
from tools.memory_fetch import search_words

NAME = "share_private"
MAX_BYTES = 10_000_000
MAX_MEMORIES = 5


class SharePrivate(BaseTool):
    meta = ToolMeta(
        name=NAME,
        description=(
            "In a group chat, your file and memory tools work in the group's own folder and "
            "memory. To show the group one of the requester's PRIVATE files (`path`, relative to "
            "their own folder) or memories (`memory_query`, words to find them), call this: the "
            "requester is asked first, and the file is copied into the group's folder."),
        schema={
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1, "maxLength": 4096},
                "memory_query": {"type": "string", "minLength": 1, "maxLength": 500},
            },
            "additionalProperties": False,
            "minProperties": 1,
            "maxProperties": 1,
        },
        has_side_effects=True,
        risk="medium",
        returns_untrusted=True,   # a file's or a memory's words are data
        supports_dry_run=True,
        capability_required="share:private",
        egress=True,      # it puts the requester's data in front of the group
        discloses=True,   # asked every time, of the requester (bot.core.policy)
    )

    async def dry_run(self, ctx: CallContext, **args: Any) -> dict[str, Any]:
        whom = _audience(ctx)
        if "path" in args:
            shown = display_path(_private(ctx), _source(ctx, args["path"], previewing=True))
            return {"summary": Phrase("Share your private file {path} with {whom}: it is copied "
                                      "into the group's folder, where every member's turns can "
                                      "read it.", path=shown, whom=whom)}
        # The card is posted where it was asked: in front of the very audience the memories are
        # not yet shared with. It names how many and which (their numbers), never their words.
        query = args["memory_query"]
        memories = await _memories(ctx, query)
        if not memories:
            return {"summary": Phrase("None of your private memories matches “{query}”: nothing "
                                      "would be shared with {whom}.", query=query, whom=whom)}
        return {"summary": plural_phrase(
            "Share {n} of your private memories (number {numbers}) matching “{query}” with "
            "{whom}. Its words are not shown here, where everyone in the conversation reads "
            "this card.",
            "Share {n} of your private memories (numbers {numbers}) matching “{query}” with "
            "{whom}. Their words are not shown here, where everyone in the conversation reads "
            "this card.", len(memories),
            numbers=", ".join(str(m.id) for m in memories), query=query, whom=whom)}

    async def execute(self, ctx: CallContext, **args: Any) -> dict[str, Any]:
        whom = _audience(ctx)
        if "memory_query" in args:
            memories = await _memories(ctx, args["memory_query"])
            for memory in memories:
                await ctx.ports.memory.remember(ctx.memory_scope, memory.text)
            return {"shared_with": whom, "memories": [m.text for m in memories]}
        private = _private(ctx)
        real = _source(ctx, args["path"])
        data, size = await asyncio.to_thread(read_regular_file, private, real, MAX_BYTES + 1)
        if size > MAX_BYTES:
            raise ToolUnsupportedError(Phrase("{path} is too large to share ({size} bytes; the "
                                              "limit is {limit}).", path=display_path(private, real),
                                              size=Number(size), limit=Number(MAX_BYTES)))
        name = PurePosixPath(real.name)
        copied = await asyncio.to_thread(write_new_file, ctx.workspace, name.stem, name.suffix,
                                         "shared", data, time.time())
        return {"shared_with": whom, "copied_to": copied, "size_bytes": size}


def _audience(ctx: CallContext) -> str:
    if not ctx.audience or ctx.private_workspace is None:
        raise ToolUnsupportedError(
            Phrase("Nothing to share: in this conversation your file and memory tools already "
                   "work on the requester's own folder and memory."),
            "Use fs_read or memory_fetch directly.")
    return ctx.audience


def _private(ctx: CallContext) -> CallContext:
    """The call as it would run in the requester's own folder."""
    assert ctx.private_workspace is not None
    return dataclasses.replace(ctx, workspace=ctx.private_workspace)


def _source(ctx: CallContext, path: str, previewing: bool = False) -> Any:
    private = _private(ctx)
    real = resolve_in_workspace(private, path, must_exist=True, for_write=False,
                                previewing=previewing)
    if is_secret_file(private, path, real):
        raise ToolPermissionError(Phrase("{path} is a secret file; it is never shared with a group.",
                                         path=display_path(private, real)),
                                  "Tell the user it cannot be shared.")
    return real


async def _memories(ctx: CallContext, query: str) -> list[Any]:
    _audience(ctx)
    return await ctx.ports.memory.search(ctx.sender, search_words(query), MAX_MEMORIES)


def build() -> SharePrivate:
    return SharePrivate()
