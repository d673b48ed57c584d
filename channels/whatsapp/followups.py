"""After a send: delivery status callbacks, and what the 24-hour window held back.

Statuses (sent, delivered, read, failed) are stored in the inbox like messages (so none is
lost or handled twice) and never read as messages. A `failed` status for one of our messages
is logged with its error and then: retried once after a rate limit (130429, 131056); held for
the person's next message when the window had closed (131047), so they are told then; any
other failure is held as "my last message did not reach you", so it is reported to them as
soon as WhatsApp lets us write again. What was sent is in the store (bot/conversation/outbound.py), so this
works for a message sent before a restart or by another replica; a failed message the store
does not hold (older than a week) is logged as an error: reported, never silent.

When the person writes again, `deliver_held` first says what was held for them: texts under
a short introduction, approval requests as their cards again (while still pending), in the
person's language.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from bot.core.approval_cards import ApprovalNeeded, ApprovalView
from bot.core.events import AgentAPI
from bot.core.ports import HeldPort
from channels.whatsapp import texts
from channels.whatsapp.graph import OUTSIDE_WINDOW, GraphError
from channels.whatsapp.sending import DeliveryError, Messenger, OutsideWindow
from channels.whatsapp.sink import ChatSink

log = logging.getLogger(__name__)

CHANNEL = "whatsapp"
RETRIED_CODES = frozenset({130429, 131056})


def _error_of(status: dict[str, Any]) -> tuple[int, str]:
    errors = status.get("errors") or [{}]
    first = errors[0] if isinstance(errors[0], dict) else {}
    code = first.get("code") if isinstance(first.get("code"), int) else 0
    detail = (first.get("error_data") or {}).get("details") if isinstance(
        first.get("error_data"), dict) else ""
    title = str(first.get("title") or first.get("message") or "unknown error")
    return code, f"{title}: {detail}" if detail else title


class Followups:
    def __init__(self, messenger: Messenger, held: HeldPort, agent: AgentAPI,
                 make_sink: Callable[[str], ChatSink]):
        self._messenger = messenger
        self._held = held
        self._agent = agent
        self._make_sink = make_sink
        self.statuses: dict[str, int] = {}   # how many of each status arrived (health, tests)

    async def on_status(self, status: dict[str, Any]) -> None:
        state = str(status.get("status", ""))
        self.statuses[state] = self.statuses.get(state, 0) + 1
        wamid = str(status.get("id", ""))
        if state != "failed":
            log.debug("whatsapp: message %s %s", wamid, state)
            return
        code, reason = _error_of(status)
        sent = await self._messenger.outbox.recall(wamid)
        recipient = str(status.get("recipient_id") or (sent.to if sent else ""))
        if sent is None:
            log.error("whatsapp: a message to %s failed (%s, code %s) and is not one this bot "
                      "sent in the last week; it cannot be retried", recipient or "someone",
                      reason, code)
            return
        log.warning("whatsapp: a %s message to %s failed: %s (code %s)", sent.kind, sent.to,
                    reason, code)
        if code in RETRIED_CODES and not sent.retried:
            try:
                await self._messenger.resend(sent)
                return
            except GraphError as exc:
                log.warning("whatsapp: retrying the failed message to %s failed: %s", sent.to, exc)
        why = texts.NOT_DELIVERED if code == OUTSIDE_WINDOW else reason
        kind = sent.kind if code == OUTSIDE_WINDOW else "failed"
        await self._held.hold(f"{CHANNEL}:{sent.to}", kind, sent.text, why)

    async def deliver_held(self, wa_id: str, pending: Callable[[str], Awaitable[set[str]]]) -> None:
        """Say what was held for `wa_id` (they just wrote, so the window is open)."""
        held = await self._held.take(f"{CHANNEL}:{wa_id}")
        if not held:
            return
        sink = self._make_sink(wa_id)
        tr = sink.tr
        try:
            for index, message in enumerate(held):
                if message.kind == "approval":
                    view = ApprovalView(**json.loads(message.text))
                    if view.id in await pending(view.channel):
                        await self._say(wa_id, tr._(texts.HELD_APPROVAL))
                        await sink.emit(ApprovalNeeded(view))   # a failure is held again
                    continue
                intro = tr._(texts.FAILED_REPLY, reason=message.reason) \
                    if message.kind == "failed" else tr._(texts.HELD_INTRO)
                if not await self._say(wa_id, f"{intro}\n\n{message.text}"):
                    for again in held[index:]:   # still not deliverable: kept for next time
                        await self._held.hold(again.recipient, again.kind, again.text,
                                              again.reason, again.approval_id)
                    return
        finally:
            await sink.close()

    async def _say(self, wa_id: str, text: str) -> bool:
        try:
            await self._messenger.send_markdown(wa_id, text)
            return True
        except (DeliveryError, OutsideWindow):
            log.warning("whatsapp: could not deliver a held message to %s; kept for their next "
                        "message", wa_id, exc_info=True)
            return False
