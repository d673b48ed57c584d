"""Writes a test makes to set the scene (tamper with a row, age a code), through the one write
path like any other write."""

from __future__ import annotations

from typing import Any

from bot.conversation.journal import Journal
from bot.store.audit import AuditEntry, write_audit
from bot.store.sqlite import Store


async def execute(store: Store, sql: str, params: Any = ()) -> int:
    async with store.transaction() as tx:
        return await tx.execute(sql, params)


async def audit(store: Store, **fields: Any) -> None:
    async with store.transaction() as tx:
        await write_audit(tx, AuditEntry(**fields))


async def append(store: Store, session_id: str, messages: list[dict[str, Any]]) -> None:
    """Messages written straight to the store (as another process, or a crash, would leave)."""
    journal = Journal(store)
    async with store.transaction() as tx:
        await journal.append(tx, session_id, messages)
