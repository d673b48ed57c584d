"""What this bot sent on WhatsApp, kept in the store for a week (table `whatsapp_sent`).

Meta reports a delivery failure later, in a `failed` status callback: by then the process that
sent the message may have restarted, or another replica may receive the callback. Each sent
message is therefore written down as it goes out (recipient, kind, the text a person reads, the
exact payload), so the callback finds it wherever and whenever it lands: a rate-limited message
is sent again once, anything else is reported to the person (channels/whatsapp/followups.py).
A reply quoting one of the bot's messages is read with that message's opening, the same way.

The latest messages are also kept in memory, so the usual lookup (a status for a message sent a
moment ago) costs no query. Rows older than `KEEP_SECONDS` are deleted now and then.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

KEEP_SECONDS = 7 * 24 * 3600.0
IN_MEMORY = 2000
PRUNE_EVERY = 500


@dataclass(frozen=True)
class Sent:
    to: str
    kind: str                    # reply | reminder | job | approval | notice
    text: str
    payload: dict[str, Any]
    retried: bool = False


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
