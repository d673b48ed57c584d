"""Deliveries into the durable inbox, and from there to the channel's handler, one row at a time.

A delivery holds messages and status callbacks. `receive` stores each as an inbox row before the
webhook answers (a message keyed by its id, "wamid…", so Meta's re-deliveries are stored and run
once; a status keyed by id and state), then runs the new rows: a person's messages in order, one
turn at a time across processes (the inbox's claim), different people concurrently, at most
`max_running` turns at once. Taps, /stop and statuses skip the order (they must not wait for a
turn). After a restart `resume` runs the rows stored but never finished; while running, `sweep`
adopts now and then the rows a dead process left.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bot.core.ports import Entry, InboxPort, InboxRow

log = logging.getLogger(__name__)

CHANNEL = "whatsapp"
DEFAULT_MAX_RUNNING = 256
TAP_TYPES = ("interactive", "button")

Handle = Callable[[InboxRow, dict[str, Any]], Awaitable[bool | None]]


def _conversation(message: dict[str, Any]) -> str:
    """The ordering key: the person; none for taps and /stop, which must never wait."""
    if message.get("type") in TAP_TYPES:
        return ""
    text = ((message.get("text") or {}).get("body") or "").strip().lower()
    if text.split(maxsplit=1)[:1] == ["/stop"]:
        return ""
    return str(message.get("from", ""))


def entries_of(delivery: dict[str, Any], phone_number_id: str, received: float = 0.0
               ) -> list[Entry]:
    """The messages and statuses of a delivery meant for our phone number, as inbox entries;
    each message carries `received`, when our webhook got it (the 24-hour window's start: the
    message's own `timestamp` is the sender's clock, or a fixed one in Meta's samples)."""
    entries: list[Entry] = []
    for entry in delivery.get("entry") or []:
        for change in (entry or {}).get("changes") or []:
            value = (change or {}).get("value") or {}
            if change.get("field") != "messages" or not isinstance(value, dict):
                continue
            number = str((value.get("metadata") or {}).get("phone_number_id", ""))
            if number != phone_number_id:
                log.warning("whatsapp: a delivery for another phone number id was ignored")
                continue
            names = {str(c.get("wa_id")): str((c.get("profile") or {}).get("name") or "")
                     for c in value.get("contacts") or [] if isinstance(c, dict)}
            for message in value.get("messages") or []:
                if isinstance(message, dict) and message.get("id") and message.get("from"):
                    payload = {"message": message, "name": names.get(str(message["from"]), ""),
                               "received": received}
                    entries.append(Entry(str(message["id"]), _conversation(message),
                                         json.dumps(payload, separators=(",", ":"))))
            for status in value.get("statuses") or []:
                if isinstance(status, dict) and status.get("id") and status.get("status"):
                    entries.append(Entry(f"status:{status['id']}:{status['status']}", "",
                                         json.dumps({"status": status}, separators=(",", ":"))))
    return entries


class WhatsAppIntake:
    def __init__(self, inbox: InboxPort, phone_number_id: str, handle: Handle,
                 max_running: int = DEFAULT_MAX_RUNNING, clock: Callable[[], float] = time.time):
        self._inbox = inbox
        self._clock = clock
        self._phone = phone_number_id
        self._handle = handle
        self._running = asyncio.BoundedSemaphore(max_running)   # turns, not taps or statuses
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._sweeper: asyncio.Task[None] | None = None

    async def receive(self, delivery: dict[str, Any]) -> None:
        """Store the delivery's entries (raises when that fails: do not acknowledge it), then
        run the ones never seen before."""
        entries = entries_of(delivery, self._phone, self._clock())
        if not entries:
            return
        for row in await self._inbox.put(CHANNEL, entries, claim=True):
            self._spawn(row)

    def _spawn(self, row: InboxRow) -> None:
        if row.id in self._tasks:
            return
        task = asyncio.create_task(self._run(row), name=f"whatsapp-row-{row.id}")
        self._tasks[row.id] = task
        task.add_done_callback(lambda _: self._tasks.pop(row.id, None))

    async def _run(self, row: InboxRow) -> None:
        try:
            payload = json.loads(row.payload)
        except ValueError:
            payload = {}

        async def work() -> bool | None:
            return await self._handle(row, payload)
        try:
            await self._inbox.run(row, work, limit=self._running if row.conversation else None)
        except Exception:
            log.exception("whatsapp: handling stored update %s failed", row.update_key)

    async def resume(self) -> int:
        """Run the rows an earlier run stored but did not finish; how many."""
        return self._adopt(await self._inbox.recover(CHANNEL))

    def _adopt(self, rows: list[InboxRow]) -> int:
        fresh = [row for row in rows if row.id not in self._tasks]
        for row in fresh:
            self._spawn(row)
        return len(fresh)

    def start_sweeping(self) -> None:
        self._sweeper = asyncio.create_task(self._inbox.sweep(CHANNEL, self._adopt),
                                            name="whatsapp-inbox-sweep")


    async def idle(self) -> None:
        """Wait until every row taken so far has run (tests and benchmarks)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)

    async def stop(self) -> None:
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is not None:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
        tasks = list(self._tasks.values())
        for task in tasks:   # rows left claimed or pending run again after the restart
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    @property
    def active_chats(self) -> int:
        return self._inbox.active_conversations
