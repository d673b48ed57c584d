"""A bounded in-memory copy of recent sessions' histories, so a turn reads nothing from SQLite.

The store stays the source of truth: the cache only ever holds what this process itself wrote
(bot.conversation.journal feeds it from each committed history write, and drops the session when a write rolls
back), it is filled from the store on a miss. A write that leaves the history out of the API's
shape (two user messages in a row, tool calls followed by something other than their results)
drops the session too: the next read loads it from the store, where it is repaired in full.
Bounded by the total size of the cached histories, least recently used first out.

Each entry also knows whether its history holds an attachment reference (a photo or document
the model is shown or told about): a cached history is asked that before every model call, so
it is worked out once when the history is cached and then only for the messages appended.

Another process sharing a PostgreSQL store may write a session too: its notification `forget`s
the session here. `generation` counts those, so a fill that read the store while one arrived
is not kept (it may hold what was there before the other write).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from bot.media.attachments import holds_reference

Messages = list[dict[str, Any]]


class HistoryCache:
    def __init__(self, max_chars: int = 32_000_000):
        self.max_chars = max_chars
        # session id -> (its messages, their stored size, whether any is an attachment reference)
        self._entries: OrderedDict[str, tuple[Messages, int, bool]] = OrderedDict()
        self._chars = 0
        self.generation = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, session_id: str) -> tuple[Messages, int] | None:
        entry = self._entries.get(session_id)
        if entry is not None:
            self._entries.move_to_end(session_id)
            return list(entry[0]), entry[1]
        return None

    def holds_attachments(self, session_id: str) -> bool | None:
        """Whether the cached history has an attachment reference (None: not cached)."""
        entry = self._entries.get(session_id)
        return None if entry is None else entry[2]

    def put(self, session_id: str, messages: Messages, size: int,
            generation: int | None = None) -> None:
        """Cache a history read from the store; not kept when another process wrote since
        `generation` (the value when the read began)."""
        self.drop(session_id)
        if generation is not None and generation != self.generation:
            return
        self._entries[session_id] = (list(messages), size, holds_reference(messages))
        self._chars += size
        self._evict()

    def _evict(self) -> None:
        while self._chars > self.max_chars and len(self._entries) > 1:
            _, (_, dropped, _) = self._entries.popitem(last=False)
            self._chars -= dropped

    def extend(self, session_id: str, new: Messages, added_chars: int | None = None) -> None:
        """Record messages appended to a session (no-op when the session is not cached).
        `added_chars`: their stored size, when the caller has already encoded them."""
        entry = self._entries.get(session_id)
        if entry is None or not new:
            return
        if entry[0] and not _may_follow(entry[0][-1], new[0]):
            self.drop(session_id)
            return
        if added_chars is None:
            added_chars = sum(len(json.dumps(m["content"], ensure_ascii=False)) for m in new)
        messages, size, attachments = entry
        messages.extend(new)  # in place: the cache owns this list (get() hands out copies)
        self._entries[session_id] = (messages, size + added_chars,
                                     attachments or holds_reference(new))
        self._entries.move_to_end(session_id)
        self._chars += added_chars
        self._evict()

    def forget(self, session_id: str | None) -> None:
        """Another process wrote `session_id` (None: any session may have changed)."""
        self.generation += 1
        if session_id is None:
            self._entries.clear()
            self._chars = 0
        else:
            self.drop(session_id)

    def drop(self, session_id: str) -> None:
        entry = self._entries.pop(session_id, None)
        if entry is not None:
            self._chars -= entry[1]


def _may_follow(last: dict[str, Any], first: dict[str, Any]) -> bool:
    """Can `first` come right after `last` in the API's shape?"""
    if last.get("role") == first.get("role"):
        return False
    calls = {b.get("id") for b in _blocks(last) if b.get("type") == "tool_use"}
    if not calls:
        return True
    answered = {b.get("tool_use_id") for b in _blocks(first) if b.get("type") == "tool_result"}
    return calls <= answered


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
