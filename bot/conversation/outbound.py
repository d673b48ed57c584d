"""Messages at a platform's edge: those it would not deliver yet (held), and those it took but
may report failed later (sent).

Held.
WhatsApp, for one, accepts free-form messages only within 24 hours of the person's last message;
a reminder or a job's answer due later, with no template to carry it, waits here. When the
person next writes (which reopens the window), the channel takes what was held for them and
says it first, so nothing is lost silently.

    await held.hold("whatsapp:39347…", "reminder", text, reason)
    for message in await held.take("whatsapp:39347…"): ...

`take` deletes what it returns in the same transaction, so with several processes on one store
each held message is handed out once.

Sent (table `whatsapp_sent`, kept a week). Meta reports a delivery failure later, in a `failed`
status callback: by then the process that sent the message may have restarted, or another
replica may receive the callback. Each sent message is therefore written down as it goes out
(recipient, kind, the text a person reads, the exact payload), so the callback finds it
wherever and whenever it lands: a rate-limited message is sent again once, anything else is
reported to the person. A reply quoting one of the bot's messages is read with that message's
opening, the same way. The latest are also kept in memory, so the usual lookup (a status for a
message sent a moment ago) costs no query; rows older than `KEEP_SECONDS` are deleted now and
then.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from bot.core.ports import HeldMessage, Sent

MAX_HELD_PER_RECIPIENT = 50   # a person away for months gets the newest, not an endless backlog


class HeldMessages:
    def __init__(self, store: Any, clock: Callable[[], float] = time.time):
        self.store = store
        self.clock = clock

    async def hold(self, recipient: str, kind: str, text: str, reason: str,
                   approval_id: str = "") -> None:
        async with self.store.transaction(lock=[f"held:{recipient}"]) as tx:
            await tx.execute(
                "INSERT INTO held_messages(recipient, kind, text, reason, approval_id, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (recipient, kind, text, reason, approval_id or None, self.clock()))
            # Concurrent-safe: the recipient's lock orders the insert and the trim.
            await tx.execute(
                "DELETE FROM held_messages WHERE recipient = ? AND id NOT IN (SELECT id FROM "
                "held_messages WHERE recipient = ? ORDER BY id DESC LIMIT ?)",
                (recipient, recipient, MAX_HELD_PER_RECIPIENT))

    async def take(self, recipient: str) -> list[HeldMessage]:
        """Everything held for `recipient`, oldest first; removed as it is returned."""
        if not await self.count(recipient):   # the usual case, without a write transaction
            return []
        async with self.store.transaction(lock=[f"held:{recipient}"]) as tx:
            rows = await tx.fetchall(
                "SELECT id, recipient, kind, text, reason, approval_id, created_at "
                "FROM held_messages WHERE recipient = ? ORDER BY id", (recipient,))
            if rows:
                await tx.execute("DELETE FROM held_messages WHERE recipient = ? AND id <= ?",
                                 (recipient, max(int(r["id"]) for r in rows)))
        return [HeldMessage(r["recipient"], r["kind"], r["text"], r["reason"],
                            float(r["created_at"]), r["approval_id"] or "") for r in rows]

    async def count(self, recipient: str) -> int:
        row = await self.store.fetchone(
            "SELECT COUNT(*) AS n FROM held_messages WHERE recipient = ?", (recipient,))
        return int(row["n"]) if row else 0


KEEP_SECONDS = 7 * 24 * 3600.0   # how long a sent message can still be reported or quoted
IN_MEMORY = 2000
PRUNE_EVERY = 500


class SentMessages:
    def __init__(self, store: Any, clock: Callable[[], float] = time.time):
        self._store = store
        self._clock = clock
        self._recent: OrderedDict[str, Sent] = OrderedDict()
        self._written = 0

    async def remember(self, wamid: str, sent: Sent) -> None:
        self._keep(wamid, sent)
        now = self._clock()
        async with self._store.transaction() as tx:
            # Concurrent-safe: the message id is Meta's, unique; a repeat changes nothing.
            await tx.execute(
                "INSERT INTO whatsapp_sent(message_id, recipient, kind, text, payload, retried, "
                "sent_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(message_id) DO NOTHING",
                (wamid, sent.to, sent.kind, sent.text,
                 json.dumps(sent.payload, separators=(",", ":")), int(sent.retried), now))
            self._written += 1
            if self._written % PRUNE_EVERY == 0:
                await tx.execute("DELETE FROM whatsapp_sent WHERE sent_at < ?",
                                 (now - KEEP_SECONDS,))

    async def recall(self, wamid: str) -> Sent | None:
        """The message Meta calls `wamid`, if this bot sent it within the last week."""
        if not wamid:
            return None
        found = self._recent.get(wamid)
        if found is not None:
            return found
        row = await self._store.fetchone(
            "SELECT recipient, kind, text, payload, retried FROM whatsapp_sent "
            "WHERE message_id = ? AND sent_at >= ?", (wamid, self._clock() - KEEP_SECONDS))
        if row is None:
            return None
        sent = Sent(row["recipient"], row["kind"], row["text"], json.loads(row["payload"]),
                    bool(row["retried"]))
        self._keep(wamid, sent)
        return sent

    def _keep(self, wamid: str, sent: Sent) -> None:
        self._recent[wamid] = sent
        self._recent.move_to_end(wamid)
        while len(self._recent) > IN_MEMORY:
            self._recent.popitem(last=False)
