"""memory_store: remember a fact for this sender (long-term memory, FTS5-indexed).

Medium risk: at supervised autonomy every write is previewed (the preview shows the text) and
approved; at full autonomy it runs unasked, which is why memory_fetch returns memories wrapped
as untrusted data rather than as instructions.
"""

from __future__ import annotations

from typing import Any

from bot.core.tool import (
    BaseTool,
    CallContext,
    ToolInvalidArgsError,
    ToolMeta,
    UnrevertibleError,
)
from bot.language.phrase import Phrase

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
        egress=False,   # local: the caller's own memory
    )

    async def dry_run(self, ctx: CallContext, text: str, **_: Any) -> dict[str, Any]:
        return {"would_store": _clean(text), "summary": Phrase("Remember: {text}", text=_clean(text))}

    async def execute(self, ctx: CallContext, text: str, **_: Any) -> dict[str, Any]:
        cleaned = _clean(text)
        return {"id": await ctx.ports.memory.remember(ctx.memory_scope, cleaned), "stored": cleaned}

    async def revert(self, ctx: CallContext, args: dict[str, Any], result: dict[str, Any]) -> dict:
        memory_id = result.get("id")
        if not isinstance(memory_id, int):
            raise UnrevertibleError(Phrase("This result carries no memory id to delete."))
        if not await ctx.ports.memory.forget(ctx.memory_scope, memory_id):
            raise UnrevertibleError(Phrase("Memory {id} is already gone.", id=memory_id),
                                    "Nothing to undo; tell the user it was already forgotten.")
        return {"id": memory_id, "deleted": True}


def _clean(text: str) -> str:
    cleaned = text.strip()
    if not cleaned:
        raise ToolInvalidArgsError(Phrase("The text to remember is empty."),
                                   "Pass the fact to remember as a complete sentence.")
    return cleaned


def build() -> MemoryStore:
    return MemoryStore()
