"""A tap on a WhatsApp button: an approval card's, a batch's "Approve all", or a command's.

The agent decides every approval answer (who may answer, once only). When the answer counts,
the conversation resumes in the request's chat and every card showing the request gets the
outcome as a reply (the channel's `approval_resolved`, called by the agent). When it does not
(a stranger, a second tap on an old card, an expired request) the tapper gets the reason as a
reply to the card they tapped, "This request was already approved by …", and nothing changes.
A command button runs its command as a message from the tapper, passing every check typing it
would; a button that is not ours is answered as no longer valid. The tapper is answered in
their own language.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from bot.core.events import AgentAPI, IncomingMessage
from bot.core.identity import Sender
from bot.language.catalogs import N_
from channels.whatsapp import approvals
from channels.whatsapp.rendering import Part
from channels.whatsapp.sending import DeliveryError, Messenger
from channels.whatsapp.sink import ChatSink

log = logging.getLogger(__name__)

CHANNEL = "whatsapp"
COMMAND_PREFIX = "c:/"
BUTTON_NOT_VALID = N_("This button is not valid any more.")

MakeSink = Callable[[str, str | None], ChatSink]   # (wa_id, inbound message id) -> sink


class TapHandler:
    def __init__(self, messenger: Messenger, agent: AgentAPI, make_sink: MakeSink):
        self._messenger = messenger
        self._agent = agent
        self._make_sink = make_sink

    async def approval(self, wa_id: str, reply_id: str, card: str, inbound: str) -> bool:
        """Handle `reply_id` if it is an approval button's; False when it is not one."""
        parsed = approvals.parse_tap(reply_id)
        if parsed is None:
            return False
        scope, target, choice = parsed
        resolver = Sender.of(CHANNEL, wa_id)
        if scope == "all":
            resolution = await self._agent.resolve_batch(target, resolver, choice)
        else:
            resolution = await self._agent.resolve_approval(target, resolver, choice)
        if not resolution.ok or resolution.request is None:
            await self._say(wa_id, self._agent.translator(resolver).say(resolution.reason), card)
            return True
        request = resolution.request
        # The conversation continues in the request's chat; a request of another channel
        # answered here continues in this chat, as Telegram does.
        chat = request.chat if request.channel == CHANNEL and request.chat.isdigit() else wa_id
        sink = self._make_sink(chat, inbound if chat == wa_id else None)
        if self._agent.resume_approval(resolution, sink):
            sink.start_typing()
        return True

    def command(self, wa_id: str, reply_id: str, name: str, inbound: str) -> IncomingMessage | None:
        """The message a command button sends on the tapper's behalf, or None."""
        if not reply_id.startswith(COMMAND_PREFIX):
            return None
        command = reply_id[len(COMMAND_PREFIX) - 1:]
        if not command.isprintable():
            return None
        return IncomingMessage(sender=Sender.of(CHANNEL, wa_id), chat=wa_id, text=command,
                               channel=CHANNEL, message_id=inbound, display_name=name)

    async def not_ours(self, wa_id: str, card: str) -> None:
        tr = self._agent.translator(Sender.of(CHANNEL, wa_id))
        await self._say(wa_id, tr._(BUTTON_NOT_VALID), card)

    async def _say(self, wa_id: str, text: str, card: str) -> None:
        try:
            await self._messenger.send_part(wa_id, Part(text, text), reply_to=card or None)
        except DeliveryError:
            log.warning("whatsapp: could not answer a tap of %s", wa_id, exc_info=True)
