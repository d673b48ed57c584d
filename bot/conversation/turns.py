"""Turn state in the store: what each turn was doing, so a restarted process knows what to finish.

    running ──▶ waiting (an approval is asked) ──▶ running ──▶ answered ──▶ delivered
       └──▶ failed (the model call failed; the user was told) | stopped (/stop, shutdown)
            | superseded (a newer message arrived) | expired (approvals lapsed)
    answered (a report of calls in doubt, after a restart) ──▶ in_doubt

A turn's row is written in the transactions the turn writes anyway (its user message, its
steps, its final answer), plus one small write once its answer was handed to the channel
(delivered): until then a restart sends the stored answer again. Each row
names the replica that runs it and the run of that replica (its incarnation): at start-up a
process recovers the unfinished turns of earlier runs of its own replica name, never another
live replica's; a turn whose inbox row comes back (its lease lapsed) is taken over by whoever
gets the row.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass

from bot.store.protocol import Row, Store, Transaction

RUNNING = "running"
WAITING = "waiting"
ANSWERED = "answered"     # the answer (or an in-doubt report) is stored; not yet known shown
DELIVERED = "delivered"
FAILED = "failed"
STOPPED = "stopped"
SUPERSEDED = "superseded"
EXPIRED = "expired"
IN_DOUBT = "in_doubt"     # a call's outcome is unknown; the report of it was shown
OPEN_STATES = (RUNNING, WAITING)
UNFINISHED_STATES = (*OPEN_STATES, ANSWERED)


def new_turn_id() -> str:
    return secrets.token_hex(8)


@dataclass(frozen=True)
class TurnRow:
    id: str
    session_id: str
    sender: str
    chat: str
    channel: str
    level: str
    allowlist: frozenset[str] | None
    inbox_id: int | None
    state: str
    owner: str
    incarnation: str
    created_at: float
    audience: str = ""   # who else reads the conversation ("" = the sender alone)
    model: str = ""      # the model a scheduled run named ("" = the configured choice)


def _from_row(row: Row) -> TurnRow:
    allowlist = row["allowlist"]
    return TurnRow(row["id"], row["session_id"], row["sender"], row["chat"], row["channel"],
                   row["level"], None if allowlist is None else frozenset(json.loads(allowlist)),
                   row["inbox_id"], row["state"], row["owner"], row["incarnation"],
                   row["created_at"], row["audience"] or "", row["model"] or "")


async def begin(tx: Transaction, *, turn_id: str, session_id: str, sender: str, chat: str, channel: str,
                level: str, allowlist: frozenset[str] | None, inbox_id: int | None,
                owner: str, incarnation: str, audience: str = "", model: str = "") -> None:
    """A new turn, running, written with its user message. An earlier turn of the session still
    open ends here: the new message supersedes it (its message was answered or reported)."""
    now = time.time()
    await tx.defer("UPDATE turns SET state = ?, updated_at = ? WHERE session_id = ?"
                   " AND state IN (?, ?, ?)", (SUPERSEDED, now, session_id, *UNFINISHED_STATES))
    await tx.defer(
        "INSERT INTO turns(id, session_id, sender, chat, channel, level, allowlist, inbox_id,"
        " state, owner, incarnation, created_at, updated_at, audience, model)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (turn_id, session_id, sender, chat, channel, str(level),
         None if allowlist is None else json.dumps(sorted(allowlist)), inbox_id, RUNNING, owner,
         incarnation, now, now, audience, model))


async def set_state(tx: Transaction, turn_id: str, state: str, *,
                    only_from: tuple[str, ...] = ()) -> None:
    """Move a turn to `state` (only from one of `only_from`, when given), with the transaction's
    other statements (nothing waits for its answer)."""
    await tx.defer(*_state_sql(turn_id, state, only_from))


def _state_sql(turn_id: str, state: str, only_from: tuple[str, ...]) -> tuple[str, list[object]]:
    sql, params = "UPDATE turns SET state = ?, updated_at = ? WHERE id = ?", [state, time.time(),
                                                                             turn_id]
    if only_from:
        sql += f" AND state IN ({', '.join('?' * len(only_from))})"
        params += list(only_from)
    return sql, params


async def set_state_now(store: Store, turn_id: str, state: str,
                        only_from: tuple[str, ...] = OPEN_STATES) -> None:
    """`set_state` in a transaction of its own (on PostgreSQL one round trip)."""
    # One compare-and-set UPDATE by id: safe beside other writers.
    async with store.transaction(serial=False) as tx:
        await set_state(tx, turn_id, state, only_from=only_from)


async def get(store: Store, turn_id: str) -> TurnRow | None:
    row = await store.fetchone("SELECT * FROM turns WHERE id = ?", (turn_id,))
    return _from_row(row) if row else None


async def for_inbox(store: Store, inbox_id: int) -> TurnRow | None:
    """The turn an inbox row already started, if any (a re-delivered row must not start another)."""
    row = await store.fetchone("SELECT * FROM turns WHERE inbox_id = ?", (inbox_id,))
    return _from_row(row) if row else None


async def open_in_session(store: Store, session_id: str) -> TurnRow | None:
    """The session's open turn (at most one: a session runs one turn at a time)."""
    row = await store.fetchone(
        "SELECT * FROM turns WHERE session_id = ? AND state IN (?, ?)"
        " ORDER BY created_at DESC LIMIT 1", (session_id, *OPEN_STATES))
    return _from_row(row) if row else None


async def unfinished(store: Store, owner: str, incarnation: str) -> list[TurnRow]:
    """Turns of replica `owner` left unfinished (running, waiting, or answered but not shown) by
    an earlier run of it, oldest first."""
    rows = await store.fetchall(
        "SELECT * FROM turns WHERE owner = ? AND incarnation != ? AND state IN (?, ?, ?)"
        " ORDER BY created_at", (owner, incarnation, *UNFINISHED_STATES))
    return [_from_row(row) for row in rows]


async def take_over(store: Store, row: TurnRow, owner: str, incarnation: str) -> bool:
    """Make this run the turn's owner (a compare-and-set: one process recovers a turn)."""
    async with store.transaction() as tx:
        return await tx.execute(
            "UPDATE turns SET owner = ?, incarnation = ?, updated_at = ? WHERE id = ?"
            " AND owner = ? AND incarnation = ?",
            (owner, incarnation, time.time(), row.id, row.owner, row.incarnation)) == 1
