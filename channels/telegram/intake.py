"""Updates into the durable inbox, and from there into python-telegram-bot's handlers.

Whichever way an update arrives (polling or webhook), `receive` stores it first (the caller
acknowledges it to Telegram only afterwards) and then queues it on the application, whose
processor (ordering.py) hands it to `through`: that claims the update's inbox row (in order per
chat, across processes; at most `max_running` turns at once), runs the handlers holding the
lease and marks the row done. After a restart, `resume` queues the rows stored but never
finished, oldest first, before new updates; while running, `sweep` adopts now and then the rows
a dead process left (a lapsed lease, or stored and never claimed).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Any

from telegram import Update
from telegram.ext import Application

from bot.core.errors import ShuttingDown
from bot.core.events import AgentAPI, IncomingMessage, Sink
from bot.core.ports import Entry, InboxPort, InboxRow

log = logging.getLogger(__name__)

CHANNEL = "telegram"
DEFAULT_MAX_RUNNING = 256


class TelegramIntake:
    def __init__(self, inbox: InboxPort, app: Application,
                 order_key: Callable[[object], Hashable | None],
                 max_running: int = DEFAULT_MAX_RUNNING):
        self._inbox = inbox
        self._app = app
        self._order_key = order_key
        self._running = asyncio.BoundedSemaphore(max_running)   # turns, not taps or /stop
        self._sweeper: asyncio.Task[None] | None = None
        self._rows: dict[int, InboxRow] = {}   # update_id -> its row, while queued or running
        self._left: set[int] = set()            # rows not started because of a shutdown

    async def receive(self, updates: Sequence[Update]) -> None:
        """Store `updates` (raises when that fails: do not acknowledge them), then queue the
        ones never seen before."""
        entries = [Entry(str(update.update_id), _conversation(self._order_key(update)),
                         json.dumps(update.to_dict(), separators=(",", ":")))
                   for update in updates]
        rows = await self._inbox.put(CHANNEL, entries, claim=True)
        by_key = {str(update.update_id): update for update in updates}
        for row in rows:
            await self._queue(by_key[row.update_key], row)

    async def resume(self) -> int:
        """Queue the rows an earlier run stored but did not finish; how many."""
        return await self._adopt(await self._inbox.recover(CHANNEL))

    async def _adopt(self, rows: list[InboxRow]) -> int:
        for row in rows:
            if int(row.update_key) not in self._rows:
                await self._queue(Update.de_json(json.loads(row.payload), self._app.bot), row)
        return len(rows)

    def start_sweeping(self) -> None:
        self._sweeper = asyncio.create_task(self._inbox.sweep(CHANNEL, self._adopt),
                                            name="telegram-inbox-sweep")

    async def stop_sweeping(self) -> None:
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is not None:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper


    async def _queue(self, update: Update | None, row: InboxRow) -> None:
        if update is None:
            return
        self._rows[update.update_id] = row
        await self._app.update_queue.put(update)

    async def through(self, update: object, coroutine: Awaitable[Any]) -> None:
        """Run one queued update under its inbox claim (the processor's `through`)."""
        row = self._rows.get(update.update_id) if isinstance(update, Update) else None
        if row is None:
            await coroutine
            return
        async def handled() -> bool:
            await coroutine
            return row.id not in self._left

        ran = False
        try:
            ran = await self._inbox.run(row, handled,
                                        limit=self._running if row.conversation else None)
        finally:
            self._rows.pop(update.update_id, None)
            self._left.discard(row.id)
            if not ran and inspect.iscoroutine(coroutine):
                coroutine.close()   # not run (done elsewhere, or the claim failed)

    async def hand_over(self, agent: AgentAPI, update: Update, message: IncomingMessage,
                        sink: Sink) -> None:
        """`agent.handle`, except that a message the agent did not start because it is shutting
        down keeps its row for the restart (nobody has to send it again)."""
        try:
            await agent.handle(dataclasses.replace(message, inbox_id=self.row_id(update)), sink)
        except ShuttingDown:
            row = self._rows.get(update.update_id)
            if row is not None:
                self._left.add(row.id)

    @property
    def active_chats(self) -> int:
        return self._inbox.active_conversations

    def row_id(self, update: Update) -> int | None:
        """The inbox row an update being handled came from."""
        row = self._rows.get(update.update_id)
        return row.id if row is not None else None


def _conversation(key: Hashable | None) -> str:
    return "" if key is None else str(key)
