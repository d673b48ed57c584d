"""The undo log: `/undo` reverts the last revertible execution of a session.

The runtime records every successful call of a tool that has a `revert` method (inside the same
transaction as its receipt, when it has one). `undo_last` hands the newest entry that has not been
reverted yet back to the tool's `revert(ctx, args, result)`; only a successful revert marks the
entry, and every attempt is audited (decision 'undo'). Its answers are Phrases: each person
reads them in their language (the tool's name and what it changed are shown as they are).
"""

from __future__ import annotations

import asyncio
import json
import time
import weakref
from typing import Any

from bot.core.tool import CallContext, ToolException, args_hash
from bot.language.phrase import Phrase
from bot.store.audit import AuditEntry, write_audit
from bot.store.protocol import Store, Transaction
from bot.toolbox.failures import to_tool_error
from bot.toolbox.registry import Registry

NOTHING_TO_UNDO = Phrase("Nothing to undo in this conversation.")
# Args whose value names the thing that was changed, in order of preference, for the reply.
_LABEL_KEYS = ("path", "file", "name", "target", "url", "id", "key")
_LABEL_MAX = 80


class UndoLog:
    def __init__(self, store: Store):
        self.store = store
        # One lock per session while an undo runs there, so two quick /undo taps cannot revert
        # the same entry twice; entries vanish as soon as nobody holds them.
        self._session_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary())

    @staticmethod
    async def record(tx: Transaction, *, session_id: str, sender: str, tool: str, args: dict[str, Any],
                     result: Any) -> None:
        """Remember a successful call of a revertible tool, inside the caller's transaction."""
        await tx.defer(_RECORD_SQL, _row(session_id, sender, tool, args, result))

    async def undo_last(self, session_id: str, registry: Registry, ctx: CallContext) -> Phrase:
        """Revert the newest not-yet-reverted entry of the session; a sentence for the user."""
        lock = self._session_locks.get(session_id)
        if lock is None:
            lock = self._session_locks[session_id] = asyncio.Lock()
        async with lock:
            return await self._undo_last_locked(session_id, registry, ctx)

    async def _undo_last_locked(self, session_id: str, registry: Registry,
                                ctx: CallContext) -> Phrase:
        # Only the sender's own changes: in a chat-wide session a member cannot undo another's.
        row = await self.store.fetchone(
            "SELECT id, tool, args, result FROM undo_log WHERE session_id = ? AND sender = ?"
            " AND reverted_at IS NULL ORDER BY id DESC LIMIT 1", (session_id, str(ctx.sender)))
        if row is None:
            return NOTHING_TO_UNDO
        name, args, result = row["tool"], json.loads(row["args"]), json.loads(row["result"])
        tool = registry.get(name)
        revert = getattr(tool, "revert", None)
        if not callable(revert):
            return await self._refused(session_id, ctx, name, args,
                                       Phrase("the tool is no longer available."))
        try:
            await revert(ctx, args, result)
        except ToolException as exc:  # UnrevertibleError included: the tool says why
            return await self._refused(session_id, ctx, name, args, exc.message)
        except Exception as exc:  # a bug in the tool: traceback logged by to_tool_error
            error = to_tool_error(exc, name)
            return await self._refused(session_id, ctx, name, args, error.message)
        async with self.store.transaction() as tx:
            await tx.execute("UPDATE undo_log SET reverted_at = ? WHERE id = ? AND reverted_at IS NULL",
                             (time.time(), row["id"]))
            await write_audit(tx, AuditEntry(sender=str(ctx.sender), decision="undo", outcome="reverted",
                                             session_id=session_id, tool=name,
                                             args_hash=args_hash(args),
                                             detail=f"undo_log {row['id']}"))
        label = _label(args)
        if label:
            return Phrase("Undone: {tool} {what}.", tool=name, what=label)
        return Phrase("Undone: {tool}.", tool=name)

    async def _refused(self, session_id: str, ctx: CallContext, name: str, args: dict[str, Any],
                       reason: str) -> Phrase:
        async with self.store.transaction() as tx:
            await write_audit(tx, AuditEntry(sender=str(ctx.sender), decision="undo", outcome="failed",
                                             session_id=session_id, tool=name,
                                             args_hash=args_hash(args), detail=str(reason)))
        # The reason is the tool's Phrase (an UnrevertibleError's, a failure's), or its text.
        return Phrase("{tool} cannot be undone: {reason}", tool=name, reason=reason)


def _label(args: dict[str, Any]) -> str:
    """What the undone call was about ("notes/a.md"), for the user-facing sentence."""
    for key in _LABEL_KEYS:
        value = args.get(key)
        if isinstance(value, str | int) and str(value).strip():
            text = " ".join(str(value).split())
            return text if len(text) <= _LABEL_MAX else text[:_LABEL_MAX - 1] + "…"
    return ""


_RECORD_SQL = ("INSERT INTO undo_log(session_id, sender, tool, args, result, created_at)"
               " VALUES (?, ?, ?, ?, ?, ?)")


def _row(session_id: str, sender: str, tool: str, args: dict[str, Any], result: Any) -> tuple:
    return (session_id, sender, tool, json.dumps(args, ensure_ascii=False),
            json.dumps(result, ensure_ascii=False, default=str), time.time())
