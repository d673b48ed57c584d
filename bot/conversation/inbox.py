"""The durable inbox: every incoming update is stored before the platform is told it arrived,
and turns are taken from here, in order per conversation, by whichever process claims them.

    rows = await inbox.put("telegram", [Entry(update_key, conversation, payload)])  # then ack
    ran = await inbox.run(row, work)       # claim, keep the lease, run, mark done

- `put` writes the updates in one transaction and returns only the rows it created: an update
  the platform delivers twice (the unique `(channel, update_key)`) is stored and run once. When
  it raises, nothing was stored and the caller must not acknowledge the update.
- A row is `pending`, then `claimed` by one process (`claimed_by`, `lease_until`), then `done`.
  A claim is a compare-and-set in one write transaction: it succeeds only for a row that is
  pending (or whose lease lapsed: its process died) and that is the oldest unfinished row of its
  conversation. So a conversation runs one turn at a time, in arrival order, across processes.
  Rows with an empty conversation (button taps, /stop) skip that order.
- Within one process, rows of a conversation also queue in FIFO order before they try their
  claim, so a long backlog costs one claim per row rather than one per waiter per turn. A row
  whose claim is refused gives its place back before it tries again, so an older row adopted
  from a dead process (`adoptable`) can go first. It tries again when another process
  announces (NOTIFY, bot.store.pg_invalidation) that a row of that conversation was finished or given
  back, or after `retry_seconds` at the latest (a dead process announces nothing).
- The lease is renewed while the work runs. A process killed with SIGKILL leaves its rows
  claimed; `recover` gives them back (at once for this replica's earlier runs, after the lease
  for other processes), oldest first, for the channel to run again.
- A done row drops its payload and is deleted after `keep_done_seconds` (longer than the day
  Telegram keeps re-delivering an unconfirmed update, so a re-delivery is still recognised).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from bot.conversation.arrival import ArrivalOrder
from bot.core.events import valid_text
from bot.core.ports import Adopt, Entry, InboxRow

log = logging.getLogger(__name__)

PRUNE_EVERY = 500   # finished rows between two deletions of expired done rows

_COLUMNS = "id, channel, update_key, conversation, payload, attempts"


@dataclass(frozen=True)
class InboxSettings:
    lease_seconds: float = 30.0
    keep_done_seconds: float = 48 * 3600.0
    retry_seconds: float = 0.5   # how soon a claim blocked by another process is tried again

    @classmethod
    def from_config(cls, table: dict[str, Any]) -> InboxSettings:
        return cls(lease_seconds=float(table["lease_seconds"]),
                   keep_done_seconds=float(table["keep_done_hours"]) * 3600.0)


class Claim(Enum):
    CLAIMED = "claimed"
    DONE = "done"      # already run (by this process or another): nothing to do
    BUSY = "busy"      # an older row of the conversation, or another process, holds it


def replica_name(configured: str, dialect: str, env: dict[str, str] | None = None) -> str:
    """Who claims rows. SQLite serves one process, so every claim found at start-up is an
    earlier run's; on PostgreSQL several processes may share one host, so the default names
    this process only (its claims are taken over once their lease lapses)."""
    named = (env if env is not None else os.environ).get("MYCLAW_REPLICA") or configured
    if named:
        return named
    return "local" if dialect == "sqlite" else f"{socket.gethostname()}:{os.getpid()}"


TOPIC = "inbox"   # a conversation's row finished or was given back (key: the conversation)


@dataclass
class _Slot:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class Inbox:
    def __init__(self, store: Any, replica: str = "local",
                 settings: InboxSettings | None = None,
                 clock: Callable[[], float] = time.time):
        self.store = store
        self.replica = replica
        # This run of the replica: a restarted process tells its earlier run's claims apart.
        self.owner = f"{replica}/{secrets.token_hex(6)}"
        self.settings = settings or InboxSettings()
        self.clock = clock
        self._slots: dict[str, _Slot] = {}
        self._arrivals = ArrivalOrder()   # puts of a conversation, in the order they were called
        self._taken: set[int] = set()   # rows queued or running in this process
        self._closing = False
        self._finished = 0
        # Claims refused because another process is ahead, by conversation: they try again as
        # soon as a row of theirs is finished or given back (a notification from that process),
        # not only after `retry_seconds`.
        self._waiting: dict[str, set[asyncio.Event]] = {}
        store.subscribe(TOPIC, self._moved)

    # --- storing --------------------------------------------------------------------------

    async def put(self, channel: str, entries: list[Entry], *, claim: bool = False
                  ) -> list[InboxRow]:
        """Store `entries` (all or none); the rows created, in arrival order. Duplicates of
        stored updates are left out. Raises StoreError (or the driver's error) on failure.

        With `claim`, each new row is also claimed in the same transaction when it may run at
        once (nothing older unfinished in its conversation): one commit fewer per message,
        which is much of what the inbox costs on PostgreSQL. Such a row must then be `run`."""
        now = self.clock()
        created = []
        conversations = [f"{channel}:{e.conversation}" if e.conversation else "" for e in entries]
        locked = [c for c in conversations if c]
        # Taken before the first await: updates handed to concurrent tasks commit (and so are
        # numbered and run) in the order they arrived, not in the order their writes finish.
        arrived = self._arrivals.place(locked)
        # Concurrent-safe: ON CONFLICT DO NOTHING on (channel, update_key) stores an update
        # once, and the conversation's lock makes its rows' ids follow their commit order, so a
        # claim's "nothing older unfinished" never misses an older row not yet committed.
        async with arrived, self.store.transaction(serial=False, lock=locked) as tx:
            for entry, conversation in zip(entries, conversations, strict=True):
                row = await tx.fetchone(
                    "INSERT INTO inbox(channel, update_key, conversation, payload, state, "
                    "received_at) VALUES (?, ?, ?, ?, 'pending', ?) "
                    "ON CONFLICT (channel, update_key) DO NOTHING RETURNING id",
                    (channel, valid_text(entry.update_key), conversation,
                     valid_text(entry.payload), now))
                if row is not None:
                    row_id = int(row["id"])
                    claimed = claim and await self._claim(tx, row_id, conversation, now)
                    created.append(InboxRow(row_id, channel, entry.update_key, conversation,
                                            entry.payload, int(claimed), claimed))
        return created

    # --- claiming --------------------------------------------------------------------------

    async def claim(self, row: InboxRow) -> Claim:
        """Compare-and-set `row` to claimed by this process (see the module docstring)."""
        now = self.clock()
        # Concurrent-safe: one compare-and-set UPDATE (its row lock settles two claimers), and
        # every older row of the conversation committed before this one (`put` locks it).
        async with self.store.transaction(serial=False) as tx:
            if await self._claim(tx, row.id, row.conversation, now):
                return Claim.CLAIMED
            state = await tx.fetchone("SELECT state FROM inbox WHERE id = ?", (row.id,))
        return Claim.DONE if state is None or state["state"] == "done" else Claim.BUSY

    async def _claim(self, tx: Any, row_id: int, conversation: str, now: float) -> bool:
        return bool(await tx.execute(
            "UPDATE inbox SET state = 'claimed', claimed_by = ?, lease_until = ?, "
            "attempts = attempts + 1 WHERE id = ? AND (state = 'pending' "
            "OR (state = 'claimed' AND lease_until < ?)) AND (conversation = '' OR NOT EXISTS "
            "(SELECT 1 FROM inbox AS older WHERE older.conversation = ? AND older.id < ? "
            "AND older.state <> 'done'))",
            (self.owner, now + self.settings.lease_seconds, row_id, now, conversation, row_id)))

    async def renew(self, row: InboxRow) -> bool:
        """Extend this process's lease on `row`; False when the claim was lost meanwhile."""
        # Concurrent-safe: one compare-and-set UPDATE on claimed_by and state.
        async with self.store.transaction(serial=False) as tx:
            return bool(await tx.execute(
                "UPDATE inbox SET lease_until = ? WHERE id = ? AND claimed_by = ? "
                "AND state = 'claimed'",
                (self.clock() + self.settings.lease_seconds, row.id, self.owner)))

    async def release(self, row: InboxRow) -> None:
        """Give a claimed row back unrun (the process is shutting down): pending again."""
        async with self.store.transaction() as tx:
            await tx.execute("UPDATE inbox SET state = 'pending', claimed_by = NULL, "
                             "lease_until = NULL WHERE id = ? AND claimed_by = ?",
                             (row.id, self.owner))
            self._announce(tx, row)

    async def finish(self, row: InboxRow) -> None:
        """The row's turn ended: done, payload dropped; now and then expired rows deleted."""
        now = self.clock()
        self._finished += 1
        # Concurrent-safe: a compare-and-set UPDATE on claimed_by, and a DELETE of expired done
        # rows that two transactions may both run (the second deletes nothing).
        # Nothing reads its count: on PostgreSQL the BEGIN, the UPDATE and the COMMIT are one
        # round trip.
        async with self.store.transaction(serial=False) as tx:
            await tx.defer("UPDATE inbox SET state = 'done', done_at = ?, payload = '', "
                           "lease_until = NULL WHERE id = ? AND claimed_by = ?",
                           (now, row.id, self.owner))
            if self._finished % PRUNE_EVERY == 0:
                await self._prune(tx, now)
            self._announce(tx, row)

    def _announce(self, tx: Any, row: InboxRow) -> None:
        """The conversation's next row may be claimed once `tx` commits: wake its waiters."""
        if row.conversation:
            tx.invalidate(TOPIC, row.conversation)          # in the other processes
            tx.on_commit(lambda: self._moved(row.conversation))   # and here

    def _moved(self, conversation: str | None) -> None:
        waiting = (self._waiting.get(conversation, set()) if conversation is not None
                   else set().union(*self._waiting.values()))
        for event in waiting:
            event.set()

    async def prune(self) -> int:
        """Delete done rows older than the retention; how many went."""
        async with self.store.transaction() as tx:
            return await self._prune(tx, self.clock())

    async def _prune(self, tx: Any, now: float) -> int:
        return await tx.execute("DELETE FROM inbox WHERE state = 'done' AND done_at < ?",
                                (now - self.settings.keep_done_seconds,))

    # --- running ---------------------------------------------------------------------------

    @property
    def active_conversations(self) -> int:
        """Conversations with a row queued or running here (0 when idle: the map is bounded)."""
        return len(self._slots)

    def stop_claiming(self) -> None:
        """Shutting down: rows not claimed yet stay pending for the next start (`run` returns
        False for them without running anything)."""
        self._closing = True

    async def run(self, row: InboxRow, work: Callable[[], Awaitable[bool | None]],
                  limit: asyncio.Semaphore | None = None) -> bool:
        """Claim `row` (waiting for earlier rows of its conversation), run `work()` holding the
        lease, then mark the row done, or pending again when `work()` returns False (it was
        not started: shutting down). False, without running `work`, when the row was already
        done or the inbox stopped claiming. `limit` is taken once the claim is held (and its
        lease kept), so a queued row never holds a slot.

        A failed `work` still finishes its row: the channel has told the user, and a message
        that fails every time must not be run forever. A cancelled one (shutdown) stays claimed
        for `recover`."""
        self._taken.add(row.id)
        try:
            async with AsyncExitStack() as held:
                if not await self._claimed_in_order(row, held):
                    if row.claimed:   # claimed as stored, then the shutdown came first
                        await self.release(row)
                    return False
                renewal = asyncio.ensure_future(self._keep_lease(row))
                try:
                    if limit is not None:
                        await held.enter_async_context(limit)
                    handled = await work()
                except Exception:
                    await self.finish(row)
                    raise
                finally:
                    renewal.cancel()
                await (self.release(row) if handled is False else self.finish(row))
            return True
        finally:
            self._taken.discard(row.id)

    async def _claimed_in_order(self, row: InboxRow, held: AsyncExitStack) -> bool:
        """Take the conversation's in-process turn, then the claim; until the claim succeeds
        (another process is ahead), give the turn back and try again shortly."""
        held_already = row.claimed
        moved = asyncio.Event()
        waiting = self._waiting.setdefault(row.conversation, set())
        waiting.add(moved)
        try:
            while not self._closing:
                moved.clear()   # before the attempt: a finish announced during it counts
                async with AsyncExitStack() as attempt:
                    if row.conversation:
                        await attempt.enter_async_context(self._slot(row.conversation))
                    if self._closing:
                        return False
                    outcome = Claim.CLAIMED if held_already else await self.claim(row)
                    held_already = False
                    if outcome is Claim.CLAIMED:
                        held.push_async_exit(attempt.pop_all())
                        return True
                if outcome is Claim.DONE:
                    return False
                # A lapsed lease (a dead process) announces nothing: hence the timeout.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(moved.wait(), self.settings.retry_seconds)
            return False
        finally:
            waiting.discard(moved)
            if not waiting:
                self._waiting.pop(row.conversation, None)

    def _slot(self, conversation: str) -> _SlotHold:
        return _SlotHold(self._slots, conversation)

    async def _keep_lease(self, row: InboxRow) -> None:
        while True:
            await asyncio.sleep(self.settings.lease_seconds / 3)
            try:
                renewed = await self.renew(row)
            except Exception:   # the store hiccuped: two more tries before the lease lapses
                log.warning("inbox: could not renew the claim on row %s", row.id, exc_info=True)
                continue
            if not renewed:
                log.warning("inbox: the claim on row %s lapsed while its turn ran", row.id)
                return

    # --- start-up ----------------------------------------------------------------------------

    async def recover(self, channel: str) -> list[InboxRow]:
        """Unfinished rows of `channel` this process may run now, oldest first: pending ones,
        those an earlier run of this replica had claimed (given back at once), and those whose
        lease lapsed. Rows already queued or running here are left out. Expired done rows
        are deleted on the way."""
        now = self.clock()
        async with self.store.transaction() as tx:
            await tx.execute(
                "UPDATE inbox SET state = 'pending', claimed_by = NULL, lease_until = NULL "
                "WHERE channel = ? AND state = 'claimed' AND substr(claimed_by, 1, ?) = ? "
                "AND claimed_by <> ?",
                (channel, len(self.replica) + 1, self.replica + "/", self.owner))
            rows = await tx.fetchall(
                f"SELECT {_COLUMNS} FROM inbox WHERE channel = ? AND (state = 'pending' "
                "OR (state = 'claimed' AND lease_until < ?)) ORDER BY id", (channel, now))
            await self._prune(tx, now)   # a quiet bot may never reach PRUNE_EVERY finishes
        return [_row(r) for r in rows if int(r["id"]) not in self._taken]


    async def adoptable(self, channel: str) -> list[InboxRow]:
        """Rows of `channel` that nobody will run unless this process does, oldest first:
        claims whose lease lapsed (their process died mid-turn) and rows pending for longer
        than a lease (their process died before claiming them). Meant to be polled now and
        then while running; rows queued or running here are left out."""
        now = self.clock()
        rows = await self.store.fetchall(
            f"SELECT {_COLUMNS} FROM inbox WHERE channel = ? AND ((state = 'pending' "
            "AND received_at < ?) OR (state = 'claimed' AND lease_until < ?)) ORDER BY id",
            (channel, now - self.settings.lease_seconds, now))
        return [_row(r) for r in rows if int(r["id"]) not in self._taken]

    async def sweep(self, channel: str, adopt: Adopt) -> None:
        """Forever, every half lease: hand `adopt` the rows of `channel` nobody else will run
        (`adoptable`). A failed look is logged and tried again at the next interval."""
        while True:
            await asyncio.sleep(self.settings.lease_seconds / 2)
            try:
                adopted = adopt(await self.adoptable(channel))
                if inspect.isawaitable(adopted):
                    adopted = await adopted
            except Exception:
                log.warning("%s: could not look for updates left by another process", channel,
                            exc_info=True)
                continue
            if adopted:
                log.info("%s: %d update(s) left by a stopped process queued", channel, adopted)


class _SlotHold:
    """The FIFO per-conversation lock of one process; the map holds only busy conversations."""

    def __init__(self, slots: dict[str, _Slot], key: str):
        self._slots = slots
        self._key = key

    async def __aenter__(self) -> None:
        slot = self._slots.get(self._key)
        if slot is None:
            slot = self._slots[self._key] = _Slot()
        slot.users += 1
        try:
            await slot.lock.acquire()
        except BaseException:
            self._leave(slot)
            raise

    async def __aexit__(self, *exc: object) -> None:
        slot = self._slots[self._key]
        slot.lock.release()
        self._leave(slot)

    def _leave(self, slot: _Slot) -> None:
        slot.users -= 1
        if slot.users == 0:
            del self._slots[self._key]


def _row(record: Any) -> InboxRow:
    return InboxRow(int(record["id"]), record["channel"], record["update_key"],
                    record["conversation"], record["payload"], int(record["attempts"]))
