"""Where approval requests are shown once answered: every message showing a request (the
requester's, each approver's copy, on any running channel) is redrawn with the outcome.

A request asked alone shows its outcome and loses its buttons. The messages of a batch (several
calls of one model step) are redrawn from the store, under the batch's lock, with every call as
it stands: the last redraw always shows every answer, however many taps race; calls still
pending keep their buttons.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from bot.core.approval_cards import (
    ApprovalBatchNeeded,
    ApprovalNeeded,
    ApprovalResolved,
    ApprovalSurface,
    ApprovalView,
)
from bot.core.errors import ChannelError

if TYPE_CHECKING:
    from bot.approvals.service import Approvals

log = logging.getLogger(__name__)


class ApprovalDisplay:
    def __init__(self, approvals: Approvals):
        self.approvals = approvals
        self._surfaces: dict[str, ApprovalSurface] = {}
        self._batch_locks: dict[str, asyncio.Lock] = {}

    def add_surface(self, channel: str, surface: ApprovalSurface) -> None:
        self._surfaces[channel] = surface

    async def show_outcome(self, request: Any, choice: str, resolver: str, note: str = "") -> None:
        """Every message showing the request (the requester's and each approver's copy) shows
        the outcome and who decided, and loses its buttons."""
        if getattr(request, "batch", None):
            await self._show_batch(request.batch)
            return
        when = request.resolved_at or time.time()
        for channel, ref in await self.approvals.message_refs(request.id):
            surface = self._surfaces.get(channel)
            if surface is None:
                continue
            try:
                await surface.approval_resolved(ApprovalResolved(
                    request.view(), choice, resolver, when, ref, note))
            except ChannelError:
                log.info("approval %s: %s is down; its message keeps its buttons", request.id,
                         channel)

    async def _show_batch(self, batch: str) -> None:
        """Redraw every message of a batch (each copy) from the store: answered calls show
        their outcome, pending ones keep their buttons."""
        approvals = self.approvals
        lock = self._batch_locks.setdefault(batch, asyncio.Lock())
        async with lock:
            members = await approvals.batch_members(batch)
            calls = tuple(m.outcome() for m in members)
            shown: set[tuple[str, str]] = set()
            for member, call in zip(members, calls, strict=True):
                for channel, ref in await approvals.message_refs(member.id):
                    surface = self._surfaces.get(channel)
                    if surface is None or (channel, ref) in shown:
                        continue
                    shown.add((channel, ref))
                    try:
                        await surface.approval_resolved(ApprovalResolved(
                            member.view(), call.choice or "pending", call.resolver,
                            call.resolved_at, ref, batch=calls))
                    except ChannelError:
                        log.info("approval batch %s: %s is down; its message keeps its buttons",
                                 batch, channel)
        if all(call.choice for call in calls):
            self._batch_locks.pop(batch, None)


def requests_event(views: list[ApprovalView]) -> ApprovalNeeded | ApprovalBatchNeeded:
    """One request alone as it always was; several of one step as one batch."""
    if len(views) == 1:
        return ApprovalNeeded(views[0])
    return ApprovalBatchNeeded(views[0].batch, tuple(views))
