"""The Discord channel: DMs, mentions in configured guilds, slash commands, approval buttons.

Who is talking: the sender is `discord:<user id>`. In a DM the bot always listens; in a guild
listed in `[discord] guilds` it answers only when mentioned (or replied to) and passes the
member's role names so the agent can map them to an autonomy level (`[discord] roles`); in any
other guild it stays silent. Other bots are ignored. Everything channel-agnostic (commands,
pairing, undo, stop) is the agent's: this module only translates.

`create(config, agent)` returns a `DiscordChannel`; `start()` logs in, syncs the slash commands,
connects to the gateway and returns once READY (or raises `ChannelError` with one line). The
client, its intents, login, readiness and the split of the bot by shard across replicas (with
`exclusive_locks`, one lock per shard served) are gateway.py's. Approvals and sessions live in the
shared store: a tap reaching any replica resolves the request once and continues the conversation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Iterator
from typing import Any

import aiohttp
import discord
from discord import app_commands

from bot.core.approval_cards import ApprovalResolved, ApprovalView, parse_message_ref
from bot.core.errors import ChannelError
from bot.core.events import AgentAPI, IncomingMessage
from bot.core.identity import Sender
from bot.core.ports import ChannelConfig
from bot.language.catalogs import N_
from bot.language.translator import Translator
from channels.discord.approvals import (
    ApprovalDesk,
    arm,
    buttons_for,
    discord_user_id,
    label_for,
    outcome_text,
)
from channels.discord.batch import redrawn as batch_redrawn
from channels.discord.gateway import (
    CommandWords,
    MyclawClient,
    log_connection_end,
    login,
    new_client,
    sync_commands,
    wait_until_ready,
)
from channels.discord.intake import DiscordIntake
from channels.discord.live import StreamSettings
from channels.discord.media import attachment_parts
from channels.discord.sink import ChannelOutlet, DirectOutlet, InteractionOutlet, TurnSink

log = logging.getLogger(__name__)

STOP_TIMEOUT = 10.0
SLASH_COMMANDS = {   # name -> description when the agent offers none
    "whoami": "Who you are to the bot: sender id, autonomy level, tools",
    "tools": "The tools you can use",
    "new": "Start a fresh conversation",
    "stop": "Cancel the running turn",
    "undo": "Revert the last revertible action",
    "usage": "Your model spend today and this month",
}
FORWARDED_BY = "someone else (forwarded on Discord)"
STICKER_ONLY = "[the user sent a sticker without text; this channel cannot show stickers]"
NOT_HERE = N_("I don't answer in this server.")


# A bot token is three base64url parts: the bot's id, a timestamp, an HMAC. Only the shape is
# checked (the lengths loosely, as Discord has lengthened the last part before); the gateway
# says whether Discord accepts it.
TOKEN_SHAPE = re.compile(r"^[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{16,}$")


def create(config: ChannelConfig, agent: AgentAPI, listeners: object = None) -> DiscordChannel:
    """The channel, not started (`listeners`: unused, Discord's gateway needs no HTTP listener)."""
    return DiscordChannel(config, agent)


def check_config(config: ChannelConfig) -> str:
    """What start-up refuses before any network call (`myclaw doctor` runs it too): the token,
    or one ChannelError."""
    token = config.secret("DISCORD_BOT_TOKEN")
    if not token:
        raise ChannelError("Discord: DISCORD_BOT_TOKEN is not set")
    if any(c.isspace() for c in token):
        raise ChannelError("DISCORD_BOT_TOKEN contains spaces: copy it again from the Developer "
                           "Portal (Bot → Reset Token)")
    if not TOKEN_SHAPE.match(token):
        # Never shown back: the value may be a real secret pasted into the wrong variable.
        raise ChannelError("DISCORD_BOT_TOKEN does not look like a bot token (expected three "
                           "parts separated by dots, like MTA1….GhX2qN.abc…; the application "
                           "id, public key and client secret are not it): copy it again from "
                           "the Developer Portal (Bot → Reset Token)")
    return token


class DiscordChannel:
    def __init__(self, config: ChannelConfig, agent: AgentAPI, stream: StreamSettings | None = None):
        section = config["discord"]
        self.config = config
        self.agent = agent
        self.guilds = frozenset(str(g) for g in section["guilds"])
        self.approvals_in_dm = bool(section["approvals_in_dm"])
        self.stream = stream or StreamSettings()   # how answers are streamed (tests: a clock)
        self.desk = ApprovalDesk(agent, self.approvals_in_dm, self.stream)
        self.intake = DiscordIntake(agent.inbox)
        self.client: MyclawClient | None = None
        self._connection: asyncio.Task[None] | None = None
        self._handlers: set[asyncio.Task[Any]] = set()    # turns being handled right now

    @contextlib.contextmanager
    def in_flight(self) -> Iterator[None]:
        """Track the running handler so `stop()` can let it finish before disconnecting."""
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        try:
            yield
        finally:
            self._handlers.discard(task)

    @property
    def connected(self) -> bool:
        client = self.client
        return client is not None and client.is_ready() and not client.is_closed()

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        token = check_config(self.config)
        client = new_client(self, self.desk, self.config)
        self.client = client
        tree = self._command_tree(client)
        try:
            await self.desk.load_pending()
            await login(client, token)
            await tree.set_translator(CommandWords(self.agent.command_descriptions,
                                                   self.agent.translator("").language))
            await sync_commands(tree)
            self._connection = asyncio.create_task(client.connect(reconnect=True), name="discord-gateway")
            await wait_until_ready(client, self._connection)
        except BaseException:
            await self.stop()
            raise
        self._connection.add_done_callback(log_connection_end)
        log.info("discord: connected as %s (%s)", client.user, client.user.id if client.user else "?")
        await self._resume(client)

    async def _resume(self, client: discord.Client) -> None:
        """Answer, oldest first, the messages an earlier run stored but did not finish."""
        for message, run in await self.intake.resume(client):
            text = self._text_for(message) or ""
            task = asyncio.create_task(run(lambda inbox_id, m=message, t=text: self._answer(m, t, inbox_id)))
            self._handlers.add(task)
            task.add_done_callback(self._handlers.discard)

    async def stop(self) -> None:
        """Let turns in progress finish (up to STOP_TIMEOUT), then disconnect."""
        client, connection = self.client, self._connection
        self._connection = None
        running = {t for t in self._handlers if t is not asyncio.current_task()}
        if running:
            _, late = await asyncio.wait(running, timeout=STOP_TIMEOUT)
            if late:
                log.warning("discord: stopping with %d turn(s) still running", len(late))
        if client is not None and not client.is_closed():
            await client.close()
        if connection is not None and not connection.done():
            try:
                await asyncio.wait_for(connection, STOP_TIMEOUT)
            except (TimeoutError, discord.DiscordException, OSError, aiohttp.ClientError):
                log.warning("discord: the gateway did not close cleanly", exc_info=True)

    # --- slash commands -----------------------------------------------------------------------

    def _command_tree(self, client: discord.Client) -> app_commands.CommandTree:
        tree = app_commands.CommandTree(client)
        offered = {name.lstrip("/"): text for name, text in self.agent.command_descriptions()}
        for name, fallback in SLASH_COMMANDS.items():
            description = (offered.get(name) or fallback)[:100]
            tree.add_command(app_commands.Command(
                name=name, description=app_commands.locale_str(description, command=name),
                callback=self._slash_callback(name)))
        return tree

    def _slash_callback(self, name: str) -> Any:
        async def run(interaction: discord.Interaction) -> None:
            with self.in_flight():
                await self.on_slash_command(interaction, name)
        return run

    async def on_slash_command(self, interaction: discord.Interaction, name: str) -> None:
        await self.on_command_tap(interaction, f"/{name}")

    async def on_command_tap(self, interaction: discord.Interaction, command: str) -> None:
        """A slash command or a command button: the command runs as a message from whoever
        used it, answered to them alone."""
        if interaction.guild_id is not None and str(interaction.guild_id) not in self.guilds:
            tr = self.agent.translator(Sender.of("discord", interaction.user.id),
                                       str(interaction.locale or ""))
            await interaction.response.send_message(tr._(NOT_HERE), ephemeral=True)
            return
        await self.intake.interaction(
            interaction.id, lambda _: self._run_command(interaction, command))

    async def _run_command(self, interaction: discord.Interaction, command: str) -> None:
        # Not linked to its inbox row: an interaction is never run again after a restart, so
        # the agent's "send that again" on shutdown is the right answer for it.
        await interaction.response.defer(ephemeral=True, thinking=True)
        user = interaction.user
        channel = interaction.channel or interaction.client.get_partial_messageable(interaction.channel_id)
        in_guild = interaction.guild_id is not None
        fallback = ChannelOutlet(interaction.client, channel, user.id, in_guild=in_guild,
                                 approvals_in_dm=self.approvals_in_dm)
        sink = TurnSink(InteractionOutlet(interaction, fallback), self.desk, self.stream)
        await self.agent.handle(IncomingMessage(
            sender=Sender.of("discord", user.id), chat=str(channel.id), text=command, channel="discord",
            message_id=str(interaction.id), roles=_role_names(user), is_group=in_guild,
            display_name=user.display_name,
            language_hint=str(interaction.locale or interaction.guild_locale or "")), sink)
        if not sink.emitted:     # the agent stayed silent (an ignored sender): drop "thinking…"
            try:
                await interaction.delete_original_response()
            except discord.HTTPException:
                log.warning("discord: could not remove a deferred reply", exc_info=True)

    def private_sink_for(self, sender: str) -> TurnSink | None:
        """A DM to the user (opened when the first message is sent)."""
        client = self.client
        user = discord_user_id(sender)
        if client is None or user is None:
            return None
        return TurnSink(DirectOutlet(client, user), self.desk, self.stream)

    def sink_for(self, chat: str, sender: str) -> TurnSink | None:
        """A sink posting into channel `chat` for a conversation nobody is typing in (a job)."""
        client = self.client
        user = discord_user_id(sender)
        if client is None or not chat.isdigit() or user is None:
            return None
        channel = client.get_channel(int(chat)) or client.get_partial_messageable(int(chat))
        in_guild = isinstance(channel, discord.abc.GuildChannel)
        return TurnSink(ChannelOutlet(client, channel, user, in_guild=in_guild,
                                      approvals_in_dm=self.approvals_in_dm), self.desk, self.stream)

    def _reader_of(self, channel: Any, approval: ApprovalView) -> Translator:
        """Who reads a request message: the requester in the chat of the request, else the
        approver whose DM copy it is."""
        recipient = getattr(channel, "recipient", None)
        if str(getattr(channel, "id", "")) != approval.chat and recipient is not None:
            return self.agent.translator(Sender.of("discord", recipient.id))
        return self.agent.translator(approval.sender)

    async def approval_resolved(self, outcome: ApprovalResolved) -> None:
        """An approval answered elsewhere (the web console) or expired: its request message
        shows the outcome and loses its buttons, as after a click (bot.core.events.ApprovalSurface)."""
        client = self.client
        shown = parse_message_ref(outcome.message_ref)
        if client is None or shown is None:
            return
        chat, message_id = shown
        channel = client.get_channel(chat) or client.get_partial_messageable(chat)
        if outcome.choice == "pending" and not outcome.batch:   # a restart: its buttons again
            await arm(channel.get_partial_message(message_id),
                      buttons_for(outcome.approval, self._reader_of(channel, outcome.approval)))
            return
        status = {"deny": "denied", "expire": "expired"}.get(outcome.choice, "approved")
        resolver = None if outcome.choice == "expire" else outcome.resolver
        tr = self._reader_of(channel, outcome.approval)
        label = label_for(status, outcome.resolver, tr, always=outcome.choice == "always")
        text = outcome_text(outcome.approval, label, resolver, tr, outcome.resolved_at)
        if outcome.note:
            text += f"\n{tr.say(outcome.note)}"
        view = None
        if outcome.batch:
            text, view = batch_redrawn(outcome, tr)
        try:
            await channel.get_partial_message(message_id).edit(
                content=text[:2000], view=view, allowed_mentions=discord.AllowedMentions.none())
        except discord.HTTPException:
            log.warning("discord: could not mark approval %s as answered", outcome.approval.id,
                        exc_info=True)

    # --- messages -----------------------------------------------------------------------------

    async def on_message(self, message: discord.Message) -> None:
        text = self._text_for(message)
        if text is not None:
            await self.intake.message(message.channel.id, message.id,
                                      lambda inbox_id: self._answer(message, text, inbox_id))

    def _text_for(self, message: discord.Message) -> str | None:
        """What the agent is to read, or None when the bot must stay silent."""
        client = self.client
        # A bot's message, or a webhook's (which names itself as it likes), is nobody's request.
        if client is None or client.user is None or message.author.bot \
                or message.webhook_id is not None:
            return None
        me = client.user
        if message.guild is not None:
            if str(message.guild.id) not in self.guilds or not _addressed_to(message, me):
                return None
        text = _strip_mentions(message.content, me.id, message)
        if not text and message.message_snapshots:   # a forward: its words, as someone else's
            text = message.message_snapshots[0].content
        if not text and not _attachments(message):
            # A bare mention asks what the bot can do; a sticker alone is described, so the
            # agent still decides (pairing, silence for ignored senders) and the model can answer.
            text = STICKER_ONLY if message.stickers else "/help"
        return text

    async def _answer(self, message: discord.Message, text: str, inbox_id: int | None) -> None:
        client = self.client
        assert client is not None
        in_guild = message.guild is not None
        outlet = ChannelOutlet(client, message.channel, message.author.id, in_guild=in_guild,
                               approvals_in_dm=self.approvals_in_dm,
                               reply_to=message.to_reference(fail_if_not_exists=False) if in_guild else None)
        media = self.config["media"]
        attachments = _attachments(message)
        quoted, quoted_from = _quoted(message, self.client.user.id if self.client and
                                      self.client.user else 0)
        async with outlet.typing():
            incoming = IncomingMessage(
                sender=Sender.of("discord", message.author.id), chat=str(message.channel.id),
                text=text, channel="discord", message_id=str(message.id),
                roles=_role_names(message.author), is_group=in_guild,
                display_name=message.author.display_name, inbox_id=inbox_id,
                forwarded_from=FORWARDED_BY if message.message_snapshots else "",
                quoted=quoted, quoted_from=quoted_from,
                # A message carries no locale of its author's; the server's is the hint.
                language_hint=str(message.guild.preferred_locale) if message.guild else "",
                # Fetched by the agent once it admits the sender: a stranger's file is never read.
                download=(lambda: attachment_parts(attachments, media))
                if attachments else None)
            await self.agent.handle(incoming, TurnSink(outlet, self.desk, self.stream))


def _attachments(message: discord.Message) -> list[discord.Attachment]:
    """The files of a message, or of the message it forwards."""
    if message.attachments or not message.message_snapshots:
        return list(message.attachments)
    return list(message.message_snapshots[0].attachments)


def _quoted(message: discord.Message, bot_id: int) -> tuple[str, str]:
    """The words of the message this one replies to, and their author: data for context
    (nothing for a reply to the bot, whose words are in the history already)."""
    reference = message.reference
    replied = reference.resolved if reference is not None else None
    if not isinstance(replied, discord.Message) or replied.author.id == bot_id:
        return "", ""
    return replied.content, str(Sender.of("discord", replied.author.id))


def _addressed_to(message: discord.Message, me: discord.ClientUser) -> bool:
    """Mentioned by user mention or by the bot's own managed role, or replied to."""
    if any(user.id == me.id for user in message.mentions):
        return True
    if any(role.tags is not None and role.tags.bot_id == me.id for role in message.role_mentions):
        return True
    reference = message.reference
    replied = reference.resolved if reference is not None else None
    return isinstance(replied, discord.Message) and replied.author.id == me.id


def _strip_mentions(content: str, bot_id: int, message: discord.Message) -> str:
    ids = [str(bot_id)] + [str(r.id) for r in message.role_mentions
                           if r.tags is not None and r.tags.bot_id == bot_id]
    pattern = r"<@[!&]?(?:" + "|".join(ids) + r")>"
    return re.sub(pattern, " ", content).strip()


def _role_names(user: discord.abc.User) -> tuple[str, ...]:
    roles = getattr(user, "roles", None) or []
    return tuple(role.name for role in roles if not role.is_default())
