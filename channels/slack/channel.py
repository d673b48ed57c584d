"""The Slack channel: slack-bolt (async) in, agent events out.

    channel = create(config, agent); await channel.start(); ...; await channel.stop()

- Tokens from SLACK_BOT_TOKEN (`xoxb-…`) and, for Socket Mode (`[slack] mode = "socket"`, the
  default), SLACK_APP_TOKEN (`xapp-…`); for the Events API (`mode = "events"`, replicas behind
  a proxy) SLACK_SIGNING_SECRET. `[slack] base_url` is the Web API (Socket Mode's URL comes from
  `apps.connections.open` there). `auth.test` proves the token at start and names the bot and
  its workspace, which must be `[slack] team_id` when that is set.
- Every envelope goes through the durable inbox before it is acknowledged (intake.py), then
  through Bolt's listeners (`async_dispatch`, run to the end before the row is marked done):
  messages (reading.py), approval taps routed by action id pattern (taps.py), command buttons,
  the slash command. Ordering per conversation and the one-turn-at-a-time rule are the inbox's.
- The sender is `slack:<user id>`; the levels of `[slack] groups` (user groups) arrive as the
  message's roles (groups.py). Commands, pairing and silence for ignored senders are the
  agent's: the channel only translates.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.core.approval_cards import ApprovalResolved
from bot.core.errors import ChannelError, ShuttingDown
from bot.core.events import AgentAPI
from bot.core.identity import Sender
from bot.core.listeners import Listeners
from bot.core.ports import ChannelConfig
from bot.language.translator import Translator
from channels.slack import texts
from channels.slack.approvals import outcome_card, parse_ref, reader_of, request_card
from channels.slack.batch import redrawn as batch_redrawn
from channels.slack.events import EventsServer
from channels.slack.groups import UserGroups
from channels.slack.intake import RowState, SlackIntake
from channels.slack.live import Streaming
from channels.slack.locales import UserLocales
from channels.slack.media import Files
from channels.slack.reading import Reader, Reading, Threads, parse_chat
from channels.slack.sending import DeliveryError, Poster, error_code, web_client
from channels.slack.sink import COMMAND_PREFIX, SinkSettings, SlackSink, Target
from channels.slack.socket_mode import SocketReceiver
from channels.slack.taps import TapHandler

log = logging.getLogger(__name__)

CHANNEL = "slack"
BARE_MENTION = "/help"
STATE = "myclaw_row"     # the Bolt context key carrying the inbox row's state


def tokens(config: ChannelConfig) -> tuple[str, str]:
    """(bot token, the mode's second secret), or one clear ChannelError."""
    mode = config["slack"]["mode"]
    bot = config.secret("SLACK_BOT_TOKEN") or ""
    if not bot.startswith("xoxb-"):
        raise ChannelError("SLACK_BOT_TOKEN is not set or is not a bot token (xoxb-…): copy it "
                           "from the app's OAuth & Permissions page")
    if mode == "socket":
        second = config.secret("SLACK_APP_TOKEN") or ""
        if not second.startswith("xapp-"):
            raise ChannelError("SLACK_APP_TOKEN is not set or is not an app-level token (xapp-…): "
                               "create one with connections:write under Basic Information")
    else:
        second = config.secret("SLACK_SIGNING_SECRET") or ""
        if not second:
            raise ChannelError("[slack] mode = \"events\" needs SLACK_SIGNING_SECRET (Basic "
                               "Information → App Credentials)")
    return bot, second


def exclusive_locks(config: ChannelConfig) -> dict[str, str]:
    """None: Slack spreads envelopes over every Socket Mode connection (up to ten) and every
    replica behind the Events URL; the inbox runs each once."""
    return {}


def create(config: ChannelConfig, agent: AgentAPI, listeners: Listeners | None = None) -> SlackChannel:
    """The channel, not started; `listeners` is the process's shared HTTP listener (the Events
    API is a route on it)."""
    return SlackChannel(config, agent, listeners)


class SlackChannel:
    def __init__(self, config: ChannelConfig, agent: AgentAPI, listeners: Listeners | None = None,
                 settings: SinkSettings | None = None):
        self.config = config
        self.agent = agent
        self.settings = settings or SinkSettings()
        self._own_listeners = listeners is None
        self._listeners = listeners or Listeners()
        section = config["slack"]
        self._channels = frozenset(str(c) for c in section["channels"])
        self.streaming = Streaming(enabled=bool(section["streaming"]))
        self.intake = SlackIntake(agent.inbox, self._dispatch)
        self._poster: Poster | None = None
        self._reader: Reader | None = None
        self._taps: TapHandler | None = None
        self._files: Files | None = None
        self._groups: UserGroups | None = None
        self._locales: UserLocales | None = None
        self._bolt: AsyncApp | None = None
        self._socket: SocketReceiver | None = None
        self._events: EventsServer | None = None
        self.team_id = ""
        self.bot_user = ""
        self._connected = False

    @property
    def connected(self) -> bool:
        return self._connected

    @property
    def events_port(self) -> int | None:
        return self._events.bound_port if self._events else None

    # --- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        section = self.config["slack"]
        bot_token, second = tokens(self.config)
        client = web_client(bot_token, section["base_url"])
        try:
            await self._identify(client)
        except BaseException:
            await client.session.close()
            raise
        self._build(client, bot_token)
        try:
            resumed = await self.intake.resume()
            if resumed:
                log.info("slack: %d stored envelope(s) from before the restart queued", resumed)
            await self._start_receiving(client, second)
            self.intake.start_sweeping()
        except BaseException:
            await self.stop()
            raise
        self._connected = True
        log.info("slack connected as <@%s> in %s (%s)", self.bot_user, self.team_id, section["mode"])

    async def _identify(self, client: Any) -> None:
        """auth.test: the token works, and names the bot and its workspace."""
        section = self.config["slack"]
        try:
            me = await client.auth_test()
        except SlackApiError as exc:
            raise ChannelError(f"Slack refused SLACK_BOT_TOKEN ({error_code(exc)})") from exc
        except (SlackClientError, OSError) as exc:
            raise ChannelError(f"cannot reach the Slack Web API at {section['base_url']}: "
                               f"{type(exc).__name__}") from exc
        self.team_id, self.bot_user = str(me.get("team_id", "")), str(me.get("user_id", ""))
        if section["team_id"] and section["team_id"] != self.team_id:
            raise ChannelError(f"SLACK_BOT_TOKEN belongs to workspace {self.team_id}, not "
                               f"[slack] team_id = {section['team_id']!r}")

    def _build(self, client: Any, bot_token: str) -> None:
        section = self.config["slack"]
        self._poster = Poster(client)
        self._reader = Reader(team_id=self.team_id, bot_user=self.bot_user,
                              channels=self._channels, threads=Threads(client, self.bot_user))
        self._taps = TapHandler(self._poster, self.agent, self._sink, self.team_id, self._channels)
        self._files = Files(bot_token, section["base_url"], self.config["media"])
        if section["groups"]:
            self._groups = UserGroups(client, section["groups"])
        if section["locale_hint"]:
            self._locales = UserLocales(client)
        bolt = AsyncApp(client=client, process_before_response=True,
                        request_verification_enabled=False, url_verification_enabled=False,
                        ssl_check_enabled=False)
        bolt.event("message")(self._on_message)
        bolt.action(re.compile(r"^a[pb]:"))(self._on_approval_tap)
        bolt.action(re.compile(rf"^{COMMAND_PREFIX}\d+$"))(self._on_command_tap)
        if section["slash_command"]:
            bolt.command(section["slash_command"])(self._on_slash_command)
        bolt.error(self._on_error)
        self._bolt = bolt

    async def _start_receiving(self, client: Any, second: str) -> None:
        section = self.config["slack"]
        if section["mode"] == "socket":
            self._socket = SocketReceiver(second, client, self.intake.receive)
            await self._socket.start()
            return
        self._events = EventsServer(self.intake.receive, signing_secret=second,
                                    path=section["webhook_path"], listen=section["listen"],
                                    port=section["port"], listeners=self._listeners)
        await self._events.start()

    async def stop(self) -> None:
        self._connected = False
        socket, self._socket = self._socket, None
        if socket is not None:
            await socket.stop()
        events, self._events = self._events, None
        if events is not None:
            await events.stop()
        if self._own_listeners:
            await self._listeners.close()
        await self.intake.stop()
        poster, self._poster = self._poster, None
        if poster is not None and poster.client.session is not None:
            await poster.client.session.close()

    # --- envelopes --------------------------------------------------------------------------

    async def _dispatch(self, kind: str, body: dict[str, Any], state: RowState) -> None:
        bolt = self._bolt
        if bolt is None:
            state.left = True    # stopping: the row stays for the next start
            return
        await bolt.async_dispatch(AsyncBoltRequest(body=body, mode="socket_mode",
                                                   context={STATE: state}))

    async def _on_message(self, body: dict[str, Any], event: dict[str, Any], ack: AsyncAck,
                          context: dict[str, Any]) -> None:
        await ack()
        assert self._reader is not None
        reading = await self._reader.read(body, event)
        if reading is not None:
            await self._answer(reading, context[STATE])

    async def _answer(self, reading: Reading, state: RowState) -> None:
        message = reading.message
        if not message.text and not reading.files:
            message = dataclasses.replace(message, text=BARE_MENTION)
        user = reading.target.user_id
        roles = await self._groups.of(user) if self._groups else ()
        hint = await self._locales.of(user) if self._locales else ""
        files, fetch = reading.files, self._files
        message = dataclasses.replace(
            message, roles=roles, inbox_id=state.row_id, language_hint=hint,
            # Fetched by the agent once it admits the sender: a stranger's file is never read.
            download=(lambda: fetch.parts(files)) if files and fetch is not None else None)
        sink = self._sink(reading.target)
        try:
            await self.agent.handle(message, sink)
        except ShuttingDown:
            state.left = True
        except Exception:
            log.exception("slack: handling a message failed")
            await sink.emit_line(sink.tr._(texts.SOMETHING_WENT_WRONG))
        finally:
            await sink.close()

    async def _on_approval_tap(self, body: dict[str, Any], ack: AsyncAck) -> None:
        await ack()
        assert self._taps is not None
        await self._taps.approval(body)

    async def _on_command_tap(self, body: dict[str, Any], ack: AsyncAck,
                              context: dict[str, Any]) -> None:
        await ack()
        assert self._taps is not None
        await self._taps.command(body, context[STATE].row_id)

    async def _on_slash_command(self, body: dict[str, Any], ack: AsyncAck,
                                context: dict[str, Any]) -> None:
        """`/myclaw new` is `/new`, typed by that user; answered in the user's DM (a slash
        command carries no thread, and its answer is for the user alone)."""
        await ack()
        assert self._poster is not None and self._reader is not None
        user, team = str(body.get("user_id", "")), body.get("team_id")
        if not user or not self._reader.same_team(team) or not team:
            return
        words = str(body.get("text") or "").strip()
        event = {"type": "message", "channel_type": "im", "user": user, "text": "",
                 "ts": str(body.get("trigger_id", "")), "team": team}
        try:
            dm = await self._poster.dm(user)
        except DeliveryError:
            log.warning("slack: cannot open a DM with %s for a slash command", user)
            return
        reading = await self._reader.read({"team_id": team}, {**event, "channel": dm})
        if reading is not None:
            text = f"/{words.lstrip('/')}" if words else BARE_MENTION
            reading = dataclasses.replace(reading, message=dataclasses.replace(
                reading.message, text=text, message_id=None))
            await self._answer(reading, context[STATE])

    async def _on_error(self, error: Exception, body: dict[str, Any]) -> None:
        log.error("slack: a listener failed", exc_info=error)

    # --- sinks and outlets ------------------------------------------------------------------

    def _sink(self, target: Target, *, dm_user: str = "") -> SlackSink:
        assert self._poster is not None
        return SlackSink(self._poster, self.agent, target, self.settings, self.streaming,
                         dm_user=dm_user)

    def private_sink_for(self, sender: str) -> SlackSink | None:
        """The user's DM with the bot (opened when the first message goes out)."""
        channel, _, user = sender.partition(":")
        if self._poster is None or channel != CHANNEL or not user:
            return None
        return self._sink(Target("", None, user_id=user, team_id=self.team_id), dm_user=user)

    def sink_for(self, chat: str, sender: str) -> SlackSink | None:
        """A sink posting into `chat` (a DM or a thread) for a conversation nobody is typing
        in (a job's run, an approval answered elsewhere)."""
        where = parse_chat(chat)
        if self._poster is None or where is None:
            return None
        user = sender.partition(":")[2] if sender.startswith(f"{CHANNEL}:") else ""
        return self._sink(Target(where[0], where[1], user_id=user, team_id=self.team_id,
                                 is_group=not where[0].startswith("D")))

    async def approval_resolved(self, outcome: ApprovalResolved) -> None:
        """Every message showing the request shows the outcome, without the buttons answered
        (bot.core.events.ApprovalSurface)."""
        shown = parse_ref(outcome.message_ref)
        if self._poster is None or shown is None:
            return
        tr = self._reader_of(outcome)
        if outcome.batch:
            blocks, part = batch_redrawn(outcome, tr)
        elif outcome.choice == "pending":   # a restart: the card with its buttons again
            card = request_card(outcome.approval, tr)
            blocks, part = card.blocks, card.part
        else:
            blocks, part = outcome_card(outcome.approval, outcome.choice, outcome.resolver,
                                        outcome.resolved_at, tr, outcome.note)
        try:
            await self._poster.update(shown[0], shown[1], part, blocks=blocks)
        except DeliveryError:
            log.warning("slack: could not mark approval %s as answered", outcome.approval.id,
                        exc_info=True)

    def _reader_of(self, outcome: ApprovalResolved) -> Translator:
        """Whose words a copy of a request is redrawn in: the reader stored with it (the
        requester, or the approver whose DM it is), else the requester."""
        reader = reader_of(outcome.message_ref)
        return self.agent.translator(Sender.of(CHANNEL, reader) if reader
                                     else outcome.approval.sender)
