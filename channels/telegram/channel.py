"""The Telegram channel: python-telegram-bot in, agent events out.

    channel = create(config, agent); await channel.start(); ...; await channel.stop()

- The token comes from TELEGRAM_BOT_TOKEN; `[telegram] base_url`/`base_file_url` point at the Bot
  API (a self-hosted server works). A wrong token or an unreachable API is one ChannelError line.
- `mode = "polling"` (default, deleteWebhook + getUpdates) or `"webhook"` (our own aiohttp endpoint,
  secret from TELEGRAM_WEBHOOK_SECRET, checked on every request; see webhook.py).
- The sender is always `telegram:<from.id>` (the user, never the chat). Autonomy, pairing, silence
  for ignored senders and every command are the agent's business: the channel only forwards text.
- In groups listed in `[telegram] groups` the bot answers when mentioned (@name), replied to, or
  sent a command (bare or /cmd@thisbot); in any other group it stays silent. Which messages are
  read, and as what text, is reading.py's; attachments are fetched by media.py.
- Every update is stored in the durable inbox before Telegram is told it arrived (intake.py;
  polling.py advances the getUpdates offset only past stored updates; the webhook answers 200
  only after the insert). Each chat's updates are handled in order, different chats
  concurrently (the inbox's claim, ordering.py); updates stored but never finished run again
  after a restart.
- Bot API requests go through aiohttp (http.py), not PTB's default httpx pool, whose cost
  per request grows with the number of open connections (bench/telegram.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from telegram import Bot, BotCommand, Update
from telegram.error import InvalidToken, NetworkError, TelegramError
from telegram.ext import Application, ApplicationBuilder, CallbackQueryHandler, ContextTypes, MessageHandler
from telegram.ext import filters as tg_filters

from bot.core.approval_cards import ApprovalResolved, parse_message_ref
from bot.core.errors import ChannelError
from bot.core.events import AgentAPI, IncomingMessage
from bot.core.identity import Sender
from bot.core.listeners import Listeners
from bot.core.ports import ChannelConfig
from bot.language.catalogs import N_
from bot.language.names import SUPPORTED
from channels.telegram import buttons
from channels.telegram.approvals import keyboard, outcome_message, request_message
from channels.telegram.batch import redrawn as batch_redrawn
from channels.telegram.http import AiohttpRequest
from channels.telegram.intake import TelegramIntake
from channels.telegram.media import Attachments, has_attachments
from channels.telegram.ordering import InboxProcessor
from channels.telegram.polling import Poller
from channels.telegram.reading import GROUP_TYPES, MessageReader
from channels.telegram.sending import DeliveryError, Messenger
from channels.telegram.sink import ChatSink, SinkSettings, Target
from channels.telegram.taps import INVALID_BUTTON, TapHandler, chat_target, reader_translator

if TYPE_CHECKING:   # the webhook (and aiohttp's server) is imported in webhook mode only
    from channels.telegram.webhook import WebhookServer

log = logging.getLogger(__name__)

WENT_WRONG = N_("⚠️ Something went wrong on my side. Nothing was lost; please try again.")
TOKEN_SHAPE = re.compile(r"^\d{3,20}:[A-Za-z0-9_-]{10,100}$")
ALLOWED_UPDATES = ["message", "callback_query"]
ANOTHER_POLLER = ("another process is already polling Telegram with this bot token (Telegram "
                  "allows one getUpdates consumer): stop it, or run every replica with "
                  "[telegram] mode = \"webhook\" behind a load balancer")


def _token(config: ChannelConfig) -> str:
    token = config.secret("TELEGRAM_BOT_TOKEN")
    if not token:
        raise ChannelError("TELEGRAM_BOT_TOKEN is not set: create a bot with @BotFather and export its token")
    if not TOKEN_SHAPE.match(token):
        raise ChannelError("TELEGRAM_BOT_TOKEN does not look like a bot token (expected 123456:ABC-...)")
    return token


def _start_error(exc: TelegramError, config: ChannelConfig, token: str) -> ChannelError:
    """One clear line for a failed start-up; the token never appears in it."""
    base = config["telegram"]["base_url"]
    if isinstance(exc, InvalidToken):
        return ChannelError("Telegram rejected TELEGRAM_BOT_TOKEN (unauthorized): check the token "
                            "from @BotFather")
    detail = str(exc).replace(token, "[redacted]")
    if isinstance(exc, NetworkError):
        return ChannelError(f"cannot reach the Telegram Bot API at {base}: {detail}")
    return ChannelError(f"Telegram start-up failed: {detail}")


def check_config(config: ChannelConfig) -> tuple[str, str]:
    """What start-up refuses before any network call (`myclaw doctor` runs it too): (token,
    webhook secret or ""), or one ChannelError."""
    token = _token(config)
    tg = config["telegram"]
    if tg["mode"] != "webhook":
        return token, ""
    from channels.telegram.webhook import check_secret_shape  # webhook mode only

    secret = check_secret_shape(config.secret("TELEGRAM_WEBHOOK_SECRET"))
    if not tg["webhook_url"]:
        raise ChannelError("[telegram] mode = \"webhook\" needs webhook_url (the public https URL)")
    return token, secret


async def check_token(config: ChannelConfig) -> str:
    """For `myclaw doctor --telegram`: "@botname" when the token works, else ChannelError."""
    token = _token(config)
    bot = Bot(token, base_url=config["telegram"]["base_url"],
              base_file_url=config["telegram"]["base_file_url"])
    try:
        async with bot:
            return f"@{bot.username}"
    except TelegramError as exc:
        raise _start_error(exc, config, token) from exc


def exclusive_locks(config: ChannelConfig) -> dict[str, str]:
    """What one process at a time may do with this configuration, as {lock name: why another
    process cannot start}: polling, keyed by a hash of the token (the token itself is never
    stored or logged). Webhook mode needs none: any replica may receive any update."""
    if config["telegram"]["mode"] != "polling":
        return {}
    digest = hashlib.sha256(_token(config).encode()).hexdigest()
    return {f"telegram-poller:{digest}": ANOTHER_POLLER}


class TelegramChannel:
    def __init__(self, config: ChannelConfig, agent: AgentAPI, settings: SinkSettings | None = None,
                 listeners: Listeners | None = None):
        self.config = config
        self.agent = agent
        self._listeners = listeners   # the process's shared HTTP listener (webhook mode)
        self.settings = settings or SinkSettings()
        self._groups = frozenset(str(g) for g in config["telegram"]["groups"])
        self._app: Application | None = None
        self._messenger: Messenger | None = None
        self._attachments: Attachments | None = None
        self._taps: TapHandler | None = None
        self._webhook: WebhookServer | None = None
        self._intake: TelegramIntake | None = None
        self._poller: Poller | None = None
        self._reader: MessageReader | None = None
        self._connected = False

    # --- lifecycle --------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self._connected and self._app is not None and self._app.running and (
            self._poller is None or self._poller.running)

    @property
    def application(self) -> Application | None:
        """The python-telegram-bot application (None before start / after stop)."""
        return self._app

    @property
    def webhook_port(self) -> int | None:
        return self._webhook.bound_port if self._webhook else None

    @property
    def active_chat_locks(self) -> int:
        return self._intake.active_chats if self._intake else 0

    async def start(self) -> None:
        tg = self.config["telegram"]
        token, secret = check_config(self.config)
        # No PTB Updater: it confirms fetched updates before they are stored (polling.py).
        app = (ApplicationBuilder().token(token).base_url(tg["base_url"])
               .base_file_url(tg["base_file_url"]).concurrent_updates(InboxProcessor(self._through))
               .request(AiohttpRequest())
               .get_updates_request(AiohttpRequest(connection_pool_size=1))
               .updater(None).build())
        try:
            await app.initialize()   # getMe: proves the token and the API address
        except TelegramError as exc:
            await app.bot.shutdown()  # close the HTTP clients initialize() had opened
            raise _start_error(exc, self.config, token) from exc
        self._app = app
        self._reader = MessageReader(self._groups, app.bot.username, app.bot.id)
        self._messenger = Messenger(app.bot)
        self._attachments = Attachments(app.bot, self.config["media"])
        self._taps = TapHandler(self._messenger, self.agent, self.settings)
        self._intake = TelegramIntake(self.agent.inbox, app, self._order_key)
        self._add_handlers(app)
        try:
            await self._register_commands(app)
            await app.start()
            resumed = await self._intake.resume()   # queued ahead of anything new
            if resumed:
                log.info("telegram: %d stored update(s) from before the restart queued", resumed)
            await self._start_receiving(app, secret)
            self._intake.start_sweeping()
        except ChannelError:
            await self.stop()
            raise
        except TelegramError as exc:
            await self.stop()
            raise _start_error(exc, self.config, token) from exc
        pending = await self.agent.pending_approvals("telegram")
        if pending:
            log.info("telegram: %d approval request(s) still pending; their buttons keep working",
                     len(pending))
        self._connected = self._poller is None or self._poller.running   # a conflict may have come
        log.info("telegram connected as @%s (%s)", app.bot.username, tg["mode"])

    async def _register_commands(self, app: Application) -> None:
        """The command menu in the installation's language, and in each other language for the
        people whose app is set to it (Telegram picks by the user's language_code)."""
        default = self.agent.translator("").language
        await app.bot.set_my_commands(self._menu(default))
        for language in SUPPORTED:
            if language != default:
                await app.bot.set_my_commands(self._menu(language), language_code=language)

    def _menu(self, language: str) -> list[BotCommand]:
        return [BotCommand(name, text[:256])
                for name, text in self.agent.command_descriptions(language)]

    async def _start_receiving(self, app: Application, secret: str) -> None:
        tg = self.config["telegram"]
        assert self._intake is not None
        if tg["mode"] == "polling":
            self._poller = Poller(app.bot, self._intake.receive, allowed_updates=ALLOWED_UPDATES,
                                  on_conflict=self._another_poller)
            await self._poller.start()
            return
        from channels.telegram.webhook import WebhookServer

        self._webhook = WebhookServer(app.bot, self._intake.receive, secret=secret,
                                      path=tg["webhook_path"], listen=tg["listen"], port=tg["port"],
                                      listeners=self._listeners)
        await self._webhook.start()
        await app.bot.set_webhook(url=tg["webhook_url"], secret_token=secret,
                                  allowed_updates=ALLOWED_UPDATES)

    def _another_poller(self) -> None:
        """Telegram cut this poller off for another one (the poller has stopped itself): two
        pollers take turns being cut off, and retrying would only keep the fight going."""
        log.error("telegram: %s", ANOTHER_POLLER)
        self._connected = False

    async def stop(self) -> None:
        self._connected = False
        app, self._app = self._app, None
        if app is None:
            return
        if self._poller is not None:
            await self._poller.stop()
            self._poller = None
        if self._intake is not None:
            await self._intake.stop_sweeping()
        if self._webhook is not None:
            await self._webhook.stop()
            self._webhook = None
        if app.running:
            await app.stop()
        await app.shutdown()

    # --- approvals answered elsewhere (bot.core.events.ApprovalSurface) ----------------------------

    async def approval_resolved(self, outcome: ApprovalResolved) -> None:
        """The request message (chat:message_id, stored when it was sent) shows the outcome and
        loses its buttons, as after a tap."""
        shown = parse_message_ref(outcome.message_ref)
        if self._messenger is None or shown is None:
            return
        chat, message_id = shown
        tr = reader_translator(self.agent, chat, outcome.approval)
        part = outcome_message(outcome.approval, outcome.choice, outcome.resolver,
                               outcome.resolved_at, tr, outcome.note)
        markup = None
        if outcome.batch:
            part, markup = batch_redrawn(outcome, tr)
        elif outcome.choice == "pending":    # still waiting: shown with its buttons again
            part, markup = request_message(outcome.approval, tr), keyboard(outcome.approval, tr)
        try:
            await self._messenger.edit(chat, message_id, part, markup=markup)
        except DeliveryError:
            log.warning("telegram: could not mark approval %s as answered", outcome.approval.id,
                        exc_info=True)

    # --- routing ----------------------------------------------------------------------------

    def _add_handlers(self, app: Application) -> None:
        app.add_handler(MessageHandler(tg_filters.UpdateType.MESSAGE, self._on_message))
        app.add_handler(CallbackQueryHandler(self._on_tap, pattern=r"^a[pb]:"))
        app.add_handler(CallbackQueryHandler(self._on_command_tap, pattern=buttons.PATTERN))
        app.add_handler(CallbackQueryHandler(self._on_unknown_button))
        app.add_error_handler(self._on_error)

    async def _through(self, update: object, coroutine: Any) -> None:
        assert self._intake is not None
        await self._intake.through(update, coroutine)

    def _order_key(self, update: object) -> Hashable | None:
        """Per-chat ordering key; None for taps and /stop, which must not wait for the turn."""
        if not isinstance(update, Update) or update.callback_query is not None:
            return None
        message = update.effective_message
        if message is None:
            return None
        head = (message.text or "").split(maxsplit=1)[0:1]
        if head and head[0].split("@", 1)[0].lower() == "/stop":
            return None
        return message.chat_id

    async def _on_message(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.message
        if message is None or message.from_user is None or message.from_user.is_bot:
            return
        assert self._reader is not None
        incoming = self._reader.incoming(message)
        if incoming is None:
            return
        assert self._messenger is not None and self._intake is not None
        target = Target(chat_id=message.chat_id, user_id=message.from_user.id,
                        reply_to=message.message_id if incoming.is_group else None,
                        is_group=incoming.is_group,
                        thread_id=message.message_thread_id if message.is_topic_message else None)
        sink = ChatSink(self._messenger, self.agent, target, self.settings)
        sink.start_typing()
        try:
            if self._attachments is not None and has_attachments(message):
                attachments = self._attachments     # fetched by the agent once it admits the sender
                incoming = dataclasses.replace(incoming, download=lambda: attachments.parts(message))
            await self._intake.hand_over(self.agent, update, incoming, sink)
        finally:
            await sink.close()

    async def _on_tap(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert self._taps is not None and update.callback_query is not None
        await self._taps.handle(update.callback_query)

    async def _on_command_tap(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A command button: the command runs as a message from whoever tapped, in that chat."""
        query = update.callback_query
        assert query is not None and self._messenger is not None
        command = buttons.command_of(query.data)
        message = query.message
        if command is None or message is None:
            tr = self.agent.translator(Sender.of("telegram", query.from_user.id))
            await query.answer(tr._(INVALID_BUTTON))
            return
        await query.answer()
        chat = message.chat
        is_group = chat.type in GROUP_TYPES
        if is_group and str(chat.id) not in self._groups:
            return
        assert self._intake is not None
        incoming = IncomingMessage(sender=Sender.of("telegram", query.from_user.id), chat=str(chat.id),
                                   text=command, channel="telegram", is_group=is_group,
                                   display_name=query.from_user.full_name,
                                   language_hint=query.from_user.language_code or "")
        sink = ChatSink(self._messenger, self.agent,
                        Target(chat.id, query.from_user.id, None, is_group), self.settings)
        try:
            await self._intake.hand_over(self.agent, update, incoming, sink)
        finally:
            await sink.close()

    def private_sink_for(self, sender: str) -> ChatSink | None:
        """A user's private chat with the bot has the user's id."""
        return self.sink_for(Sender.parse(sender).user_id, sender)

    def sink_for(self, chat: str, sender: str) -> ChatSink | None:
        """A sink posting into `chat` for a conversation nobody is typing in (a job's run)."""
        if self._messenger is None or not chat.lstrip("-").isdigit():
            return None
        return ChatSink(self._messenger, self.agent, chat_target(chat, sender), self.settings)

    async def _on_unknown_button(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        query = update.callback_query
        if query is not None:
            await query.answer(self.agent.translator(Sender.of("telegram", query.from_user.id))
                               ._(INVALID_BUTTON))

    async def _on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        log.error("telegram: handling an update failed", exc_info=context.error)
        chat = update.effective_chat if isinstance(update, Update) else None
        # Only where the bot may speak at all: never reveal itself in an unlisted group.
        if chat is not None and self._messenger is not None and (
                chat.type == "private" or str(chat.id) in self._groups):
            user = update.effective_user if isinstance(update, Update) else None
            tr = self.agent.translator(Sender.of("telegram", user.id) if user else "",
                                       (user.language_code or "") if user else "")
            line = tr._(WENT_WRONG)
            try:
                await self._messenger.bot.send_message(chat.id, line)
            except TelegramError:
                log.warning("telegram: could not tell chat %s about the failure", chat.id, exc_info=True)


def create(config: ChannelConfig, agent: AgentAPI, listeners: Listeners | None = None) -> TelegramChannel:
    """The channel, not started (App holds its `exclusive_locks` first)."""
    return TelegramChannel(config, agent, listeners=listeners)
