"""memory_fetch: search this sender's long-term memories (SQLite: FTS5 ranked by bm25;
PostgreSQL: a tsvector column ranked by ts_rank).

The model's query is never handed to the search engine as syntax: it is cut into words, each
word quoted as a literal term, and the terms OR-ed, so `NEAR(`, `"`, `*`, `&`, `!` or `AND` in
user text cannot raise or change the meaning of the search.

Memories come back wrapped as untrusted data: memory_store is medium risk, so at full autonomy
it runs without anyone seeing the text, and the model may have been steered into storing it by
a web page or a file. Unwrapped, such a "memory" would be a standing instruction in every later
conversation of the sender.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from bot.core.tool import BaseTool, CallContext, ToolInvalidArgsError, ToolMeta
from bot.language.phrase import Phrase

DEFAULT_LIMIT = 5
MAX_LIMIT = 50
MAX_TERMS = 32
_WORD = re.compile(r"\w+", re.UNICODE)

class MemoryFetch(BaseTool):
    meta = ToolMeta(
        name="memory_fetch",
        description=(
            "Search what you were asked to remember about this user (stored with memory_store). "
            "`query` is plain words, e.g. 'wife birthday'; the best matches come first."
        ),
        schema={
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": 500,
                          "description": "Words to look for"},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT,
                          "default": DEFAULT_LIMIT},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        has_side_effects=False,
        risk="low",
        returns_untrusted=True,
        idempotent=True,
        supports_dry_run=True,
        capability_required="memory:read",
        egress=False,   # local: the caller's own memory
    )

    async def execute(self, ctx: CallContext, query: str, limit: int = DEFAULT_LIMIT,
                      **_: Any) -> dict[str, Any]:
        found = await ctx.ports.memory.search(ctx.memory_scope, search_words(query), limit)
        memories = [
            {"id": m.id, "text": m.text,
             "stored_at": datetime.fromtimestamp(m.created_at, UTC).isoformat(timespec="seconds")}
            for m in found
        ]
        result: dict[str, Any] = {"query": query, "memories": memories, "count": len(memories)}
        if not memories:
            result["note"] = ("No stored memory matches. Try other or fewer words, or ask the "
                              "user directly.")
        return result


def search_words(query: str) -> list[str]:
    words = list(dict.fromkeys(word.lower() for word in _WORD.findall(query)))[:MAX_TERMS]
    if not words:
        raise ToolInvalidArgsError(
            Phrase("The query {query} has no words to search for.", query=repr(query)),
            "Search with plain words, e.g. 'birthday' or 'favourite restaurant'.",
        )
    return words


def build() -> MemoryFetch:
    return MemoryFetch()
