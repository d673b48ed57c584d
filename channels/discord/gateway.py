"""Connecting to Discord: the client, the intents it asks for, shards, login and the gateway.

`new_client` builds the discord.py client the channel (channel.py) drives: one gateway
connection, or, when `[discord] shard_count` is set, discord.py's AutoShardedClient over the
shards this process serves (`shard_ids`, default all). Discord sends each guild's events to one
shard (DMs to shard 0), so each guild is served by the one replica holding its shard;
`exclusive_locks` names one lock per shard served, so two replicas never serve the same shard.

Start-up failures (a refused token, an unreachable API, a missing privileged intent, a gateway
that never becomes ready) become one `ChannelError` line; slash commands that cannot be synced
only leave a warning.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from contextlib import AbstractContextManager
from typing import Any, Protocol

import aiohttp
import discord
from discord import app_commands

from bot.core.errors import ChannelError
from bot.core.ports import ChannelConfig
from bot.language.names import supported
from channels.discord.approvals import ApprovalButton, ApprovalDesk
from channels.discord.batch import BatchButton
from channels.discord.buttons import CommandButton

log = logging.getLogger(__name__)


class DiscordChannel(Protocol):
    """The channel the client forwards to (`channels.discord.channel.DiscordChannel`)."""

    def in_flight(self) -> AbstractContextManager[None]: ...

    async def on_message(self, message: discord.Message) -> None: ...

    async def on_command_tap(self, *args: Any, **kwargs: Any) -> Any: ...

READY_TIMEOUT = 60.0


def shards(config: ChannelConfig) -> tuple[int, tuple[int, ...]]:
    """(shards in all, the ones this process serves); (0, ()) when the bot is not sharded."""
    section = config["discord"]
    count = int(section["shard_count"])
    return count, tuple(section["shard_ids"]) or tuple(range(count))


def exclusive_locks(config: ChannelConfig) -> dict[str, str]:
    """One lock per shard this process serves ({name: why another process cannot start}),
    keyed by a hash of the token (never the token); unsharded counts as shard 0 of 1."""
    token = config.secret("DISCORD_BOT_TOKEN") or ""
    digest = hashlib.sha256(token.encode()).hexdigest()
    count, ids = shards(config)
    count, ids = (count, ids) if count else (1, (0,))
    return {f"discord-shard:{digest}:{count}:{i}":
            f"another process already serves Discord shard {i} of {count} with this bot token: "
            "give each replica its own [discord] shard_ids (the same shard_count everywhere)"
            for i in ids}


def intents() -> discord.Intents:
    """Only what is used: guild metadata (roles), guild and DM messages, and their text."""
    wanted = discord.Intents.none()
    wanted.guilds = True
    wanted.guild_messages = True
    wanted.dm_messages = True
    wanted.message_content = True     # privileged: replies to the bot that do not ping it need it
    return wanted


class _VoiceNotUsed(logging.Filter):
    """discord.py warns at every start that PyNaCl and davey (voice support) are missing; myclaw
    never joins voice, so those two lines are noise. Only they are dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().endswith("is not installed, voice will NOT be supported")


_VOICE_NOT_USED = _VoiceNotUsed()


class MyclawClient(discord.Client):
    """A discord.py client that forwards messages to the channel and knows the approval desk."""

    def __init__(self, channel: DiscordChannel, desk: ApprovalDesk, **options: Any):
        logging.getLogger("discord.client").addFilter(_VOICE_NOT_USED)  # once: same object
        super().__init__(**options)
        self.myclaw = channel
        self.approval_desk = desk

    async def setup_hook(self) -> None:
        self.add_dynamic_items(ApprovalButton, BatchButton, CommandButton)

    async def on_message(self, message: discord.Message) -> None:
        with self.myclaw.in_flight():
            await self.myclaw.on_message(message)


class ShardedMyclawClient(MyclawClient, discord.AutoShardedClient):
    """The same client over several gateway connections, one per shard this process serves."""


def new_client(channel: DiscordChannel, desk: ApprovalDesk, config: ChannelConfig) -> MyclawClient:
    """A client asking only for the intents used and mentioning nobody, sharded when configured."""
    count, ids = shards(config)
    options: dict[str, Any] = dict(intents=intents(), max_messages=None,
                                   allowed_mentions=discord.AllowedMentions.none(),
                                   guild_ready_timeout=float(config["discord"]["guild_ready_timeout"]))
    if count:
        return ShardedMyclawClient(channel, desk, shard_count=count, shard_ids=list(ids), **options)
    return MyclawClient(channel, desk, **options)


async def wait_until_ready(client: discord.Client, connection: asyncio.Task[None]) -> None:
    """Return once the gateway is READY; ChannelError if the connection ended or it took too long."""
    ready = asyncio.create_task(client.wait_until_ready())
    try:
        done, _ = await asyncio.wait({ready, connection}, timeout=READY_TIMEOUT,
                                     return_when=asyncio.FIRST_COMPLETED)
    finally:
        ready.cancel()
    if connection in done:
        raise _gateway_error(connection.exception())
    if ready not in done:
        raise ChannelError(f"Discord: the gateway did not become ready within {READY_TIMEOUT:.0f}s")


async def login(client: discord.Client, token: str) -> None:
    try:
        await client.login(token)
    except discord.LoginFailure as exc:
        raise ChannelError("Discord rejected the bot token (DISCORD_BOT_TOKEN): 401 Unauthorized") from exc
    except discord.HTTPException as exc:
        raise ChannelError(_one_line(f"Discord login failed: HTTP {exc.status} {exc.text or ''}")) from exc
    except (aiohttp.ClientError, OSError) as exc:
        raise ChannelError(_one_line(f"Discord: cannot reach the API ({type(exc).__name__}: {exc})")) from exc


def _one_line(text: str) -> str:
    return " ".join(text.split())


class CommandWords(app_commands.Translator):
    """The slash commands' descriptions in each language Discord clients may use: a command's
    description (a locale_str naming its `command`) is the agent's, in the client's language
    (`es-ES` and `es-419` read Spanish); Discord shows the default one to every other locale."""

    def __init__(self, described: Any, default: str):
        self._described = described     # language -> [(command, description)]
        self._default = default
        self._by_language: dict[str, dict[str, str]] = {}

    async def translate(self, string: app_commands.locale_str, locale: discord.Locale,
                        context: app_commands.TranslationContextTypes) -> str | None:
        command = string.extras.get("command")
        language = supported(str(locale.value))
        if command is None or not language or language == self._default:
            return None
        if language not in self._by_language:
            self._by_language[language] = {name.lstrip("/"): text for name, text
                                            in self._described(language)}
        text = self._by_language[language].get(command)
        return text[:100] if text else None


async def sync_commands(tree: app_commands.CommandTree) -> None:
    """Register the slash commands; a failure leaves them unavailable but the bot still works."""
    try:
        synced = await tree.sync()
    except discord.HTTPException:
        log.warning("discord: slash commands could not be synced", exc_info=True)
        return
    log.info("discord: %d slash commands synced", len(synced))


def _gateway_error(exc: BaseException | None) -> ChannelError:
    if isinstance(exc, discord.PrivilegedIntentsRequired):
        return ChannelError("Discord refused the Message Content intent: enable it for the bot in the "
                            "Developer Portal (Bot → Privileged Gateway Intents)")
    if isinstance(exc, discord.ConnectionClosed) and exc.code == 4004:
        return ChannelError("Discord rejected the bot token (DISCORD_BOT_TOKEN) at the gateway")
    return ChannelError(_one_line(f"Discord: the gateway connection failed ({type(exc).__name__}: {exc})"))


def log_connection_end(task: asyncio.Task[None]) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        log.error("discord: the gateway connection ended", exc_info=exc)
