"""The Events API endpoint (HTTP): for replicas behind a proxy. It is a route on the process's
shared listener (bot/core/listeners.py), so the Telegram and WhatsApp webhooks and /healthz may
share its address and port.

Slack signs every request: `X-Slack-Signature` = `v0=` + HMAC-SHA256(signing secret,
`v0:{X-Slack-Request-Timestamp}:{raw body}`). The signature and the timestamp are checked on the
raw bytes BEFORE anything is parsed; a wrong signature, or a timestamp more than five minutes
off (a replayed request), gets 401 and nothing is stored. A good request is parsed — JSON for
events, a form with a `payload` field for taps, a plain form for the slash command — and handed
to `receive`, which stores it: Slack gets its 200 only after that (a 503 when storing failed, so
Slack sends it again). The work happens after the answer; Slack wants it within 3 seconds.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web
from slack_sdk.signature import Clock, SignatureVerifier

from bot.core.errors import ChannelError
from bot.core.listeners import ListenerError, Listeners, Route

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1 << 20
Receive = Callable[[str, dict[str, Any]], Awaitable[bool]]


class _InjectedClock(Clock):
    def __init__(self, now: Callable[[], float]):
        self._now = now

    def now(self) -> float:
        return self._now()


def verified(verifier: SignatureVerifier, body: bytes, timestamp: str, signature: str) -> bool:
    """The signature check, refusing a malformed timestamp instead of raising on it."""
    if not timestamp.isdigit() or len(timestamp) > 12 or not signature.startswith("v0="):
        return False
    return verifier.is_valid(body=body, timestamp=timestamp, signature=signature)


def parse(body: bytes, content_type: str) -> tuple[str, dict[str, Any]] | None:
    """(envelope kind, payload) of a verified request, or None when it is not one."""
    if content_type.startswith("application/json"):
        data = json.loads(body)
        if not isinstance(data, dict):
            return None
        kind = {"event_callback": "events_api", "url_verification": "url_verification"}
        return (kind[data["type"]], data) if data.get("type") in kind else None
    form = dict(parse_qsl(body.decode(), keep_blank_values=True))
    if "payload" in form:
        data = json.loads(form["payload"])
        return ("interactive", data) if isinstance(data, dict) else None
    if form.get("ssl_check"):
        return ("ssl_check", form)
    return ("slash_commands", form) if "command" in form else None


class EventsServer:
    def __init__(self, receive: Receive, *, signing_secret: str, path: str, listen: str,
                 port: int, listeners: Listeners, clock: Callable[[], float] | None = None):
        self._receive = receive
        clocked = _InjectedClock(clock) if clock is not None else Clock()
        self._verifier = SignatureVerifier(signing_secret, clock=clocked)
        self._path = path if path.startswith("/") else f"/{path}"
        self._listen = listen
        self._port = port
        self._listeners = listeners
        self._route: Route | None = None
        self.bound_port: int | None = None

    async def start(self) -> int:
        try:
            self._route = await self._listeners.route(self._listen, self._port, "POST",
                                                      self._path, self._on_request)
        except ListenerError as exc:
            raise ChannelError(f"cannot serve the Slack Events API: {exc}") from exc
        self.bound_port = self._route.port
        log.info("slack events listening on %s:%s%s", self._listen, self.bound_port, self._path)
        return self.bound_port

    async def stop(self) -> None:
        route, self._route = self._route, None
        if route is not None:
            await route.remove()

    async def _on_request(self, request: web.Request) -> web.Response:
        if (request.content_length or 0) > MAX_BODY_BYTES:
            return web.Response(status=413, text="request too large")
        body = await request.read()
        if len(body) > MAX_BODY_BYTES:
            return web.Response(status=413, text="request too large")
        if not verified(self._verifier, body, request.headers.get("X-Slack-Request-Timestamp", ""),
                        request.headers.get("X-Slack-Signature", "")):
            log.warning("slack events: refused a request with a wrong or stale signature")
            return web.Response(status=401, text="invalid signature")
        try:
            parsed = parse(body, request.headers.get("Content-Type", ""))
        except (ValueError, UnicodeDecodeError):
            return web.Response(status=400, text="malformed body")
        if parsed is None:
            return web.Response(status=400, text="not a Slack request")
        kind, payload = parsed
        if kind == "url_verification":
            return web.json_response({"challenge": str(payload.get("challenge", ""))})
        if kind == "ssl_check":
            return web.Response(text="")
        try:
            await self._receive(kind, payload)
        except Exception:
            log.exception("slack events: could not store a request; Slack will send it again")
            return web.Response(status=503, text="not stored, send again")
        return web.Response(text="")
