"""The Telegram webhook endpoint, served with aiohttp (PTB's own needs tornado, not installed).

Telegram (or the reverse proxy in front of us) POSTs each update as JSON with the header
`X-Telegram-Bot-Api-Secret-Token` set to the secret given to setWebhook. A request without the
right secret is refused with 403 before its body is even read, so nothing it carries is
processed. A good update is parsed and handed to `receive`, which stores it: Telegram gets its
200 only after that, and a 503 when storing failed, so it delivers the update again later (a
re-delivered update is recognised by its id and runs once). The answer to the user is sent
later through the Bot API. The endpoint is a route on the process's shared listener
(bot/core/listeners.py): health and the other webhooks may share its address and port.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web
from telegram import Bot, Update

from bot.core.errors import ChannelError
from bot.core.listeners import ListenerError, Listeners, Route

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
# What Telegram accepts as secret_token: 1-256 characters A-Z, a-z, 0-9, _ and -.
_SECRET_SHAPE = re.compile(r"^[A-Za-z0-9_-]{1,256}$")
MAX_UPDATE_BYTES = 1 << 20

Receive = Callable[[Sequence[Update]], Awaitable[None]]


def check_secret_shape(secret: str | None) -> str:
    """The webhook secret, or a one-line ChannelError when it is missing or malformed."""
    if not secret:
        raise ChannelError("Telegram webhook mode needs TELEGRAM_WEBHOOK_SECRET in the environment")
    if not _SECRET_SHAPE.match(secret):
        raise ChannelError("TELEGRAM_WEBHOOK_SECRET must be 1-256 characters of A-Z, a-z, 0-9, _ or -")
    return secret


class WebhookServer:
    """Receives updates on `path` and hands each to `receive` (which stores it) before answering."""

    def __init__(self, bot: Bot, receive: Receive, *, secret: str, path: str,
                 listen: str, port: int, listeners: Listeners | None = None):
        self._bot = bot
        self._listeners = listeners or Listeners()
        self._store = receive
        self._secret = secret.encode()
        self._path = path if path.startswith("/") else f"/{path}"
        self._listen = listen
        self._port = port
        self._route: Route | None = None
        self.bound_port: int | None = None

    async def start(self) -> int:
        try:
            self._route = await self._listeners.route(self._listen, self._port, "POST",
                                                      self._path, self._receive)
        except ListenerError as exc:
            raise ChannelError(f"cannot serve the Telegram webhook: {exc}") from exc
        self.bound_port = self._route.port
        log.info("telegram webhook listening on %s:%s%s", self._listen, self.bound_port, self._path)
        return self.bound_port

    async def stop(self) -> None:
        if self._route is not None:
            route, self._route = self._route, None
            await route.remove()

    async def _receive(self, request: web.Request) -> web.Response:
        given = request.headers.get(SECRET_HEADER, "").encode()
        if not hmac.compare_digest(given, self._secret):
            log.warning("telegram webhook: refused a request without the right secret token")
            return web.Response(status=403, text="forbidden")
        if (request.content_length or 0) > MAX_UPDATE_BYTES:
            return web.Response(status=413, text="update too large")
        try:
            data = json.loads(await request.read())
        except (ValueError, UnicodeDecodeError):
            return web.Response(status=400, text="body is not JSON")
        if not isinstance(data, dict) or not isinstance(data.get("update_id"), int):
            return web.Response(status=400, text="not a Telegram update")
        try:
            update = Update.de_json(data, self._bot)
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("telegram webhook: malformed update %s: %s", data.get("update_id"), exc)
            return web.Response(status=400, text="malformed update")
        try:
            await self._store([update])
        except Exception:
            log.exception("telegram webhook: could not store update %s; Telegram will send it "
                          "again", update.update_id)
            return web.Response(status=503, text="not stored, send again")
        return web.Response(text="ok")
