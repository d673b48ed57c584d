"""A fake Slack on 127.0.0.1 that the real slack-sdk / slack-bolt talk to: the Web API methods the
channel uses (`POST /api/<method>`, JSON or form bodies, `{"ok": …}` answers, 429 with
Retry-After on request), the Socket Mode WebSocket (`apps.connections.open` hands out
`ws://…/socket`; every envelope sent waits for its acknowledgement), file downloads that demand
the bot token, and the upload URLs of files_upload_v2.

Each method needs its scope (METHOD_SCOPES; `slack.scopes` is what the token was granted, by
default exactly what deploy/slack-manifest.yaml asks for). It keeps every message it was asked to
post, update or stream, and checks Block Kit as Slack does (at most 50 blocks, 3,000 characters
a section or rich-text element, unique action ids, 2,000 characters a button value): a test
fails if the channel sends what Slack would refuse.

    async with FakeSlack() as slack:
        ... web_client(slack.bot_token, slack.base_url) ...
        envelope = await slack.send("events_api", slack.dm_event("U1", "hello"))
        call = await slack.wait_for("chat.postMessage", lambda p: p["channel"] == "DU1")
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import aiohttp
from aiohttp import web

from tests.fakes import EVENTUALLY, unique_suffix

Params = dict[str, Any]
Predicate = Callable[[Params], bool]

TEAM = "T0TEAM"
BOT_USER = "UBOT"
BOT_ID = "BBOT"
SCOPES = ("chat:write,im:history,im:write,channels:history,groups:history,files:read,files:write,"
          "usergroups:read,users:read,commands")
# The scopes each Web API method the channel calls needs, as Slack checks them (a call without
# one gets `missing_scope`); conversations.replies needs the history scope of the channel's kind.
METHOD_SCOPES: dict[str, tuple[str, ...]] = {
    "auth.test": (), "apps.connections.open": (),
    "chat.postMessage": ("chat:write",), "chat.update": ("chat:write",),
    "chat.postEphemeral": ("chat:write",), "chat.startStream": ("chat:write",),
    "chat.appendStream": ("chat:write",), "chat.stopStream": ("chat:write",),
    "conversations.open": ("im:write",),
    "conversations.replies": ("channels:history", "groups:history", "im:history"),
    "usergroups.users.list": ("usergroups:read",), "users.info": ("users:read",),
    "files.getUploadURLExternal": ("files:write",), "files.completeUploadExternal": ("files:write",),
}
HISTORY_SCOPE = {"C": "channels:history", "G": "groups:history", "D": "im:history"}
DOWNLOAD_SCOPE = "files:read"
MAX_BLOCKS = 50
MAX_TEXT = 3000


@dataclass
class Call:
    method: str
    params: Params
    result: Any = None
    error: str | None = None
    at: float = field(default_factory=time.monotonic)


@dataclass
class _FailRule:
    method: str
    error: str
    status: int
    retry_after: int | None
    times: int
    when: Predicate | None


def block_problem(blocks: Any) -> str | None:
    """Why Slack would refuse these blocks (invalid_blocks), or None."""
    if not isinstance(blocks, list) or len(blocks) > MAX_BLOCKS:
        return "more than 50 blocks"
    actions: set[str] = set()
    for block in blocks:
        kind = block.get("type")
        if kind == "section" and len(block.get("text", {}).get("text", "")) > MAX_TEXT:
            return "section text over 3000"
        if kind == "rich_text":
            for element in block.get("elements", []):
                for inner in element.get("elements", []):
                    if len(inner.get("text", "")) > MAX_TEXT:
                        return "rich text over 3000"
        if kind == "actions":
            for element in block.get("elements", []):
                action = element.get("action_id", "")
                if action in actions or len(action) > 255 or len(element.get("value", "")) > 2000:
                    return "bad action"
                if len(element.get("text", {}).get("text", "")) > 75:
                    return "button text over 75"
                actions.add(action)
    return None


def visible_text(message: Params) -> str:
    """What a person reads of a message: its blocks' texts when it has blocks, else its text."""
    blocks = message.get("blocks") or []
    if not blocks:
        return str(message.get("text", ""))
    out = []
    for block in blocks:
        if block.get("type") == "section":
            out.append(block["text"]["text"])
        elif block.get("type") == "context":
            out.extend(e.get("text", "") for e in block.get("elements", []))
        elif block.get("type") == "rich_text":
            out.append("".join(inner.get("text", "") for element in block["elements"]
                               for inner in element.get("elements", [])))
    return "\n".join(out)


def buttons_of(message: Params) -> dict[str, Params]:
    """Button label -> the button, of a message's actions blocks."""
    return {b["text"]["text"]: b for block in message.get("blocks") or []
            if block.get("type") == "actions" for b in block["elements"]}


def sign(secret: str, body: bytes, timestamp: int | str) -> str:
    base = f"v0:{timestamp}:".encode() + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


class FakeSlack:
    def __init__(self) -> None:
        suffix = unique_suffix()
        self.bot_token = f"xoxb-fake-{suffix}"
        self.app_token = f"xapp-fake-{suffix}"
        self.signing_secret = f"secret-{suffix}"
        self.calls: list[Call] = []
        self.messages: dict[tuple[str, str], Params] = {}
        self.files: dict[str, bytes] = {}          # downloadable, by file id
        self.uploads: dict[str, Params] = {}       # uploaded by the bot, by file id
        self.usergroups: dict[str, list[str]] = {}
        self.locales: dict[str, str] = {}          # a user's Slack language, by user id
        self.streaming = True
        self.scopes = SCOPES
        self.socket_url: str | None = None   # what apps.connections.open hands out, if not ours
        self.downloads: list[str] = []
        self._fail: list[_FailRule] = []
        self._ts = itertools.count(1)
        self._ids = itertools.count(1)
        self._sockets: list[web.WebSocketResponse] = []
        self.acks: dict[str, asyncio.Event] = {}
        self._changed: asyncio.Condition | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0

    # --- server -----------------------------------------------------------------------------

    async def __aenter__(self) -> FakeSlack:
        self._changed = asyncio.Condition()
        app = web.Application(client_max_size=64 << 20)
        app.router.add_post("/api/{method}", self._api)
        app.router.add_get("/api/{method}", self._api)    # a few methods are GETs in the SDK
        app.router.add_get("/socket", self._socket)
        app.router.add_get("/socket-disconnect", self._disconnecting_socket)
        app.router.add_post("/upload/{file}", self._upload)
        app.router.add_get("/files/{file}", self._download)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for ws in list(self._sockets):
            await ws.close()
        assert self._runner is not None
        await self._runner.cleanup()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    def file_url(self, file_id: str) -> str:
        return f"http://127.0.0.1:{self.port}/files/{file_id}"

    def _notify(self) -> None:
        async def wake() -> None:
            assert self._changed is not None
            async with self._changed:
                self._changed.notify_all()
        asyncio.get_running_loop().create_task(wake())

    # --- test helpers -----------------------------------------------------------------------

    def of(self, method: str, predicate: Predicate | None = None) -> list[Call]:
        return [c for c in self.calls if c.method == method and c.error is None
                and (predicate is None or predicate(c.params))]

    async def wait_for(self, method: str, predicate: Predicate | None = None,
                       timeout: float = EVENTUALLY, count: int = 1) -> Call:
        assert self._changed is not None
        async with self._changed:
            try:
                await asyncio.wait_for(self._changed.wait_for(
                    lambda: len(self.of(method, predicate)) >= count), timeout)
            except TimeoutError as exc:
                seen = [(c.method, str(c.params.get("text", ""))[:50], c.error)
                        for c in self.calls[-12:]]
                raise AssertionError(f"no {count}x {method} within {timeout}s; last: {seen}") from exc
        return self.of(method, predicate)[count - 1]

    async def wait_until(self, condition: Callable[[], Any], timeout: float = EVENTUALLY) -> None:
        assert self._changed is not None
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(condition), timeout)

    def fail(self, method: str, error: str = "invalid_blocks", *, status: int = 200,
             retry_after: int | None = None, times: int = 1, when: Predicate | None = None) -> None:
        self._fail.append(_FailRule(method, error, status, retry_after, times, when))

    def rate_limit(self, method: str, retry_after: int = 1, times: int = 1) -> None:
        self.fail(method, "ratelimited", status=429, retry_after=retry_after, times=times)

    def calls_of_errors(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method and c.error is not None]

    def texts_in(self, channel: str) -> list[str]:
        return [visible_text(m) for (c, _), m in self.messages.items() if c == channel]

    def message(self, channel: str, ts: str) -> Params:
        return self.messages[(channel, ts)]

    # --- envelopes the tests send -----------------------------------------------------------

    async def send(self, kind: str, payload: Params, timeout: float = EVENTUALLY) -> str:
        """Push an envelope over Socket Mode; returns its id once the bot acknowledged it."""
        await self.wait_until(lambda: self._sockets, timeout)
        envelope = f"env-{next(self._ids)}"
        self.acks[envelope] = asyncio.Event()
        await self._sockets[-1].send_str(json.dumps({
            "envelope_id": envelope, "type": kind, "payload": payload,
            "accepts_response_payload": kind != "events_api"}))
        await asyncio.wait_for(self.acks[envelope].wait(), timeout)
        return envelope

    def event_body(self, event: Params, event_id: str | None = None) -> Params:
        return {"token": "x", "team_id": TEAM, "api_app_id": "A1", "type": "event_callback",
                "event_id": event_id or f"Ev{next(self._ids)}", "event_time": int(time.time()),
                "event": event}

    def new_ts(self) -> str:
        return f"1700000000.{next(self._ts):06d}"

    def dm_event(self, user: str, text: str, *, thread_ts: str | None = None,
                 files: list[Params] | None = None, event_id: str | None = None) -> Params:
        event = {"type": "message", "channel": f"D{user[1:]}", "channel_type": "im",
                 "user": user, "text": text, "ts": self.new_ts(), "team": TEAM}
        if thread_ts:
            event["thread_ts"] = thread_ts
        if files:
            event["files"], event["subtype"] = files, "file_share"
        return self.event_body(event, event_id)

    def channel_event(self, channel: str, user: str, text: str, *,
                      thread_ts: str | None = None, team: str = TEAM) -> Params:
        event = {"type": "message", "channel": channel, "channel_type": "channel",
                 "user": user, "text": text, "ts": self.new_ts(), "team": team}
        if thread_ts:
            event["thread_ts"] = thread_ts
        return self.event_body(event)

    def tap_payload(self, user: str, channel: str, ts: str, label: str, *,
                    team: str = TEAM) -> Params:
        """A block_actions payload for the button labelled `label` of a posted message."""
        message = self.messages[(channel, ts)]
        chosen = buttons_of(message)[label]
        return {"type": "block_actions", "trigger_id": f"trig-{next(self._ids)}",
                "team": {"id": team}, "user": {"id": user, "team_id": team},
                "channel": {"id": channel}, "container": {"type": "message", "message_ts": ts,
                                                           "channel_id": channel},
                "message": {"ts": ts, "thread_ts": message.get("thread_ts")},
                "actions": [{"action_id": chosen["action_id"], "value": chosen.get("value", ""),
                             "type": "button", "action_ts": f"{time.time():.6f}"}]}

    def forged_tap(self, user: str, channel: str, ts: str, action_id: str) -> Params:
        return {"type": "block_actions", "trigger_id": f"trig-{next(self._ids)}",
                "team": {"id": TEAM}, "user": {"id": user, "team_id": TEAM},
                "channel": {"id": channel}, "container": {"message_ts": ts, "channel_id": channel},
                "message": {"ts": ts}, "actions": [{"action_id": action_id, "value": action_id}]}

    def slash_payload(self, user: str, text: str, channel: str = "C0GENERAL") -> Params:
        return {"command": "/myclaw", "text": text, "user_id": user, "team_id": TEAM,
                "channel_id": channel, "trigger_id": f"trig-{next(self._ids)}",
                "response_url": f"http://127.0.0.1:{self.port}/response"}

    def add_file(self, name: str, data: bytes, mimetype: str, **extra: Any) -> Params:
        file_id = f"F{next(self._ids)}"
        self.files[file_id] = data
        return {"id": file_id, "name": name, "mimetype": mimetype, "size": len(data),
                "url_private": self.file_url(file_id), "url_private_download": self.file_url(file_id),
                **extra}

    # --- the Web API ------------------------------------------------------------------------

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await _params(request)
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        expected = self.app_token if method == "apps.connections.open" else self.bot_token
        call = Call(method, params)
        self.calls.append(call)
        try:
            if token != expected:
                return self._error(call, "invalid_auth")
            for rule in self._fail:
                if rule.method == method and rule.times > 0 and (rule.when is None or rule.when(params)):
                    rule.times -= 1
                    headers = {"Retry-After": str(rule.retry_after)} if rule.retry_after is not None else {}
                    return self._error(call, rule.error, status=rule.status, headers=headers)
            handler = getattr(self, "_m_" + method.replace(".", "_"), None)
            if handler is None:
                return self._error(call, "unknown_method")
            needed = self._scope_needed(method, params)
            if needed is not None:
                return self._error(call, "missing_scope", extra={"needed": needed})
            result = handler(params)
            if isinstance(result, str):
                return self._error(call, result)
            call.result = result
            headers = {"x-oauth-scopes": self.scopes} if method == "auth.test" else {}
            return web.json_response({"ok": True, **result}, headers=headers)
        finally:
            self._notify()

    def _error(self, call: Call, error: str, *, status: int = 200,
               headers: dict[str, str] | None = None,
               extra: Params | None = None) -> web.Response:
        call.error = error
        return web.json_response({"ok": False, "error": error, **(extra or {})}, status=status,
                                 headers=headers)

    @property
    def granted(self) -> set[str]:
        return {scope.strip() for scope in self.scopes.split(",") if scope.strip()}

    def _scope_needed(self, method: str, params: Params) -> str | None:
        """The scope this call lacks, or None; a method missing from METHOD_SCOPES is refused
        too, so a new call of the channel cannot pass without its scope being named."""
        if method not in METHOD_SCOPES:
            return "(a scope METHOD_SCOPES does not name)"
        scopes = METHOD_SCOPES[method]
        if method == "conversations.replies":
            scopes = (HISTORY_SCOPE.get(str(params.get("channel", "C"))[:1], "channels:history"),)
        missing = [scope for scope in scopes if scope not in self.granted]
        return missing[0] if missing else None

    def _m_auth_test(self, p: Params) -> Params:
        return {"url": "https://fake.slack.com/", "team": "Fake", "user": "myclaw",
                "team_id": TEAM, "user_id": BOT_USER, "bot_id": BOT_ID}

    def _m_apps_connections_open(self, p: Params) -> Params:
        return {"url": self.socket_url or f"ws://127.0.0.1:{self.port}/socket"}

    @property
    def disconnecting_socket_url(self) -> str:
        """A Socket Mode URL whose WebSocket opens and says `disconnect` instead of `hello`."""
        return f"ws://127.0.0.1:{self.port}/socket-disconnect"

    def _post(self, channel: str, p: Params, ts: str | None = None) -> Params:
        ts = ts or self.new_ts()
        message = {"channel": channel, "ts": ts, "text": p.get("text", ""),
                   "blocks": p.get("blocks") or [], "thread_ts": p.get("thread_ts"),
                   "user": BOT_USER, "bot_id": BOT_ID}
        self.messages[(channel, ts)] = message
        return message

    def _m_chat_postMessage(self, p: Params) -> Params | str:
        problem = self._check(p)
        if problem:
            return problem
        message = self._post(p["channel"], p)
        return {"channel": p["channel"], "ts": message["ts"], "message": message}

    def _check(self, p: Params) -> str | None:
        if not str(p.get("text", "")).strip() and not p.get("blocks"):
            return "no_text"
        if len(str(p.get("text", ""))) > 40_000:
            return "msg_too_long"
        if p.get("blocks") and block_problem(p["blocks"]):
            return "invalid_blocks"
        return None

    def _m_chat_update(self, p: Params) -> Params | str:
        key = (p["channel"], p["ts"])
        if key not in self.messages:
            return "message_not_found"
        if p.get("blocks") and block_problem(p["blocks"]):
            return "invalid_blocks"
        message = self.messages[key]
        message["text"] = p.get("text", message["text"])
        if "blocks" in p:
            message["blocks"] = p["blocks"] or []
        return {"channel": p["channel"], "ts": p["ts"]}

    def _m_chat_postEphemeral(self, p: Params) -> Params:
        return {"message_ts": self.new_ts()}

    def _m_chat_startStream(self, p: Params) -> Params | str:
        if not self.streaming:
            return "unknown_method"
        message = self._post(p["channel"], {"text": p.get("markdown_text", ""),
                                            "thread_ts": p.get("thread_ts")})
        message["streaming"] = True
        return {"channel": p["channel"], "ts": message["ts"]}

    def _m_chat_appendStream(self, p: Params) -> Params | str:
        message = self.messages.get((p["channel"], p["ts"]))
        if message is None or not message.get("streaming"):
            return "message_not_in_streaming_state"
        message["text"] += p.get("markdown_text", "")
        return {"channel": p["channel"], "ts": p["ts"]}

    def _m_chat_stopStream(self, p: Params) -> Params | str:
        result = self._m_chat_appendStream({**p, "markdown_text": p.get("markdown_text") or ""})
        if isinstance(result, str):
            return result
        self.messages[(p["channel"], p["ts"])]["streaming"] = False
        return result

    def _m_conversations_open(self, p: Params) -> Params:
        user = str(p["users"])
        return {"channel": {"id": f"D{user[1:]}"}}

    def _m_conversations_replies(self, p: Params) -> Params:
        replies = [m for (c, _), m in self.messages.items()
                   if c == p["channel"] and m.get("thread_ts") == p["ts"]]
        return {"messages": replies}

    def _m_usergroups_users_list(self, p: Params) -> Params:
        return {"users": self.usergroups.get(str(p["usergroup"]), [])}

    def _m_users_info(self, p: Params) -> Params:
        user: Params = {"id": str(p["user"]), "name": str(p["user"]).lower()}
        if str(p.get("include_locale", "")).lower() in ("true", "1"):
            user["locale"] = self.locales.get(str(p["user"]), "en-US")
        return {"user": user}

    def _m_files_getUploadURLExternal(self, p: Params) -> Params:
        file_id = f"F{next(self._ids)}"
        self.uploads[file_id] = {"filename": p.get("filename"), "length": int(p.get("length", 0)),
                                 "snippet_type": p.get("snippet_type")}
        return {"upload_url": f"http://127.0.0.1:{self.port}/upload/{file_id}", "file_id": file_id}

    def _m_files_completeUploadExternal(self, p: Params) -> Params | str:
        files = json.loads(p["files"]) if isinstance(p["files"], str) else p["files"]
        for f in files:
            upload = self.uploads.get(f["id"])
            if upload is None or "data" not in upload:
                return "file_not_found"
            upload.update(title=f.get("title"), channel=p.get("channel_id"),
                          thread_ts=p.get("thread_ts"), comment=p.get("initial_comment"))
        return {"files": [{"id": f["id"]} for f in files]}

    async def _upload(self, request: web.Request) -> web.Response:
        file_id = request.match_info["file"]
        if file_id not in self.uploads:
            return web.Response(status=404)
        self.uploads[file_id]["data"] = await request.read()
        self._notify()
        return web.Response(text=f"OK - {len(self.uploads[file_id]['data'])}")

    async def _download(self, request: web.Request) -> web.Response:
        file_id = request.match_info["file"]
        self.downloads.append(file_id)
        self._notify()
        if (request.headers.get("Authorization") != f"Bearer {self.bot_token}"
                or DOWNLOAD_SCOPE not in self.granted):
            return web.Response(status=302, headers={"Location": "https://fake.slack.com/login"})
        if file_id not in self.files:
            return web.Response(status=404)
        return web.Response(body=self.files[file_id])

    # --- Socket Mode ------------------------------------------------------------------------

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._sockets.append(ws)
        self._notify()
        await ws.send_str(json.dumps({"type": "hello", "num_connections": len(self._sockets),
                                      "connection_info": {"app_id": "A1"}}))
        try:
            async for frame in ws:
                if frame.type != aiohttp.WSMsgType.TEXT:
                    continue
                data = json.loads(frame.data)
                event = self.acks.get(data.get("envelope_id", ""))
                if event is not None:
                    event.set()
                    self._notify()
        finally:
            self._sockets.remove(ws)
        return ws

    async def _disconnecting_socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_str(json.dumps({"type": "disconnect", "reason": "link_disabled"}))
        await ws.close()
        return ws

    @property
    def connections(self) -> int:
        return len(self._sockets)


async def _params(request: web.Request) -> Params:
    """A call's arguments: the SDK sends JSON, a form, or query parameters, method by method."""
    body = await request.read()
    params: Params = dict(request.query)
    if request.content_type == "application/json":
        return {**params, **json.loads(body or b"{}")}
    params.update(parse_qsl(body.decode(), keep_blank_values=True))
    for key in ("blocks", "files"):
        if isinstance(params.get(key), str) and params[key].startswith("["):
            params[key] = json.loads(params[key])
    return params


async def post_signed(url: str, secret: str, body: bytes, *, content_type: str = "application/json",
                      timestamp: int | str | None = None, signature: str | None = None,
                      retry: int | None = None) -> tuple[int, str]:
    """An Events API request as Slack sends it (signed unless `signature` is given)."""
    stamp = int(time.time()) if timestamp is None else timestamp
    headers = {"Content-Type": content_type, "X-Slack-Request-Timestamp": str(stamp),
               "X-Slack-Signature": signature or sign(secret, body, stamp)}
    if retry is not None:
        headers["X-Slack-Retry-Num"] = str(retry)
    async with aiohttp.ClientSession() as session, session.post(url, data=body,
                                                                headers=headers) as response:
        return response.status, await response.text()
