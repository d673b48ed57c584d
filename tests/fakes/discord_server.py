"""A fake Discord (REST + gateway) on 127.0.0.1 for driving the real discord.py library.

discord.py has no base-URL option, so `FakeDiscord.patched()` points the two globals the
library reads at call time — `discord.http.Route.BASE` and `DiscordWebSocket.DEFAULT_GATEWAY` —
at this server, and restores them afterwards.

The REST side records every request (`Request(method, path, json, query)`) and answers what the
channel uses: login, command sync, channel messages (create/edit), typing, DM channels,
interaction callbacks and followups. The gateway sends HELLO, answers IDENTIFY with READY plus a
GUILD_CREATE per configured guild, ACKs heartbeats, and lets a test dispatch MESSAGE_CREATE and
INTERACTION_CREATE events. Shards work as on Discord: an IDENTIFY for shard i of n gets the
guilds with (id >> 22) % n == i, and each event goes to the connection of its guild's shard
(DMs to shard 0). Tests wait on `wait_for(predicate)` (an asyncio.Condition), never on
sleeps.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import discord.gateway
import discord.http
import yarl
from aiohttp import WSMsgType, web

from tests.fakes import EVENTUALLY, unique_suffix

DISCORD_EPOCH_MS = 1_420_070_400_000
EPHEMERAL = 64


@dataclass
class Request:
    method: str
    path: str                       # relative to /api/v10, e.g. "/channels/5/messages"
    json: Any
    query: dict[str, str]
    at: float = 0.0                 # when it arrived, by the fake's `clock`


@dataclass
class FakeGuild:
    id: int
    name: str = "Test Guild"
    channel_ids: tuple[int, ...] = ()
    roles: dict[str, int] = field(default_factory=dict)     # role name -> role id


def bot_token(bot_id: int) -> str:
    """A token shaped like Discord's (the bot's id in base64url, a timestamp, an HMAC), unique
    to this fake."""
    user = base64.urlsafe_b64encode(str(bot_id).encode()).decode().rstrip("=")
    return f"{user}.GFAKE0.fake-hmac-{unique_suffix()}"


def _json(data: Any, status: int = 200) -> web.Response:
    # discord.py only parses bodies whose Content-Type is exactly "application/json".
    return web.Response(body=json.dumps(data).encode(), status=status,
                        headers={"Content-Type": "application/json"})


def _iso_now() -> str:
    return datetime.now(UTC).isoformat()


class FakeDiscord:
    """One fake Discord for one test. `async with FakeDiscord(...) as fake, fake.patched(): ...`"""

    def __init__(self, *, token: str | None = None, bot_id: int = 900_000_000_000_000_001,
                 application_id: int = 900_000_000_000_000_002,
                 guilds: tuple[FakeGuild, ...] = (), refuse_privileged_intents: bool = False):
        self.token = token or bot_token(bot_id)
        self.bot_id = bot_id
        self.application_id = application_id
        self.guilds = {g.id: g for g in guilds}
        self.refuse_privileged_intents = refuse_privileged_intents
        self.refuse_dms: set[int] = set()      # users who do not accept DMs from the bot (403)
        self.rate_limit_edits = 0              # the next N message edits get a 429 (retry_after)
        self.retry_after = 0.05
        self.clock: Callable[[], float] = time.monotonic   # stamps each request (tests inject one)
        self.requests: list[Request] = []
        self.messages: dict[int, dict[str, Any]] = {}
        self.identifies: list[dict[str, Any]] = []
        self.commands: list[dict[str, Any]] = []
        self._interaction_messages: dict[str, int] = {}     # interaction token -> @original id
        self._interaction_channels: dict[str, int] = {}     # interaction token -> channel id
        self._dm_channels: dict[int, int] = {}              # user id -> DM channel id
        self.cdn: dict[str, bytes] = {}          # path under /cdn/ -> attachment bytes
        self.cdn_downloads: list[str] = []
        self.uploads: list[dict[str, Any]] = []  # files the bot posted (multipart messages)
        self._ids = itertools.count(1)
        self._sockets: list[web.WebSocketResponse] = []
        self._shard_of: dict[web.WebSocketResponse, tuple[int, int]] = {}   # ws -> (id, count)
        self._seq = 0
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self.port = 0

    # --- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> FakeDiscord:
        app = web.Application()
        app.router.add_get("/gateway", self._gateway)
        app.router.add_route("*", "/api/v10/{tail:.*}", self._rest)
        app.router.add_get("/cdn/{path:.+}", self._cdn_file)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for ws in list(self._sockets):
            await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def rest_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v10"

    @property
    def gateway_url(self) -> yarl.URL:
        return yarl.URL(f"ws://127.0.0.1:{self.port}/gateway")

    @contextlib.contextmanager
    def patched(self) -> Iterator[FakeDiscord]:
        """Point discord.py at this fake for the duration of the block."""
        old_base = discord.http.Route.BASE
        old_gateway = discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
        discord.http.Route.BASE = self.rest_base
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = self.gateway_url
        try:
            yield self
        finally:
            discord.http.Route.BASE = old_base
            discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = old_gateway

    # --- waiting -----------------------------------------------------------------------------

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = EVENTUALLY) -> Any:
        """Wait until `predicate()` is truthy (re-checked on every request/event); return it."""
        async with self._changed:
            return await asyncio.wait_for(self._changed.wait_for(predicate), timeout)

    def requests_to(self, method: str, path_prefix: str) -> list[Request]:
        return [r for r in self.requests if r.method == method and r.path.startswith(path_prefix)]

    def bot_messages(self, channel_id: int) -> list[dict[str, Any]]:
        """Messages the bot posted into `channel_id` (current state, edits applied), oldest first."""
        return [m for m in self.messages.values() if m["channel_id"] == str(channel_id)
                and m["author"]["id"] == str(self.bot_id)]

    async def wait_for_bot_messages(self, channel_id: int, count: int = 1,
                                    timeout: float = EVENTUALLY) -> list[dict[str, Any]]:
        await self.wait_for(lambda: len(self.bot_messages(channel_id)) >= count, timeout)
        return self.bot_messages(channel_id)

    async def wait_for_text(self, channel_id: int, content: str,
                            timeout: float = EVENTUALLY) -> dict[str, Any]:
        """The bot's message in `channel_id` whose content is exactly `content`, once it exists."""
        def found() -> dict[str, Any] | None:
            return next((m for m in self.bot_messages(channel_id) if m["content"] == content), None)
        return await self.wait_for(found, timeout)

    async def wait_for_buttons(self, channel_id: int, timeout: float = EVENTUALLY) -> dict[str, Any]:
        """The bot's first message in `channel_id` that carries components (buttons)."""
        def found() -> dict[str, Any] | None:
            return next((m for m in self.bot_messages(channel_id) if m["components"]), None)
        return await self.wait_for(found, timeout)

    def interaction_callbacks(self, interaction_id: int | str) -> list[Request]:
        return self.requests_to("POST", f"/interactions/{interaction_id}/")

    def dm_channel_of(self, user_id: int) -> int | None:
        """The DM channel the bot opened with `user_id` (POST /users/@me/channels), if any."""
        return self._dm_channels.get(user_id)

    def followups(self, token: str) -> list[Request]:
        return self.requests_to("POST", f"/webhooks/{self.application_id}/{token}")

    # --- ids and payloads --------------------------------------------------------------------

    def snowflake(self) -> int:
        return ((int(time.time() * 1000) - DISCORD_EPOCH_MS) << 22) + next(self._ids)

    def user(self, user_id: int, name: str = "", bot: bool = False) -> dict[str, Any]:
        name = name or f"user{user_id % 10_000}"
        return {"id": str(user_id), "username": name, "global_name": name, "discriminator": "0",
                "avatar": None, "bot": bot}

    @property
    def bot_user(self) -> dict[str, Any]:
        return {**self.user(self.bot_id, "myclaw", bot=True), "verified": True, "mfa_enabled": False,
                "flags": 0}

    def _member(self, guild_id: int, user_id: int, roles: tuple[str, ...], name: str) -> dict[str, Any]:
        guild = self.guilds[guild_id]
        return {"user": self.user(user_id, name), "roles": [str(guild.roles[r]) for r in roles],
                "joined_at": _iso_now(), "deaf": False, "mute": False, "flags": 0, "nick": None,
                "permissions": "0"}

    def _guild_create(self, guild: FakeGuild) -> dict[str, Any]:
        roles = [{"id": str(guild.id), "name": "@everyone", "permissions": "0", "position": 0,
                  "color": 0, "hoist": False, "managed": False, "mentionable": False, "flags": 0}]
        roles += [{"id": str(rid), "name": name, "permissions": "0", "position": i + 1, "color": 0,
                   "hoist": False, "managed": False, "mentionable": True, "flags": 0}
                  for i, (name, rid) in enumerate(guild.roles.items())]
        channels = [{"id": str(cid), "type": 0, "name": f"chan-{cid % 1000}", "position": i,
                     "permission_overwrites": [], "guild_id": str(guild.id)}
                    for i, cid in enumerate(guild.channel_ids)]
        return {"id": str(guild.id), "name": guild.name, "unavailable": False, "owner_id": "1",
                "roles": roles, "channels": channels, "members": [], "member_count": 2,
                "features": [], "emojis": [], "stickers": [], "threads": [], "large": False}

    def _channel_payload(self, channel_id: int, guild_id: int | None) -> dict[str, Any]:
        if guild_id is None:
            return {"id": str(channel_id), "type": 1, "recipients": [], "last_message_id": None}
        return {"id": str(channel_id), "type": 0, "name": f"chan-{channel_id % 1000}",
                "guild_id": str(guild_id), "position": 0, "permission_overwrites": []}

    def _guild_of_channel(self, channel_id: int) -> int | None:
        return next((g.id for g in self.guilds.values() if channel_id in g.channel_ids), None)

    def _message(self, channel_id: int, author: dict[str, Any], body: dict[str, Any],
                 flags: int = 0) -> dict[str, Any]:
        message = {
            "id": str(self.snowflake()), "channel_id": str(channel_id), "author": author,
            "content": body.get("content") or "", "timestamp": _iso_now(), "edited_timestamp": None,
            "tts": False, "mention_everyone": False, "mentions": [], "mention_roles": [],
            "attachments": [], "embeds": body.get("embeds") or [], "pinned": False, "type": 0,
            "components": body.get("components") or [], "flags": flags | int(body.get("flags") or 0),
        }
        guild_id = self._guild_of_channel(channel_id)
        if guild_id is not None:
            message["guild_id"] = str(guild_id)
        self.messages[int(message["id"])] = message
        return message

    def _attachment(self, channel_id: int, filename: str, data: bytes, content_type: str) -> dict[str, Any]:
        attachment_id = self.snowflake()
        # As Discord's CDN does, the URL names the file with its unusual characters replaced
        # (the payload keeps the name as sent).
        path = f"attachments/{channel_id}/{attachment_id}/{re.sub(r'[^A-Za-z0-9._-]', '_', filename)}"
        self.cdn[path] = data
        url = f"http://127.0.0.1:{self.port}/cdn/{path}"
        payload: dict[str, Any] = {"id": str(attachment_id), "filename": filename, "size": len(data),
                                   "url": url, "proxy_url": url, "content_type": content_type}
        if content_type.startswith("audio/") and filename.startswith("voice-message"):
            # What the client records with the microphone button (any other audio is a file).
            payload.update(duration_secs=3.0, waveform="AAAA", flags=1 << 13)
        return payload

    async def _cdn_file(self, request: web.Request) -> web.Response:
        path = request.match_info["path"]
        if path not in self.cdn:
            return web.Response(status=404, text="Not Found")
        self.cdn_downloads.append(path)
        return web.Response(body=self.cdn[path], content_type="application/octet-stream")

    # --- what a test sends through the gateway -----------------------------------------------

    @staticmethod
    def shard_of(guild_id: int | None, count: int) -> int:
        """The shard Discord sends a guild's events to (DMs go to shard 0)."""
        return 0 if guild_id is None else (int(guild_id) >> 22) % count

    def _serves(self, ws: web.WebSocketResponse, guild_id: int | None) -> bool:
        shard, count = self._shard_of.get(ws, (0, 1))
        return self.shard_of(guild_id, count) == shard

    async def dispatch(self, event: str, data: dict[str, Any]) -> None:
        """Send an event to the connection of the shard it belongs to (every connection of an
        unsharded client gets everything)."""
        self._seq += 1
        frame = json.dumps({"op": 0, "t": event, "s": self._seq, "d": data})
        guild = data.get("guild_id")
        live = [ws for ws in self._sockets
                if not ws.closed and self._serves(ws, int(guild) if guild else None)]
        if not live:
            raise AssertionError("no discord client is connected to the fake gateway")
        for ws in live:
            await ws.send_str(frame)

    async def send_message(self, *, author_id: int, content: str, channel_id: int,
                           guild_id: int | None = None, roles: tuple[str, ...] = (),
                           mentions_bot: bool = False, reply_to: int | None = None,
                           author_is_bot: bool = False, name: str = "",
                           attachments: tuple[tuple[str, bytes, str], ...] = (),
                           forwarded: bool = False, webhook: bool = False) -> dict[str, Any]:
        """A user posts `content`; `mentions_bot` also prefixes the bot's mention like a client.
        `webhook`: a webhook posts it (a `webhook_id`, under `author_id` and `name`, which a
        webhook chooses freely).
        `attachments`: (filename, bytes, content type), served from this fake's CDN.
        `forwarded`: the message forwards another (Discord's message snapshot): `content` and
        `attachments` are the forwarded message's, the forward itself is empty."""
        author = self.user(author_id, name, bot=author_is_bot)
        if mentions_bot:
            content = f"<@{self.bot_id}> {content}"
        message = self._message(channel_id, author, {"content": content})
        message["attachments"] = [self._attachment(channel_id, *a) for a in attachments]
        if webhook:
            message["webhook_id"] = str(self.snowflake())
        if forwarded:
            inner = {key: message[key] for key in ("content", "attachments", "embeds",
                                                   "timestamp", "edited_timestamp", "flags",
                                                   "mentions", "mention_roles", "components")}
            message.update(content="", attachments=[], message_snapshots=[
                {"message": {**inner, "type": 0}}],
                message_reference={"type": 1, "channel_id": str(channel_id),
                                   "message_id": str(self.snowflake())})
        if mentions_bot:
            message["mentions"] = [self.bot_user]
        if guild_id is not None:
            message["guild_id"] = str(guild_id)
            member = self._member(guild_id, author_id, roles, author["username"])
            message["member"] = {k: v for k, v in member.items() if k != "user"}
        if reply_to is not None:
            message["message_reference"] = {"message_id": str(reply_to), "channel_id": str(channel_id),
                                            "type": 0}
            message["referenced_message"] = self.messages[reply_to]
        await self.dispatch("MESSAGE_CREATE", message)
        return message

    def _interaction(self, kind: int, user_id: int, channel_id: int, guild_id: int | None,
                     roles: tuple[str, ...], data: dict[str, Any],
                     locale: str = "en-US") -> dict[str, Any]:
        interaction_id = self.snowflake()
        token = f"itok{interaction_id}"
        self._interaction_channels[token] = channel_id
        payload: dict[str, Any] = {
            "id": str(interaction_id), "application_id": str(self.application_id), "type": kind,
            "token": token, "version": 1, "data": data, "channel_id": str(channel_id),
            "channel": self._channel_payload(channel_id, guild_id), "locale": locale,
            "app_permissions": "0", "entitlements": [], "authorizing_integration_owners": {},
            "context": 1 if guild_id is None else 0, "attachment_size_limit": 10_485_760,
        }
        if guild_id is None:
            payload["user"] = self.user(user_id)
        else:
            payload["guild_id"] = str(guild_id)
            payload["guild_locale"] = "en-US"
            payload["member"] = self._member(guild_id, user_id, roles, f"user{user_id % 10_000}")
        return payload

    async def click(self, *, message_id: int, custom_id: str, user_id: int, roles: tuple[str, ...] = (),
                    as_seen: dict[str, Any] | None = None, locale: str = "en-US") -> dict[str, Any]:
        """A user clicks the button `custom_id` on a message the bot posted earlier.

        `as_seen` is the message as the user's client showed it (a copy taken earlier): a second
        click that lands before the edit removing the buttons reached the user.
        """
        message = as_seen or self.messages[message_id]
        channel_id = int(message["channel_id"])
        guild_id = int(message["guild_id"]) if "guild_id" in message else None
        payload = self._interaction(3, user_id, channel_id, guild_id, roles,
                                    {"custom_id": custom_id, "component_type": 2}, locale)
        payload["message"] = message
        self._interaction_messages[payload["token"]] = message_id
        await self.dispatch("INTERACTION_CREATE", payload)
        return payload

    async def slash(self, *, name: str, user_id: int, channel_id: int, guild_id: int | None = None,
                    roles: tuple[str, ...] = (), locale: str = "en-US") -> dict[str, Any]:
        """A user runs the application command `/name` (their client in `locale`)."""
        command = next((c for c in self.commands if c["name"] == name), None)
        data = {"id": command["id"] if command else str(self.snowflake()), "name": name, "type": 1}
        payload = self._interaction(2, user_id, channel_id, guild_id, roles, data, locale)
        await self.dispatch("INTERACTION_CREATE", payload)
        return payload

    # --- gateway ------------------------------------------------------------------------------

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_str(json.dumps({"op": 10, "d": {"heartbeat_interval": 41_250}, "s": None, "t": None}))
        async for frame in ws:
            if frame.type != WSMsgType.TEXT:
                continue
            payload = json.loads(frame.data)
            if payload["op"] == 1:
                await ws.send_str(json.dumps({"op": 11, "d": None}))
            elif payload["op"] == 2:
                await self._identify(ws, payload["d"])
        if ws in self._sockets:
            self._sockets.remove(ws)
        self._shard_of.pop(ws, None)
        return ws

    async def _identify(self, ws: web.WebSocketResponse, data: dict[str, Any]) -> None:
        if self.refuse_privileged_intents:
            await ws.close(code=4014, message=b"Disallowed intent(s).")
            return
        self._sockets.append(ws)
        shard, count = data.get("shard") or (0, 1)
        self._shard_of[ws] = (shard, count)
        served = [g for g in self.guilds.values() if self.shard_of(g.id, count) == shard]
        self._seq += 1
        ready = {"v": 10, "user": self.bot_user, "session_id": f"session-{len(self.identifies)}",
                 "resume_gateway_url": str(self.gateway_url), "private_channels": [],
                 "relationships": [], "application": {"id": str(self.application_id), "flags": 0},
                 "guilds": [{"id": str(g.id), "unavailable": True} for g in served],
                 "shard": [shard, count]}
        await ws.send_str(json.dumps({"op": 0, "t": "READY", "s": self._seq, "d": ready}))
        for guild in served:
            self._seq += 1
            await ws.send_str(json.dumps({"op": 0, "t": "GUILD_CREATE", "s": self._seq,
                                          "d": self._guild_create(guild)}))
        self.identifies.append(data)
        await self._notify()

    # --- REST ---------------------------------------------------------------------------------

    async def _rest(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["tail"]
        if request.content_type == "multipart/form-data":
            body = await self._multipart(request)
        else:
            body = await request.json() if request.can_read_body and request.content_type == \
                "application/json" else None
        self.requests.append(Request(request.method, path, body, dict(request.query), self.clock()))
        try:
            return await self._answer(request, path, body)
        finally:
            await self._notify()

    async def _multipart(self, request: web.Request) -> dict[str, Any]:
        """A message with files: `payload_json` plus `files[n]` parts (kept in `uploads`)."""
        form = await request.post()
        body = json.loads(str(form.get("payload_json") or "{}"))
        files = [{"filename": v.filename, "content_type": v.content_type, "data": v.file.read()}
                 for k, v in form.items() if k.startswith("files[") and isinstance(v, web.FileField)]
        body["_files"] = files
        return body

    async def _answer(self, request: web.Request, path: str, body: Any) -> web.StreamResponse:
        parts = path.strip("/").split("/")
        if parts[0] in ("interactions", "webhooks"):
            return self._answer_interaction(request.method, parts, body)
        if request.headers.get("Authorization") != f"Bot {self.token}":
            return _json({"message": "401: Unauthorized", "code": 0}, status=401)
        method = request.method
        if method == "GET" and path == "/users/@me":
            return _json(self.bot_user)
        if method == "GET" and path == "/oauth2/applications/@me":
            return _json(self._application())
        if method == "PUT" and parts[0] == "applications" and parts[-1] == "commands":
            self.commands = [{**c, "id": str(self.snowflake()), "application_id": str(self.application_id),
                              "version": "1", "type": c.get("type", 1),
                              "default_member_permissions": None, "nsfw": False}
                             for c in body]
            return _json(self.commands)
        if method == "POST" and path == "/users/@me/channels":
            user_id = int(body["recipient_id"])
            dm_id = self._dm_channels.setdefault(user_id, self.snowflake())
            return _json({"id": str(dm_id), "type": 1, "recipients": [self.user(user_id)],
                          "last_message_id": None})
        if parts[0] == "channels":
            return self._answer_channel(method, parts, body)
        return _json({"message": "404: Not Found", "code": 0}, status=404)

    def _application(self) -> dict[str, Any]:
        return {"id": str(self.application_id), "name": "myclaw", "description": "", "icon": None,
                "bot_public": False, "bot_require_code_grant": False, "owner": self.user(1, "owner"),
                "verify_key": "00", "flags": 0, "summary": "", "team": None}

    def _answer_channel(self, method: str, parts: list[str], body: Any) -> web.StreamResponse:
        channel_id = int(parts[1])
        if method == "POST" and parts[2:] == ["typing"]:
            return web.Response(status=204)
        if method == "POST" and parts[2:] == ["messages"]:
            if any(self._dm_channels.get(user) == channel_id for user in self.refuse_dms):
                return _json({"message": "Cannot send messages to this user", "code": 50007}, status=403)
            files = body.pop("_files", [])
            if any(len(f["data"]) > 10 * 1024 * 1024 for f in files):
                return _json({"message": "Request entity too large", "code": 40005}, status=413)
            message = self._message(channel_id, self.bot_user, body)
            for upload in files:
                self.uploads.append({"channel_id": channel_id, **upload,
                                     "content": body.get("content") or ""})
                message["attachments"].append({"id": str(self.snowflake()), "filename": upload["filename"],
                                               "size": len(upload["data"]), "url": "", "proxy_url": ""})
            return _json(message)
        if method == "PATCH" and len(parts) == 4 and parts[2] == "messages":
            if self.rate_limit_edits > 0:   # as Discord answers an edit over the channel's rate
                self.rate_limit_edits -= 1
                return web.Response(
                    body=json.dumps({"message": "You are being rate limited.", "global": False,
                                     "retry_after": self.retry_after}).encode(), status=429,
                    headers={"Content-Type": "application/json", "Via": "1.1 google",
                             "Retry-After": str(self.retry_after), "X-RateLimit-Scope": "user"})
            return self._edit(int(parts[3]), body)
        if method == "DELETE" and len(parts) == 4 and parts[2] == "messages":
            if self.messages.pop(int(parts[3]), None) is None:
                return _json({"message": "Unknown Message", "code": 10008}, status=404)
            return web.Response(status=204)
        if method == "GET" and len(parts) == 4 and parts[2] == "messages":
            found = self.messages.get(int(parts[3]))
            if found is None:
                return _json({"message": "Unknown Message", "code": 10008}, status=404)
            return _json(found)
        return _json({"message": "404: Not Found", "code": 0}, status=404)

    def _edit(self, message_id: int, body: dict[str, Any]) -> web.Response:
        message = self.messages.get(message_id)
        if message is None:
            return _json({"message": "Unknown Message", "code": 10008}, status=404)
        for key in ("content", "components", "embeds"):
            if key in body:
                message[key] = body[key] if body[key] is not None else ([] if key != "content" else "")
        message["edited_timestamp"] = _iso_now()
        return _json(message)

    def _answer_interaction(self, method: str, parts: list[str], body: Any) -> web.Response:
        if parts[0] == "interactions":              # POST /interactions/{id}/{token}/callback
            interaction_id, token = parts[1], parts[2]
            kind = body["type"]
            if kind == 7 and token in self._interaction_messages:   # UPDATE_MESSAGE
                self._edit(self._interaction_messages[token], body.get("data") or {})
            elif kind in (4, 5):                                     # a (deferred) reply
                flags = int((body.get("data") or {}).get("flags") or 0)
                reply = self._message(self._interaction_channels.get(token, 0), self.bot_user,
                                      body.get("data") or {}, flags)
                self._interaction_messages[token] = int(reply["id"])
            return _json({"interaction": {"id": interaction_id, "type": 2,
                                          "response_message_loading": kind == 5}})
        token = parts[2]                             # /webhooks/{app}/{token}[/messages/@original]
        if method == "POST" and len(parts) == 3:
            channel_id = self._interaction_channels.get(token, 0)
            return _json(self._message(channel_id, self.bot_user, body))
        if len(parts) == 5 and parts[4] == "@original" and token in self._interaction_messages:
            if method == "PATCH":
                return self._edit(self._interaction_messages[token], body)
            if method == "DELETE":
                self.messages.pop(self._interaction_messages[token], None)
                return web.Response(status=204)
        return _json({"message": "Unknown Webhook", "code": 10015}, status=404)
