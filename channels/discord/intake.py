"""Discord messages and interactions through the durable inbox.

Discord does not deliver an event twice, so the inbox is what finds a message again after a
crash: each message addressed to the bot is stored on receipt (its message id is the key), then
run under the inbox's claim, in order per channel. At start-up `pending` lists the messages an
earlier run stored but did not finish; the channel fetches each one again by its id and answers
it. Slash commands and command buttons are stored too (their interaction id is the key) but not
run again after a restart: Discord lets an interaction be answered for 15 minutes only.

When the store cannot take a message, it is answered all the same, just without the record:
nothing would ever bring it back, and the user is waiting now.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import discord

from bot.core.errors import ShuttingDown
from bot.core.ports import Entry, InboxPort, InboxRow

log = logging.getLogger(__name__)

CHANNEL = "discord"
Work = Callable[[int | None], Awaitable[None]]   # gets the inbox row id (None: not stored)
Runner = Callable[[Work], Awaitable[None]]


@dataclass(frozen=True)
class StoredMessage:
    """A message an earlier run stored but did not finish: where to fetch it."""

    row: InboxRow
    channel_id: int
    message_id: int


class DiscordIntake:
    def __init__(self, inbox: InboxPort | None):
        self._inbox = inbox

    async def message(self, channel_id: int, message_id: int, work: Work) -> None:
        payload = json.dumps({"channel": channel_id, "message": message_id})
        await self._stored(Entry(f"m{message_id}", str(channel_id), payload), work)

    async def interaction(self, interaction_id: int, work: Work) -> None:
        """Stored (once per id) but out of order: a /stop must not wait for the turn it stops."""
        await self._stored(Entry(f"i{interaction_id}", "", "{}"), work)

    async def _stored(self, entry: Entry, work: Work) -> None:
        if self._inbox is None:
            await work(None)
            return
        try:
            rows = await self._inbox.put(CHANNEL, [entry], claim=True)
        except Exception:
            log.exception("discord: could not store %s; answering it without a record",
                          entry.update_key)
            await work(None)
            return
        if rows:   # empty: seen before (another shard's replay, or a duplicate event)
            await self.run(rows[0], work)

    async def run(self, row: InboxRow, work: Work) -> None:
        """Run `work` under the row's claim; a message the agent did not start because it is
        shutting down stays pending for the next start."""
        assert self._inbox is not None

        async def handled() -> bool:
            try:
                await work(row.id)
            except ShuttingDown:
                return False
            return True

        await self._inbox.run(row, handled)

    async def pending(self) -> tuple[list[StoredMessage], list[InboxRow]]:
        """Messages to answer again, oldest first, and interactions too old to answer."""
        if self._inbox is None:
            return [], []
        messages, expired = [], []
        for row in await self._inbox.recover(CHANNEL):
            if row.update_key.startswith("m"):
                where = json.loads(row.payload)
                messages.append(StoredMessage(row, int(where["channel"]), int(where["message"])))
            else:
                expired.append(row)
        return messages, expired

    async def resume(self, client: discord.Client) -> list[tuple[discord.Message, Runner]]:
        """The messages to answer again, fetched by their ids, oldest first, each with what
        runs its answer under the row's claim. Expired interactions and deleted messages are
        marked done on the way."""
        messages, expired = await self.pending()
        for row in expired:
            await self.drop(row)
        fetched = []
        for stored in messages:
            channel = client.get_channel(stored.channel_id) \
                or client.get_partial_messageable(stored.channel_id)
            try:
                message = await channel.fetch_message(stored.message_id)   # type: ignore[union-attr]
            except discord.HTTPException:
                log.warning("discord: stored message %s is gone; not answered", stored.message_id)
                await self.drop(stored.row)
                continue
            fetched.append((message, lambda work, row=stored.row: self.run(row, work)))
        if fetched:
            log.info("discord: %d stored message(s) from before the restart queued", len(fetched))
        return fetched

    async def drop(self, row: InboxRow) -> None:
        """Mark a row done without running it (an interaction whose answer window closed)."""
        assert self._inbox is not None
        await self._inbox.run(row, _nothing)


async def _nothing() -> None:
    log.info("discord: an interaction from before the restart can no longer be answered")
