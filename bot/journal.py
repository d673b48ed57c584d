"""A session's history in the store.

Reads come from a bounded cache of what this process wrote (bot.history_cache), else from the
store. Each step's messages, the audit/receipt/undo rows its tool calls queued, and its token
usage go to SQLite in one transaction (`Store.run`: a WAL commit on the event loop, no thread
hand-off).
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from bot.dispatch import Turn
from bot.history_cache import HistoryCache
from bot.store import Store, append_rows, encode_contents

Messages = list[dict[str, Any]]

USAGE_SQL = ("INSERT INTO usage(ts, session_id, sender, model, input_tokens, output_tokens,"
             " cache_read_tokens, cache_write_tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")


class Journal:
    def __init__(self, store: Store, cache: HistoryCache | None = None):
        self.store = store
        self.cache = cache or HistoryCache()

    async def history(self, session_id: str) -> tuple[Messages, int, bool]:
        """The stored history and its size; True when it came from the cache of what this
        process wrote (else it was read from the store)."""
        cached = self.cache.get(session_id)
        if cached is not None:
            return *cached, True
        stored, size = await self.store.load_history_sized(session_id)
        self.cache.put(session_id, stored, size)
        return stored, size, False

    async def replace(self, session_id: str, messages: Messages) -> None:
        """Rewrite a session's history (after repair or compaction)."""
        self.cache.drop(session_id)
        await self.store.replace_history(session_id, messages)

    def forget(self, session_id: str) -> None:
        """Drop the cached copy; the next read comes from the store."""
        self.cache.drop(session_id)

    def appended(self, session_id: str, new: Messages) -> None:
        """Note messages written to the store outside the journal (in a caller's transaction)."""
        self.cache.extend(session_id, new)

    async def write(self, turn: Turn, new: Messages, response: Any = None) -> None:
        """Store one step: its messages, the rows its tool calls queued, its token usage."""
        writes = turn.writes[:]
        turn.writes.clear()
        encoded = encode_contents(new)  # once, for the store and the cache's size
        self.cache.extend(turn.session_id, new, sum(map(len, encoded)))
        try:
            await self._persist(turn, new, encoded, response, writes)
        except BaseException:
            self.cache.drop(turn.session_id)  # the store is the truth: reload next time
            raise

    async def _persist(self, turn: Turn, new: Messages, encoded: list[str], response: Any,
                       writes: list[Any]) -> None:
        usage = response.usage if response is not None else None

        def work(conn: sqlite3.Connection) -> None:
            append_rows(conn, turn.session_id, new, encoded)
            for write in writes:
                write(conn)
            if usage:
                conn.execute(USAGE_SQL, (
                    time.time(), turn.session_id, turn.sender, response.model,
                    usage.get("input_tokens", 0), usage.get("output_tokens", 0),
                    usage.get("cache_read_tokens", 0), usage.get("cache_write_tokens", 0)))
        await self.store.run(work)
