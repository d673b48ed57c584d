"""Long-term memory: the owner of the `memories` table (FTS5 on SQLite, a tsvector on
PostgreSQL). It implements the memory port tools use (`bot.core.ports.MemoryPort`).

Search terms are words the caller already cut out of the model's query; each is quoted as a
literal here, so no search syntax (`NEAR(`, `"`, `*`, `AND`, `!`) from user text can raise or
change the meaning of the search.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from bot.core.identity import Sender
from bot.core.ports import Memory
from bot.store.protocol import Store

_PREFIX_MIN_CHARS = 3  # shorter words as prefixes would match almost everything

_FTS5_SQL = """
SELECT m.id, m.text, m.created_at, bm25(memories_fts) AS score
FROM memories_fts JOIN memories AS m ON m.id = memories_fts.rowid
WHERE memories_fts MATCH ? AND m.sender = ?
ORDER BY score, m.id DESC
LIMIT ?
"""
# The 'simple' configuration, as the index (bot/store/pg_dialect.py): no stemming, no stop words.
_TSQUERY_SQL = """
SELECT m.id, m.text, m.created_at, ts_rank(m.search, q) AS score
FROM memories AS m, to_tsquery('simple', ?) AS q
WHERE m.search @@ q AND m.sender = ?
ORDER BY score DESC, m.id DESC
LIMIT ?
"""


class Memories:
    def __init__(self, store: Store, clock: Callable[[], float] = time.time):
        self.store = store
        self.clock = clock

    async def remember(self, owner: Sender, text: str) -> int | None:
        async with self.store.transaction() as tx:
            row = await tx.fetchone(
                "INSERT INTO memories(sender, text, created_at) VALUES (?, ?, ?) RETURNING id",
                (str(owner), text, self.clock()))
        return row["id"] if row else None

    async def forget(self, owner: Sender, memory_id: int) -> bool:
        """Only the owner's own memory: nobody can delete someone else's."""
        async with self.store.transaction() as tx:
            deleted = await tx.execute("DELETE FROM memories WHERE id = ? AND sender = ?",
                                       (memory_id, str(owner)))
        return bool(deleted)

    async def search(self, owner: Sender, words: list[str], limit: int) -> list[Memory]:
        if self.store.dialect == "postgresql":
            sql, match = _TSQUERY_SQL, tsquery(words)
        else:
            sql, match = _FTS5_SQL, fts_query(words)
        rows = await self.store.fetchall(sql, (match, str(owner), limit))
        return [Memory(row["id"], row["text"], row["created_at"]) for row in rows]


def fts_query(words: list[str]) -> str:
    """A safe FTS5 MATCH expression: every word quoted, longer words also as prefixes, OR-ed."""
    # \w+ never contains a double quote, so wrapping in quotes always yields a literal term.
    return " OR ".join(f'"{w}"*' if len(w) >= _PREFIX_MIN_CHARS else f'"{w}"' for w in words)


def tsquery(words: list[str]) -> str:
    """The same search as a PostgreSQL tsquery: quoted lexemes, longer ones as prefixes, OR-ed."""
    # \w+ never contains a quote or an operator (& | ! : * < >), so each term stays a literal.
    return " | ".join(f"'{w}':*" if len(w) >= _PREFIX_MIN_CHARS else f"'{w}'" for w in words)
