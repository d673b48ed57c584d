"""Slack envelopes into the durable inbox, and from there into the Bolt app's listeners.

Whichever way an envelope arrives (a Socket Mode frame or an Events API request), `receive`
stores it first — the caller acknowledges it to Slack only afterwards, well within Slack's
3 seconds — and then runs it in a task: the inbox claim (in order per conversation, across
processes; at most `max_running` turns at once), the Bolt dispatch holding the lease, the row
marked done. Slack re-sends an event it thinks was lost (`X-Slack-Retry-Num`); its event id is
the row's key, so a re-sent event is stored and answered once. After a restart, `resume` runs
the rows stored but never finished, oldest first; `sweep` adopts now and then the rows a dead
process left.

Keys: events by `event_id`, taps and slash commands by their `trigger_id`. Conversations: a DM,
or a thread (`channel/thread ts`); taps, slash commands and /stop have none, so they never wait
behind the turn they may answer or stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from bot.core.ports import Entry, InboxPort, InboxRow

log = logging.getLogger(__name__)

CHANNEL = "slack"
DEFAULT_MAX_RUNNING = 256
STOP_TIMEOUT = 10.0


@dataclass
class RowState:
    """Shared with the listener that handles the envelope (through Bolt's context)."""

    row_id: int | None
    left: bool = False       # not started because the agent is shutting down: keep the row


Dispatch = Callable[[str, dict[str, Any], RowState], Awaitable[None]]


def entry_for(kind: str, body: dict[str, Any]) -> Entry | None:
    """The inbox entry of an envelope, or None when it is nothing the bot handles."""
    payload = json.dumps({"kind": kind, "body": body}, separators=(",", ":"))
    if kind == "events_api":
        event_id = body.get("event_id")
        event = body.get("event")
        if not isinstance(event_id, str) or not isinstance(event, dict):
            return None
        return Entry(f"e:{event_id}", conversation_of(event), payload)
    trigger = body.get("trigger_id")
    if kind in ("interactive", "slash_commands") and isinstance(trigger, str) and trigger:
        return Entry(f"{kind[0]}:{trigger}", "", payload)
    return None


def conversation_of(event: dict[str, Any]) -> str:
    channel = str(event.get("channel", ""))
    text = str(event.get("text") or "")
    if _is_stop(text):
        return ""
    thread = event.get("thread_ts")
    if event.get("channel_type") == "im":
        return f"{channel}/{thread}" if thread else channel
    return f"{channel}/{thread or event.get('ts', '')}"


def _is_stop(text: str) -> bool:
    words = text.replace(">", "> ").split()
    words = [w for w in words if not w.startswith("<@")]
    return bool(words) and words[0].lower() == "/stop"


class SlackIntake:
    def __init__(self, inbox: InboxPort, dispatch: Dispatch, max_running: int = DEFAULT_MAX_RUNNING):
        self._inbox = inbox
        self._dispatch = dispatch
        self._running = asyncio.BoundedSemaphore(max_running)
        self._tasks: set[asyncio.Task[None]] = set()
        self._queued: set[int] = set()     # row ids running (or about to) in this process
        self._sweeper: asyncio.Task[None] | None = None

    async def receive(self, kind: str, body: dict[str, Any]) -> bool:
        """Store the envelope (raises when that fails: do not acknowledge it), then run it
        unless it was seen before. False when it is nothing the bot handles."""
        entry = entry_for(kind, body)
        if entry is None:
            return False
        for row in await self._inbox.put(CHANNEL, [entry], claim=True):
            self._spawn(row, kind, body)
        return True

    def _spawn(self, row: InboxRow, kind: str, body: dict[str, Any]) -> None:
        if row.id in self._queued:
            return
        self._queued.add(row.id)
        task = asyncio.create_task(self._run(row, kind, body), name=f"slack-{row.update_key}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, row: InboxRow, kind: str, body: dict[str, Any]) -> None:
        state = RowState(row.id)

        async def handled() -> bool:
            if kind:     # empty: a stored envelope that could not be read
                await self._dispatch(kind, body, state)
            return not state.left

        try:
            await self._inbox.run(row, handled, limit=self._running if row.conversation else None)
        except Exception:
            log.exception("slack: handling %s failed", row.update_key)
        finally:
            self._queued.discard(row.id)

    async def resume(self) -> int:
        """Run the rows an earlier run stored but did not finish; how many."""
        return self._adopt(await self._inbox.recover(CHANNEL))

    def _adopt(self, rows: list[InboxRow]) -> int:
        """Run the rows not queued or running here already; how many were new. A row whose
        payload cannot be read is finished unrun rather than blocking the ones after it."""
        fresh = [row for row in rows if row.id not in self._queued]
        for row in fresh:
            try:
                stored = json.loads(row.payload)
                kind, body = str(stored["kind"]), stored["body"]
            except (ValueError, KeyError, TypeError):
                log.error("slack: stored envelope %s cannot be read; marked done unrun",
                          row.update_key)
                kind, body = "", {}
            self._spawn(row, kind, body)
        return len(fresh)

    def start_sweeping(self) -> None:
        self._sweeper = asyncio.create_task(self._inbox.sweep(CHANNEL, self._adopt),
                                            name="slack-inbox-sweep")


    async def stop(self) -> None:
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is not None:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
        running = {t for t in self._tasks if t is not asyncio.current_task()}
        if running:
            _, late = await asyncio.wait(running, timeout=STOP_TIMEOUT)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late)

    async def idle(self) -> None:
        """Until every envelope received so far is handled (tests and the bench wait on it)."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))
