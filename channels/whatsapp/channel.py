"""The WhatsApp channel: the official Cloud API in, agent events out.

    channel = create(config, agent, listeners); await channel.start(); ...; await channel.stop()

- Secrets from the environment: WHATSAPP_ACCESS_TOKEN (the Graph API token; the channel starts
  when it is set), WHATSAPP_APP_SECRET (signs every delivery), WHATSAPP_VERIFY_TOKEN (Meta's
  subscription check). `[whatsapp] base_url`, `api_version` and `phone_number_id` name the API
  and the number; start-up asks the API about the number, so a wrong token or id is one line.
- The webhook (webhook.py) is a route on the shared listener at `[whatsapp] listen`/`port`/
  `webhook_path`: with Telegram's webhook and /healthz on the same port, one server serves all.
- Every delivery is stored in the durable inbox before Meta is told it arrived (intake.py); a
  person's messages run in order, different people concurrently, across replicas.
- The sender is `whatsapp:<wa_id>`; levels, pairing (the approvers get buttons to let a
  stranger in) and silence for ignored senders are the agent's business. Attachments are
  fetched only once the agent admits the sender (media.py).
- Replies, approvals, the 24-hour window: sink.py, approvals.py, sending.py, followups.py.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

from bot.core.approval_cards import SUPERSEDED, ApprovalResolved
from bot.core.errors import ChannelError, ShuttingDown
from bot.core.events import AgentAPI
from bot.core.identity import Sender
from bot.core.listeners import Listeners
from bot.core.ports import ChannelConfig, InboxRow
from channels.whatsapp import approvals, texts
from channels.whatsapp.followups import Followups
from channels.whatsapp.graph import Graph, GraphError
from channels.whatsapp.intake import WhatsAppIntake
from channels.whatsapp.media import Attachments, has_attachments
from channels.whatsapp.reading import incoming, tap_of
from channels.whatsapp.rendering import Part
from channels.whatsapp.sending import DeliveryError, Messenger, OutsideWindow
from channels.whatsapp.sink import ChatSink, SinkSettings
from channels.whatsapp.taps import TapHandler

log = logging.getLogger(__name__)

CHANNEL = "whatsapp"
MAX_ANNOUNCED = 10_000
REQUIRED = (("WHATSAPP_ACCESS_TOKEN", "the Cloud API access token (Meta app → WhatsApp → API "
             "setup)"), ("WHATSAPP_APP_SECRET", "the Meta app's secret (App settings → Basic), "
             "which signs every webhook delivery"), ("WHATSAPP_VERIFY_TOKEN", "a string of your "
             "choice, entered again in the Meta app's webhook settings"))


def check_config(config: ChannelConfig) -> tuple[str, str, str]:
    values = []
    for name, what in REQUIRED:
        value = config.secret(name)
        if not value:
            raise ChannelError(f"{name} is not set: export {what}")
        values.append(value)
    if not str(config["whatsapp"]["phone_number_id"]).strip():
        raise ChannelError("[whatsapp] phone_number_id is not set: copy the id of your number "
                           "from the Meta app (WhatsApp → API setup)")
    return values[0], values[1], values[2]


def graph_for(config: ChannelConfig, token: str) -> Graph:
    section = config["whatsapp"]
    return Graph(section["base_url"], section["api_version"], str(section["phone_number_id"]),
                 token)


async def check_token(config: ChannelConfig) -> str:
    """For `myclaw doctor --whatsapp`: the number's name when the token and id work."""
    token = config.secret("WHATSAPP_ACCESS_TOKEN")
    if not token:
        raise ChannelError("WHATSAPP_ACCESS_TOKEN is not set")
    graph = graph_for(config, token)
    await graph.open()
    try:
        number = await graph.phone_number()
    except GraphError as exc:
        raise ChannelError(f"the Graph API refused the token or phone number id: {exc}") from exc
    finally:
        await graph.close()
    return f"{number.get('verified_name', '?')} ({number.get('display_phone_number', '?')})"


def exclusive_locks(config: ChannelConfig) -> dict[str, str]:
    """None: any replica may receive any delivery (the inbox runs each once)."""
    return {}


class WhatsAppChannel:
    def __init__(self, config: ChannelConfig, agent: AgentAPI, listeners: Listeners | None = None,
                 settings: SinkSettings | None = None, clock: Callable[[], float] = time.time):
        self.config = config
        self.agent = agent
        self.settings = settings or SinkSettings()
        self._own_listeners = listeners is None
        self._listeners = listeners or Listeners()
        self._clock = clock
        self._graph: Graph | None = None
        self._messenger: Messenger | None = None
        self._attachments: Attachments | None = None
        self._held = agent.held
        self._taps: TapHandler | None = None
        self._followups: Followups | None = None
        self._intake: WhatsAppIntake | None = None
        self._webhook: Any = None
        self._announced: set[tuple[str, str]] = set()   # (approval id, card) outcomes sent
        self._connected = False

    # --- lifecycle --------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self._connected

    @property
    def webhook_port(self) -> int | None:
        return self._webhook.bound_port if self._webhook else None

    @property
    def intake(self) -> WhatsAppIntake | None:
        return self._intake

    @property
    def followups(self) -> Followups | None:
        return self._followups

    async def start(self) -> None:
        from channels.whatsapp.webhook import WebhookServer

        section = self.config["whatsapp"]
        token, app_secret, verify_token = check_config(self.config)
        graph = graph_for(self.config, token)
        await graph.open()
        try:
            number = await graph.phone_number()   # proves the token and the number id
        except GraphError as exc:
            await graph.close()
            raise ChannelError(f"WhatsApp start-up failed: the Graph API at {section['base_url']} "
                               f"refused the token or phone number id: {exc}") from exc
        self._graph = graph
        self._messenger = Messenger(graph, self.agent.sent,
                                    dict(section["templates"]), section["template_language"],
                                    self._clock)
        self._attachments = Attachments(graph, self.config["media"])
        self._taps = TapHandler(self._messenger, self.agent, self._sink)
        self._followups = Followups(self._messenger, self._held, self.agent,
                                    lambda wa_id: self._sink(wa_id, None))
        self._intake = WhatsAppIntake(self.agent.inbox, graph.phone_number_id, self._handle,
                                      clock=self._clock)
        self._webhook = WebhookServer(
            self._intake.receive, app_secret=app_secret, verify_token=verify_token,
            path=section["webhook_path"], listen=section["listen"], port=section["port"],
            listeners=self._listeners)
        try:
            await self._webhook.start()
        except ChannelError:
            await self.stop()
            raise
        resumed = await self._intake.resume()
        if resumed:
            log.info("whatsapp: %d stored update(s) from before the restart queued", resumed)
        self._intake.start_sweeping()
        self._connected = True
        log.info("whatsapp connected as %s (%s)", number.get("verified_name", "?"),
                 number.get("display_phone_number", "?"))

    async def stop(self) -> None:
        self._connected = False
        if self._webhook is not None:
            await self._webhook.stop()
            self._webhook = None
        if self._intake is not None:
            await self._intake.stop()
            self._intake = None
        if self._own_listeners:
            await self._listeners.close()
        if self._graph is not None:
            await self._graph.close()
            self._graph = None

    # --- sinks (bot.conversation.delivery.Outlet) ----------------------------------------------

    def _sink(self, wa_id: str, inbound: str | None, *, attended: bool = True) -> ChatSink:
        assert self._messenger is not None
        return ChatSink(self._messenger, self.agent, self._held, wa_id, self.settings,
                        inbound=inbound, attended=attended)

    def sink_for(self, chat: str, sender: str) -> ChatSink | None:
        """A sink for a conversation nobody is typing in (a job's run): maybe outside the window."""
        if self._messenger is None or not chat.isdigit():
            return None
        return self._sink(chat, None, attended=False)

    def private_sink_for(self, sender: str) -> ChatSink | None:
        return self.sink_for(Sender.parse(sender).user_id, sender)

    # --- handling stored updates --------------------------------------------------------------

    async def _handle(self, row: InboxRow, payload: dict[str, Any]) -> bool | None:
        assert self._followups is not None
        if "status" in payload:
            await self._followups.on_status(payload["status"])
            return None
        message = payload.get("message")
        if not isinstance(message, dict):
            return None
        try:
            return await self._on_message(row, message, str(payload.get("name") or ""),
                                          _received(payload, self._clock))
        except ShuttingDown:
            return False   # kept for the restart: nobody has to send it again

    async def _on_message(self, row: InboxRow, message: dict[str, Any], name: str,
                          received: float) -> bool | None:
        assert self._messenger is not None and self._taps is not None
        wa_id, inbound = str(message["from"]), str(message.get("id", ""))
        # The window opens when we receive the message, by our clock: the message's own
        # `timestamp` may be old or fixed (Meta's sample payloads) and must not silence us.
        self._messenger.seen(wa_id, received)
        assert self._followups is not None
        await self._followups.deliver_held(wa_id, self._pending_ids)
        tap = tap_of(message)
        if tap is not None:
            reply_id, card = tap
            if await self._taps.approval(wa_id, reply_id, card, inbound):
                return None
            command = self._taps.command(wa_id, reply_id, name, inbound)
            if command is None:
                await self._taps.not_ours(wa_id, card)
                return None
            found = command
        else:
            found = await incoming(message, name, self._messenger)
            if has_attachments(message) and self._attachments is not None:
                attachments = self._attachments   # fetched once the agent admits the sender
                found = dataclasses.replace(found, download=lambda: attachments.parts(message))
        sink = self._sink(wa_id, inbound)
        sink.start_typing()
        try:
            await self.agent.handle(dataclasses.replace(found, inbox_id=row.id), sink)
        except ShuttingDown:
            raise
        except Exception:
            log.exception("whatsapp: handling a message of %s failed", wa_id)
            await self._say(wa_id, sink.tr._(texts.SOMETHING_WRONG))
        finally:
            await sink.close()
        return None

    async def _pending_ids(self, channel: str) -> set[str]:
        return {view.id for view in await self.agent.pending_approvals(channel)}

    async def _say(self, wa_id: str, text: str, reply_to: str | None = None) -> None:
        assert self._messenger is not None
        try:
            await self._messenger.send_part(wa_id, Part(text, text), reply_to=reply_to)
        except (DeliveryError, OutsideWindow):
            log.warning("whatsapp: could not tell %s", wa_id, exc_info=True)

    # --- approvals answered (bot.core.events.ApprovalSurface) ---------------------------------

    async def approval_resolved(self, outcome: ApprovalResolved) -> None:
        """WhatsApp cannot edit the card: the outcome is sent as a reply to it, once per card."""
        shown = approvals.parse_ref(outcome.message_ref)
        if self._messenger is None or shown is None or outcome.choice == "pending" \
                or outcome.resolver == SUPERSEDED:   # the user wrote on; a tap is still answered
            return
        wa_id, card = shown
        key = (outcome.approval.id, card)
        if key in self._announced:
            return
        if len(self._announced) > MAX_ANNOUNCED:
            self._announced.clear()   # a repeat after this is one more reply, never a loss
        self._announced.add(key)
        # A chat is one person's: the card and its outcome are that person's language.
        tr = self.agent.translator(Sender.of(CHANNEL, wa_id))
        line = approvals.outcome_line(outcome.choice, outcome.resolver, outcome.resolved_at, tr)
        if outcome.note:
            line += f"\n{tr.say(outcome.note)}"
        await self._say(wa_id, line, reply_to=card)


def _received(payload: dict[str, Any], clock: Callable[[], float]) -> float:
    """When our webhook received the stored message (now, for a row stored without it)."""
    received = payload.get("received")
    return float(received) if isinstance(received, int | float) and received > 0 else clock()


def create(config: ChannelConfig, agent: AgentAPI, listeners: Listeners | None = None) -> WhatsAppChannel:
    """The channel, not started."""
    return WhatsAppChannel(config, agent, listeners)

