"""memory_store: remember a fact for this sender (long-term memory, FTS5-indexed).

Medium risk: at supervised autonomy every write is previewed (the preview shows the text) and
approved; at full autonomy it runs unasked, which is why memory_fetch returns memories wrapped
as untrusted data rather than as instructions.
"""

from __future__ import annotations

import time
from typing import Any

from bot.core.tool import (
    BaseTool,
    CallContext,
    ToolInvalidArgsError,
    ToolMeta,
    ToolUnsupportedError,
    UnrevertibleError,
)

MAX_TEXT_CHARS = 4000


class MemoryStore(BaseTool):
    meta = ToolMeta(
        name="memory_store",
        description=(
            "Remember one fact or preference about the user for future conversations (e.g. "
            "'Prefers answers in Italian'). Write it as a self-contained sentence; it can be "
            "found again with memory_fetch."
        ),
        schema={
            "type": "object",
            "properties": {
                "text": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT_CHARS,
                         "description": "The fact to remember, as a complete sentence"},
            },
            "required": ["text"],
            "additionalProperties": False,
        },
        has_side_effects=True,
        risk="medium",
        returns_untrusted=False,
        idempotent=False,
        supports_dry_run=True,
        capability_required="memory:write",
    )

    async def dry_run(self, ctx: CallContext, text: str, **_: Any) -> dict[str, Any]:
        return {"would_store": _clean(text), "summary": f"Remember: {_clean(text)}"}

    async def execute(self, ctx: CallContext, text: str, **_: Any) -> dict[str, Any]:
        store = require_store(ctx)
        cleaned = _clean(text)
        async with store.transaction() as tx:
            row = await tx.fetchone(
                "INSERT INTO memories(sender, text, created_at) VALUES (?, ?, ?) RETURNING id",
                (ctx.sender, cleaned, time.time()),
            )
            memory_id = row["id"] if row else None
        return {"id": memory_id, "stored": cleaned}

    async def revert(self, ctx: CallContext, args: dict[str, Any], result: dict[str, Any]) -> dict:
        memory_id = result.get("id")
        if not isinstance(memory_id, int):
            raise UnrevertibleError("This result carries no memory id to delete.")
        # Only the sender's own memory: an undo can never delete someone else's.
        async with require_store(ctx).transaction() as tx:
            deleted = await tx.execute(
                "DELETE FROM memories WHERE id = ? AND sender = ?", (memory_id, ctx.sender))
        if not deleted:
            raise UnrevertibleError(f"Memory {memory_id} is already gone.",
                                    "Nothing to undo; tell the user it was already forgotten.")
        return {"id": memory_id, "deleted": True}


def require_store(ctx: CallContext) -> Any:
    store = getattr(ctx.services, "store", None)
    if store is None:
        raise ToolUnsupportedError("Long-term memory is not available (no store is configured).",
                                   "Answer from the conversation alone.")
    return store


def _clean(text: str) -> str:
    cleaned = text.strip()
    if not cleaned:
        raise ToolInvalidArgsError("The text to remember is empty.",
                                   "Pass the fact to remember as a complete sentence.")
    return cleaned


def build() -> MemoryStore:
    return MemoryStore()
