"""A fake WhatsApp Cloud API (Meta's Graph API) on 127.0.0.1, and a driver for the bot's webhook.

    async with FakeWhatsApp() as wa:
        config: [whatsapp] base_url = wa.base_url, phone_number_id = wa.phone_number_id;
                env WHATSAPP_ACCESS_TOKEN = wa.token (+ the app secret and verify token)
        driver = wa.driver(f"http://127.0.0.1:{port}/whatsapp", app_secret)
        await driver.text(ADA, "hello")                   # a signed delivery; returns the status
        sent = await wa.wait_for(lambda m: m.to == ADA)   # what the bot sent

The Graph API side: `GET /{v}/{phone}` (the number), `POST /{v}/{phone}/messages` (text,
interactive buttons and lists, image, document, template; read receipts with the typing
indicator), `POST /{v}/{phone}/media` (upload), `GET /{v}/{media-id}` and the media URL
(download, bearer token required), `GET /{v}/{waba}/subscribed_apps`. Every request needs the
bearer token (else 401, code 190). WhatsApp's limits are enforced as error code 100 (text 4,096,
card body 1,024, three buttons of ≤ 20 characters, ids ≤ 256, list rows ≤ 10). The 24-hour
window: a free-form message to someone who has not written (through the driver, or `opened`)
within 24 hours is refused with 131047; templates pass, when their name is in `templates`.
`rate_limit(n)` refuses the next n messages with 130429, `refuse_next(code, n)` with any code.
Media: `await serve_media_elsewhere("localhost")` answers media URLs on a second port of this
server under that host name (Meta's URLs are on another host than the API's); `sha256_of`
gives the hash a media lookup declares (None: none declared).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from tests.fakes import EVENTUALLY, unique_suffix

WINDOW_SECONDS = 24 * 3600


def _error(code: int, message: str, status: int = 400, details: str = "") -> web.Response:
    body = {"error": {"message": message, "type": "OAuthException", "code": code,
                      "error_data": {"messaging_product": "whatsapp", "details": details},
                      "fbtrace_id": "Afake"}}
    return web.json_response(body, status=status)


@dataclass
class Sent:
    """A message the bot sent (through POST /messages)."""

    wamid: str
    to: str
    type: str
    body: dict[str, Any]

    @property
    def text(self) -> str:
        """What a person reads: a text's body, a card's body, a template's parameter."""
        if self.type == "text":
            return self.body["text"]["body"]
        if self.type == "interactive":
            return self.body["interactive"]["body"]["text"]
        if self.type == "template":
            return self.body["template"]["components"][0]["parameters"][0]["text"]
        media = self.body.get(self.type) or {}
        return media.get("caption", "")

    @property
    def reply_to(self) -> str:
        return (self.body.get("context") or {}).get("message_id", "")

    def button_ids(self) -> list[str]:
        interactive = self.body.get("interactive") or {}
        action = interactive.get("action") or {}
        if interactive.get("type") == "button":
            return [b["reply"]["id"] for b in action["buttons"]]
        return [row["id"] for section in action.get("sections", []) for row in section["rows"]]

    def button_titles(self) -> list[str]:
        interactive = self.body.get("interactive") or {}
        action = interactive.get("action") or {}
        return [b["reply"]["title"] for b in action.get("buttons", [])]


@dataclass
class Upload:
    media_id: str
    filename: str
    media_type: str
    data: bytes


@dataclass
class FakeWhatsApp:
    token: str = field(default_factory=lambda: f"EAAtest{unique_suffix()}")
    phone_number_id: str = "1098765432"
    version: str = "v23.0"
    templates: set[str] = field(default_factory=set)
    clock: Callable[[], float] = time.time
    sent: list[Sent] = field(default_factory=list)
    reads: list[dict[str, Any]] = field(default_factory=list)
    uploads: list[Upload] = field(default_factory=list)
    downloads: list[str] = field(default_factory=list)
    refused: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    last_inbound: dict[str, float] = field(default_factory=dict)
    base_url: str = ""
    media_url: str = ""     # where media URLs point ("": base_url)
    sha256_of: Callable[[bytes], str | None] = lambda data: hashlib.sha256(data).hexdigest()

    def __post_init__(self) -> None:
        self._media: dict[str, tuple[bytes, str]] = {}
        self._refusals: list[int] = []
        self._runner: web.AppRunner | None = None
        self._changed = asyncio.Event()

    async def __aenter__(self) -> FakeWhatsApp:
        app = web.Application(client_max_size=128 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._route)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.base_url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def serve_media_elsewhere(self, host: str = "localhost") -> str:
        """Media URLs from now on name `host` and a second port of this server; that base."""
        assert self._runner is not None
        before = {address[1] for address in self._runner.addresses}
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        (port,) = {address[1] for address in self._runner.addresses} - before
        self.media_url = f"http://{host}:{port}"
        return self.media_url

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    # --- what tests arrange -------------------------------------------------------------------

    def opened(self, wa_id: str, at: float | None = None) -> None:
        """`wa_id` wrote at `at` (now by default): free-form messages pass for 24 hours."""
        self.last_inbound[wa_id] = self.clock() if at is None else at

    def add_media(self, data: bytes, mime_type: str) -> str:
        media_id = f"media{secrets.token_hex(4)}"
        self._media[media_id] = (data, mime_type)
        return media_id

    def rate_limit(self, times: int) -> None:
        self.refuse_next(130429, times)

    def refuse_next(self, code: int, times: int = 1) -> None:
        """The next `times` messages are refused with `code` (130429: a rate limit, 100: an
        invalid parameter, as for formatting WhatsApp would not take)."""
        self._refusals += [code] * times

    def driver(self, webhook_url: str, app_secret: str) -> WebhookDriver:
        return WebhookDriver(self, webhook_url, app_secret)

    # --- what tests read ----------------------------------------------------------------------

    def to(self, wa_id: str, type_: str | None = None) -> list[Sent]:
        return [m for m in self.sent if m.to == wa_id and (type_ is None or m.type == type_)]

    def texts_to(self, wa_id: str) -> list[str]:
        return [m.text for m in self.to(wa_id)]

    async def wait_for(self, predicate: Callable[[Sent], bool], timeout: float = EVENTUALLY,
                       count: int = 1) -> Sent:
        """The `count`-th sent message matching `predicate`, waiting for it."""
        return (await self.wait_all(predicate, count, timeout))[-1]

    async def wait_all(self, predicate: Callable[[Sent], bool], count: int,
                       timeout: float = EVENTUALLY) -> list[Sent]:
        await self.wait_until(lambda: len([m for m in self.sent if predicate(m)]) >= count,
                              timeout)
        return [m for m in self.sent if predicate(m)]

    async def wait_until(self, condition: Callable[[], bool], timeout: float = EVENTUALLY) -> None:
        async with asyncio.timeout(timeout):
            while not condition():
                self._changed.clear()
                await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()

    # --- the Graph API ------------------------------------------------------------------------

    async def _route(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return _error(190, "Invalid OAuth access token.", 401)
        parts = request.path.strip("/").split("/")
        try:
            if parts[0] == "_media" and request.method == "GET":
                return self._media_bytes(parts[1])
            if parts[0] != self.version:
                return _error(2500, "Unknown path components", 400)
            return await self._api(request, parts[1:])
        finally:
            self._notify()

    async def _api(self, request: web.Request, parts: list[str]) -> web.StreamResponse:
        if parts == [self.phone_number_id] and request.method == "GET":
            return web.json_response({"display_phone_number": "+1 555-0100",
                                      "verified_name": "myclaw test", "id": self.phone_number_id})
        if parts == [self.phone_number_id, "messages"] and request.method == "POST":
            return self._message(await request.json())
        if parts == [self.phone_number_id, "media"] and request.method == "POST":
            return await self._upload(request)
        if len(parts) == 2 and parts[1] == "subscribed_apps":
            return web.json_response({"data": [{"whatsapp_business_api_data": {
                "name": "myclaw test app", "id": "42"}}]})
        if len(parts) == 1 and parts[0] in self._media and request.method == "GET":
            data, mime = self._media[parts[0]]
            info = {"url": f"{self.media_url or self.base_url}/_media/{parts[0]}",
                    "mime_type": mime, "sha256": self.sha256_of(data), "file_size": len(data),
                    "id": parts[0], "messaging_product": "whatsapp"}
            if info["sha256"] is None:
                del info["sha256"]
            return web.json_response(info)
        return _error(100, "Unsupported request", 400)

    def _media_bytes(self, media_id: str) -> web.StreamResponse:
        if media_id not in self._media:
            return web.Response(status=404)
        self.downloads.append(media_id)
        data, mime = self._media[media_id]
        return web.Response(body=data, content_type=mime)

    async def _upload(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload = form.get("file")
        if form.get("messaging_product") != "whatsapp" or not isinstance(upload, web.FileField):
            return _error(100, "Invalid parameter", details="file and messaging_product needed")
        media_id = f"up{secrets.token_hex(4)}"
        self.uploads.append(Upload(media_id, upload.filename, str(form.get("type", "")),
                                   upload.file.read()))
        return web.json_response({"id": media_id})

    def _message(self, body: dict[str, Any]) -> web.Response:
        if body.get("messaging_product") != "whatsapp":
            return _error(100, "Invalid parameter", details="messaging_product is required")
        if body.get("status") == "read":
            self.reads.append(body)
            return web.json_response({"success": True})
        problem = _problem(body)
        if problem:
            self.refused.append((100, body))
            return _error(100, "Invalid parameter", details=problem)
        if self._refusals:
            code = self._refusals.pop(0)
            self.refused.append((code, body))
            return _error(code, "Rate limit hit" if code == 130429 else "Invalid parameter",
                          details="refused as the test asked")
        to = str(body["to"])
        if body["type"] == "template":
            if body["template"]["name"] not in self.templates:
                self.refused.append((132001, body))
                return _error(132001, "Template name does not exist in the translation")
        elif self.clock() - self.last_inbound.get(to, float("-inf")) > WINDOW_SECONDS:
            self.refused.append((131047, body))
            return _error(131047, "Re-engagement message", details="Message failed to send "
                          "because more than 24 hours have passed since the customer last "
                          "replied to this number.")
        wamid = f"wamid.{secrets.token_hex(8)}"
        self.sent.append(Sent(wamid, to, body["type"], body))
        return web.json_response({"messaging_product": "whatsapp",
                                  "contacts": [{"input": to, "wa_id": to}],
                                  "messages": [{"id": wamid}]})


def _problem(body: dict[str, Any]) -> str:
    """What WhatsApp would refuse in a message body ("" when nothing)."""
    kind = body.get("type")
    if not body.get("to"):
        return "to is required"
    if kind == "text":
        text = (body.get("text") or {}).get("body", "")
        return "" if 0 < len(text) <= 4096 else f"text body length {len(text)}"
    if kind == "interactive":
        return _interactive_problem(body.get("interactive") or {})
    if kind in ("image", "document", "audio"):
        media = body.get(kind) or {}
        return "" if media.get("id") or media.get("link") else "media id required"
    if kind == "template":
        return "" if (body.get("template") or {}).get("name") else "template name required"
    return f"unsupported type {kind!r}"


def _interactive_problem(interactive: dict[str, Any]) -> str:
    text = (interactive.get("body") or {}).get("text", "")
    if not 0 < len(text) <= 1024:
        return f"interactive body length {len(text)}"
    action = interactive.get("action") or {}
    if interactive.get("type") == "button":
        buttons = action.get("buttons") or []
        if not 1 <= len(buttons) <= 3:
            return f"{len(buttons)} buttons"
        for button in buttons:
            reply = button.get("reply") or {}
            if not 0 < len(reply.get("title", "")) <= 20 or not 0 < len(reply.get("id", "")) <= 256:
                return f"button {reply!r} out of bounds"
        return ""
    if interactive.get("type") == "list":
        rows = [row for section in action.get("sections", []) for row in section.get("rows", [])]
        if not 1 <= len(rows) <= 10 or not 0 < len(action.get("button", "")) <= 20:
            return f"list with {len(rows)} rows"
        bad = [r for r in rows if not 0 < len(r.get("title", "")) <= 24 or len(r.get("id", "")) > 200]
        return f"rows out of bounds: {bad!r}" if bad else ""
    return f"interactive type {interactive.get('type')!r}"


class WebhookDriver:
    """Posts signed deliveries to the bot's webhook, as Meta does."""

    def __init__(self, fake: FakeWhatsApp, url: str, app_secret: str):
        self.fake = fake
        self.url = url
        self.app_secret = app_secret

    def sign(self, body: bytes) -> str:
        import hmac

        return "sha256=" + hmac.new(self.app_secret.encode(), body, hashlib.sha256).hexdigest()

    def delivery(self, value: dict[str, Any]) -> dict[str, Any]:
        value = {"messaging_product": "whatsapp", "metadata": {
            "display_phone_number": "15550100", "phone_number_id": self.fake.phone_number_id},
            **value}
        return {"object": "whatsapp_business_account",
                "entry": [{"id": "waba1", "changes": [{"field": "messages", "value": value}]}]}

    async def post(self, payload: dict[str, Any] | bytes, signature: str | None = "good") -> int:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        headers = {"Content-Type": "application/json"}
        if signature == "good":
            headers["X-Hub-Signature-256"] = self.sign(body)
        elif signature is not None:
            headers["X-Hub-Signature-256"] = signature
        async with aiohttp.ClientSession() as session, session.post(
                self.url, data=body, headers=headers) as response:
            return response.status

    async def verify(self, token: str, challenge: str = "1158201444") -> tuple[int, str]:
        params = {"hub.mode": "subscribe", "hub.verify_token": token, "hub.challenge": challenge}
        async with aiohttp.ClientSession() as session, session.get(
                self.url, params=params) as response:
            return response.status, await response.text()

    def message(self, wa_id: str, kind: str, content: dict[str, Any], *, wamid: str | None = None,
                timestamp: float | None = None, context: dict[str, Any] | None = None,
                name: str = "Ada") -> dict[str, Any]:
        at = self.fake.clock() if timestamp is None else timestamp
        message = {"from": wa_id, "id": wamid or f"wamid.in{secrets.token_hex(8)}",
                   "timestamp": str(int(at)), "type": kind, kind: content}
        if context:
            message["context"] = context
        return self.delivery({"contacts": [{"profile": {"name": name}, "wa_id": wa_id}],
                              "messages": [message]})

    async def send(self, wa_id: str, kind: str, content: dict[str, Any], **options: Any) -> int:
        delivery = self.message(wa_id, kind, content, **options)
        at = float(delivery["entry"][0]["changes"][0]["value"]["messages"][0]["timestamp"])
        self.fake.opened(wa_id, max(at, self.fake.last_inbound.get(wa_id, at)))
        return await self.post(delivery)

    async def text(self, wa_id: str, body: str, **options: Any) -> int:
        return await self.send(wa_id, "text", {"body": body}, **options)

    async def tap(self, wa_id: str, reply_id: str, card: str, title: str = "Approve") -> int:
        return await self.send(wa_id, "interactive", {"type": "button_reply", "button_reply": {
            "id": reply_id, "title": title}}, context={"from": "15550100", "id": card})

    async def media(self, wa_id: str, kind: str, data: bytes, mime_type: str,
                    **fields: Any) -> int:
        media_id = self.fake.add_media(data, mime_type)
        return await self.send(wa_id, kind, {"id": media_id, "mime_type": mime_type, **fields})

    async def status(self, wamid: str, wa_id: str, state: str, code: int = 0,
                     title: str = "") -> int:
        status: dict[str, Any] = {"id": wamid, "status": state, "timestamp": str(int(time.time())),
                                  "recipient_id": wa_id}
        if code:
            status["errors"] = [{"code": code, "title": title or "failed",
                                 "error_data": {"details": title or "failed"}}]
        return await self.post(self.delivery({"statuses": [status]}))
