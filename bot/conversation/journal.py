"""Sessions and their history in the store.

Reads come from a bounded cache of what this process wrote (bot.conversation.history_cache), else from the
store. Every history write goes through `append`/`replace` inside a store transaction, and the
cache follows what was written: it takes the messages when the transaction commits and drops
the session when it rolls back, so no caller keeps it in step by hand. Each step's messages, the
audit/receipt/undo rows of its tool calls, and its token usage and cost go to the store in one
transaction (`write`); the spend ledger's running totals follow once it commits.
Processes sharing a PostgreSQL store tell each other which sessions' histories they wrote
(bot.store.pg_invalidation): the others forget their copy.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from bot.approvals.receipts import Receipts
from bot.approvals.undo import UndoLog
from bot.conversation import turns
from bot.conversation.history_cache import HistoryCache
from bot.conversation.members import author
from bot.core.events import valid_text
from bot.money.spend import SpendLedger
from bot.store.audit import AuditEntry, write_audit
from bot.store.protocol import Store, Transaction

Messages = list[dict[str, Any]]

HISTORY = "history"       # invalidation topic: a session's messages changed (key: session id)
ACTIVE = "active_session"  # a chat's active session changed (key: `active_key(owner, chat)`)
# `sender`: the person whose words a row holds (bot.conversation.members marks them in a shared session).
APPEND_SQL = ("INSERT INTO messages(session_id, role, content, created_at, sender)"
              " VALUES (?, ?, ?, ?, ?)")


def encode_contents(messages: Messages) -> list[str]:
    """Each message's content as stored (JSON text); its length is the cache's size unit."""
    return [valid_text(json.dumps(m["content"], ensure_ascii=False)) for m in messages]


def active_key(owner: str, chat: str) -> str:
    return f"{owner}\x1f{chat}"



@dataclass(frozen=True)
class ExecutedCall:
    """A call that ran successfully: its receipt (and undo entry, when `revertible`)."""

    session_id: str
    sender: str
    tool: str
    args: dict[str, Any]
    result: Any
    approver: str | None
    started_at: float
    finished_at: float
    revertible: bool


Record = AuditEntry | ExecutedCall


class Step(Protocol):
    """The turn a step of history belongs to (`bot.runtime.dispatch.Turn`)."""

    session_id: str
    sender: str
    turn_id: str | None

    def take_records(self) -> list[Record]: ...


class Journal:
    def __init__(self, store: Store, *, receipts: Receipts | None = None,
                 undo: UndoLog | None = None, cache: HistoryCache | None = None,
                 ledger: SpendLedger | None = None):
        self.store = store
        self.receipts = receipts
        self.undo = undo
        self.ledger = ledger or SpendLedger(store, None)  # without prices: rows carry no cost
        self.cache = cache or HistoryCache()
        store.subscribe(HISTORY, self.cache.forget)

    # --- sessions ----------------------------------------------------------------------------

    async def active_session(self, owner: str, chat: str, channel: str) -> str:
        row = await self.store.fetchone(
            "SELECT id FROM sessions WHERE sender = ? AND chat = ? AND active = 1", (owner, chat))
        if row is not None:
            return row["id"]
        return await self.new_session(owner, chat, channel)

    async def new_session(self, owner: str, chat: str, channel: str) -> str:
        session_id = secrets.token_hex(8)
        now = time.time()
        # Concurrent-safe: the chat's lock runs its new sessions one after the other, so the
        # last one is the only one left active, as when every transaction ran alone.
        async with self.store.transaction(serial=False,
                                          lock=[ACTIVE + "\x1f" + active_key(owner, chat)]) as tx:
            await tx.execute("UPDATE sessions SET active = 0 WHERE sender = ? AND chat = ?",
                             (owner, chat))
            await tx.execute(
                "INSERT INTO sessions(id, sender, chat, channel, active, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, 1, ?, ?)", (session_id, owner, chat, channel, now, now))
            tx.invalidate(ACTIVE, active_key(owner, chat))
        return session_id

    async def session_info(self, session_id: str) -> dict[str, Any] | None:
        row = await self.store.fetchone("SELECT * FROM sessions WHERE id = ?", (session_id,))
        return dict(row) if row else None

    # --- history -----------------------------------------------------------------------------

    async def history(self, session_id: str) -> tuple[Messages, int, bool]:
        """The stored history and its size; True when it came from the cache of what this
        process wrote (else it was read from the store)."""
        cached = self.cache.get(session_id)
        if cached is not None:
            return *cached, True
        generation = self.cache.generation
        stored, size = await self.stored(session_id)
        self.cache.put(session_id, stored, size, generation)
        return stored, size, False

    def holds_attachments(self, session_id: str) -> bool:
        """Whether the session's history may hold an attachment reference (True unless its
        cached copy is known to have none)."""
        return self.cache.holds_attachments(session_id) is not False

    async def stored(self, session_id: str) -> tuple[Messages, int]:
        """The history as the store has it, and the length of its stored JSON (a cheap size
        for the token budget)."""
        rows = await self.store.fetchall(
            "SELECT role, content FROM messages WHERE session_id = ? ORDER BY id", (session_id,))
        size = sum(len(r["content"]) for r in rows)
        return [{"role": r["role"], "content": json.loads(r["content"])} for r in rows], size

    async def append(self, tx: Transaction, session_id: str, messages: Messages,
                     encoded: list[str] | None = None) -> None:
        """Append messages inside `tx` (`encoded`: their contents already encoded)."""
        if not messages:
            return
        texts = encoded if encoded is not None else encode_contents(messages)
        now = time.time()
        for message, text in zip(messages, texts, strict=True):   # ids in this order
            await tx.defer(APPEND_SQL, (session_id, message["role"], text, now, author(message)))
        added = sum(map(len, texts))
        tx.on_commit(lambda: self.cache.extend(session_id, messages, added))
        tx.on_rollback(lambda: self.cache.drop(session_id))
        tx.invalidate(HISTORY, session_id)

    async def replace(self, session_id: str, messages: Messages) -> None:
        """Rewrite a session's history (after repair or compaction) atomically."""
        async with self.store.transaction() as tx:
            await tx.execute("DELETE FROM messages WHERE session_id = ?", (session_id,))
            tx.invalidate(HISTORY, session_id)
            await self.append(tx, session_id, messages)
            tx.on_commit(lambda: self.cache.drop(session_id))  # the next read loads it whole

    async def write(self, turn: Step, new: Messages, response: Any = None,
                    state: str | None = None) -> None:
        """Store one step: its messages, the rows its tool calls left on the turn, its usage,
        and the turn's new state when it changes."""
        # Concurrent-safe: inserts and a compare-and-set of the turn's state by id; the
        # session's lock keeps its messages' ids in commit order (the history is read by id,
        # the cache extended at commit), and receipt ids come from a counter row whose lock is
        # held to the commit.
        async with self.session_transaction(turn.session_id) as tx:
            await self.write_in(tx, turn, new, response, state)

    @asynccontextmanager
    async def session_transaction(self, session_id: str) -> AsyncIterator[Transaction]:
        """A write transaction that runs beside other sessions' (on PostgreSQL) and after any
        other of this session: for writes that touch one session's rows only (by session id,
        or by id with a compare-and-set)."""
        async with self.store.transaction(serial=False,
                                          lock=[HISTORY + "\x1f" + session_id]) as tx:
            yield tx

    async def write_in(self, tx: Transaction, turn: Step, new: Messages, response: Any = None,
                       state: str | None = None) -> None:
        """`write` inside the caller's transaction (with what else must commit with it)."""
        records = turn.take_records()
        await self.append(tx, turn.session_id, new)
        if state is not None and turn.turn_id is not None:
            await turns.set_state(tx, turn.turn_id, state)
        for record in records:
            await self._write_record(tx, record)
        usage = response.usage if response is not None else None
        if usage:
            await self.ledger.add(tx, session_id=turn.session_id, sender=turn.sender,
                                  model=response.model, usage=usage)

    async def _write_record(self, tx: Transaction, record: Record) -> None:
        if isinstance(record, AuditEntry):
            await write_audit(tx, record)
            return
        if self.receipts is not None:
            await self.receipts.issue(
                tx, session_id=record.session_id, tool=record.tool, args=record.args,
                result=record.result if isinstance(record.result, dict) else {"value": record.result},
                sender=record.sender, approver=record.approver, started_at=record.started_at,
                finished_at=record.finished_at)
        if record.revertible and self.undo is not None:
            await self.undo.record(tx, session_id=record.session_id, sender=record.sender,
                                   tool=record.tool, args=record.args, result=record.result)
