"""Per-process caches kept honest across processes sharing one PostgreSQL store (LISTEN/NOTIFY).

Each process keeps copies of store rows so a turn reads little: histories (bot.conversation.history_cache),
active session ids, grants, spend totals. When another process writes those rows, the copies
here must go. A write transaction names what it changed (`tx.invalidate(topic, key)`); just
before it commits, the names go out in one `NOTIFY` on a channel of this schema (delivered by
the server only if the transaction commits). Every other process listens on a connection of its
own and hands each name to the callbacks subscribed to its topic, which drop their copy. A
process ignores its own notifications: its commit hooks already did the right thing.

Delivery is asynchronous, so a reader that must not act on a stale copy first calls `catch_up()`:
a round trip on the listening connection. The server sends every notification committed before
that query ahead of its answer, and asyncpg runs their callbacks before the awaiting task
resumes, so when `catch_up()` returns, every write committed before the call has been applied.
A turn calls it once, at its start (after the conversation's order, so after the previous turn
of that conversation, wherever it ran). Concurrent calls share round trips.

If the listening connection is lost, nothing tells this process what it missed: every cache is
emptied (`key` None), and the next `catch_up()` listens again before it returns.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncpg

log = logging.getLogger(__name__)

Callback = Callable[[str | None], None]   # the key that changed; None: everything may have
MAX_PAYLOAD = 7000                       # the server's limit is 8000 bytes per notification
EVERYTHING = None


def channel_for(schema: str) -> str:
    """The NOTIFY channel of one schema (a database may hold several installations)."""
    return "myclaw_cache_" + hashlib.sha256(schema.encode()).hexdigest()[:16]


def payloads(origin: str, changes: Iterable[tuple[str, str]]) -> list[str]:
    """`changes` as notification payloads: the origin, then one `[topic, key]` (JSON) per line.
    A change too long for one notification is sent as its topic with no key: everything."""
    out: list[str] = []
    lines: list[str] = []
    size = len(origin)
    for topic, key in sorted(set(changes)):
        line = json.dumps([topic, key])
        if len(line) + len(origin) + 1 > MAX_PAYLOAD:
            line = json.dumps([topic[:100], None])
        if lines and size + len(line) + 1 > MAX_PAYLOAD:
            out.append("\n".join([origin, *lines]))
            lines, size = [], len(origin)
        lines.append(line)
        size += len(line) + 1
    if lines:
        out.append("\n".join([origin, *lines]))
    return out


class Subscribers:
    """Callbacks per topic. Bound methods are held weakly: an object that goes away (a journal
    built for one test, a ledger of a closed app) stops being called and is not kept alive."""

    def __init__(self) -> None:
        self._by_topic: dict[str, list[Callable[[], Callback | None]]] = {}

    def add(self, topic: str, callback: Callback) -> None:
        ref: Callable[[], Callback | None]
        if hasattr(callback, "__self__") and hasattr(callback, "__func__"):
            ref = weakref.WeakMethod(callback)  # type: ignore[arg-type]
        else:
            ref = lambda: callback  # noqa: E731 - a plain function lives as long as its module
        self._by_topic.setdefault(topic, []).append(ref)

    def call(self, topic: str | None, key: str | None) -> None:
        """Tell `topic`'s subscribers (every topic's, when `topic` is None) that `key` changed."""
        topics = list(self._by_topic) if topic is None else [topic]
        for name in topics:
            live = []
            for ref in self._by_topic.get(name, ()):
                callback = ref()
                if callback is None:
                    continue
                live.append(ref)
                try:
                    callback(key)
                except Exception:  # one broken cache must not keep the others stale
                    log.exception("cache invalidation callback failed for %s", name)
            self._by_topic[name] = live


class PgInvalidations:
    """The listening side, one per open store: a dedicated connection, its callbacks, and the
    `catch_up` barrier."""

    def __init__(self, connect: Callable[[], Any], schema: str, subscribers: Subscribers,
                 origin: str):
        self.origin = origin
        self.channel = channel_for(schema)
        self.subscribers = subscribers
        self._connect = connect
        self._conn: asyncpg.Connection | None = None
        self._lock = asyncio.Lock()
        self._requested = 0
        self._completed = 0

    async def start(self) -> None:
        conn = await self._connect()
        try:
            await conn.add_listener(self.channel, self._on_notify)
        except BaseException:
            await conn.close()
            raise
        conn.add_termination_listener(self._on_lost)
        self._conn = conn

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            conn.remove_termination_listener(self._on_lost)
            await conn.close()

    async def catch_up(self) -> None:
        """Return once every notification committed before this call has been applied."""
        self._requested += 1
        ticket = self._requested
        async with self._lock:
            if self._completed >= ticket:
                return  # a round trip that started after this call has already finished
            covered = self._requested
            if self._conn is None or self._conn.is_closed():
                self._conn = None
                await self.start()
                self.subscribers.call(None, EVERYTHING)  # whatever was missed meanwhile
            await self._conn.fetchval("SELECT 1")
            self._completed = covered

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        origin, _, body = payload.partition("\n")
        if origin == self.origin:
            return
        for line in body.split("\n"):
            try:
                topic, key = json.loads(line)
            except ValueError:
                log.warning("an unreadable cache notification; caches emptied")
                topic, key = None, EVERYTHING
            self.subscribers.call(topic, key)

    def _on_lost(self, _conn: Any) -> None:
        log.warning("the store's notification connection was lost; caches emptied")
        self._conn = None
        self.subscribers.call(None, EVERYTHING)
