"""The WhatsApp webhook: Meta's subscription check and its signed deliveries.

- `GET ?hub.mode=subscribe&hub.verify_token=…&hub.challenge=…`: when the token matches
  WHATSAPP_VERIFY_TOKEN (compared in constant time) the challenge is echoed, else 403.
- `POST`: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body with the app secret>`
  is checked on the raw bytes before anything is parsed; a missing or wrong signature is 401
  and nothing is stored. A signed delivery is handed to `receive`, which stores it in the
  durable inbox: Meta gets its 200 only after that, and a 503 when storing failed, so it
  delivers again (a re-delivered message is recognised by its id and runs once).

Both are routes on the process's shared listener (bot/core/listeners.py), so Telegram's webhook,
/healthz and this one can share an address and port, behind one reverse proxy.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from bot.core.errors import ChannelError
from bot.core.listeners import ListenerError, Listeners, Route

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Hub-Signature-256"
MAX_DELIVERY_BYTES = 1 << 20

Receive = Callable[[dict[str, Any]], Awaitable[None]]


def signature(secret: str, body: bytes) -> str:
    """The header value Meta sends for `body` (the test driver signs with it too)."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class WebhookServer:
    def __init__(self, receive: Receive, *, app_secret: str, verify_token: str, path: str,
                 listen: str, port: int, listeners: Listeners):
        self._receive = receive
        self._secret = app_secret
        self._verify = verify_token.encode()
        self._path = path if path.startswith("/") else f"/{path}"
        self._listen = listen
        self._port = port
        self._listeners = listeners
        self._routes: list[Route] = []
        self.bound_port: int | None = None

    async def start(self) -> int:
        try:
            self._routes.append(await self._listeners.route(
                self._listen, self._port, "POST", self._path, self._deliveries))
            self._routes.append(await self._listeners.route(
                self._listen, self._port, "GET", self._path, self._verification))
        except ListenerError as exc:
            await self.stop()
            raise ChannelError(f"cannot serve the WhatsApp webhook: {exc}") from exc
        self.bound_port = self._routes[0].port
        log.info("whatsapp webhook listening on %s:%s%s", self._listen, self.bound_port, self._path)
        return self.bound_port

    async def stop(self) -> None:
        routes, self._routes = self._routes, []
        for route in routes:
            await route.remove()

    async def _verification(self, request: web.Request) -> web.Response:
        query = request.query
        given = query.get("hub.verify_token", "").encode()
        if query.get("hub.mode") != "subscribe" or not hmac.compare_digest(given, self._verify):
            log.warning("whatsapp webhook: refused a verification with the wrong token")
            return web.Response(status=403, text="forbidden")
        return web.Response(text=query.get("hub.challenge", ""))

    async def _deliveries(self, request: web.Request) -> web.Response:
        if (request.content_length or 0) > MAX_DELIVERY_BYTES:
            return web.Response(status=413, text="delivery too large")
        body = await request.read()
        given = request.headers.get(SIGNATURE_HEADER, "")
        if not hmac.compare_digest(given.encode(), signature(self._secret, body).encode()):
            log.warning("whatsapp webhook: refused a delivery without a valid signature")
            return web.Response(status=401, text="bad signature")
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return web.Response(status=400, text="body is not JSON")
        if not isinstance(data, dict) or data.get("object") != "whatsapp_business_account":
            return web.Response(status=400, text="not a WhatsApp delivery")
        try:
            await self._receive(data)
        except Exception:
            log.exception("whatsapp webhook: could not store a delivery; Meta will send it again")
            return web.Response(status=503, text="not stored, send again")
        return web.Response(text="ok")
