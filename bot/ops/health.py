"""`GET /healthz` for Docker's HEALTHCHECK, systemd watchdogs and uptime monitors.

200 with `{"status": "ok", "store": true, "store_backend": "sqlite", "channels": {"telegram":
true, ...}}` when the store answers (`store_backend`: "sqlite" or "postgresql") and every started
channel reports `connected`; otherwise 503 with the same body (status "degraded"), so a probe can
tell which part is down. Nothing else is served, and the body names
only parts, never hosts, ids or errors. Started by the app when `[health] enabled = true`, as
a route on the process's shared listener (bot/core/listeners.py): a webhook naming the same
address and port is served by the same server.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiohttp import web

from bot.config.settings import Config
from bot.core.errors import MyclawError
from bot.core.listeners import ListenerError, Listeners, Route
from bot.store.protocol import Store

log = logging.getLogger(__name__)

# A store that does not answer `SELECT 1` within this is as good as down for a probe.
STORE_PING_TIMEOUT_SECONDS = 2.0


def channel_states(channels: dict[str, Any]) -> dict[str, bool]:
    """Every channel running in this process, the terminal included, and whether it is
    connected now: what /healthz and the console's Health page both show."""
    return {name: bool(getattr(channel, "connected", False))
            for name, channel in sorted(channels.items())}


class HealthError(MyclawError):
    """The health endpoint could not listen (address in use, bad address)."""


class HealthServer:
    def __init__(self, config: Config, store: Store, channels: dict[str, Any],
                 listeners: Listeners | None = None):
        section = config["health"]
        self.listen: str = section["listen"]
        self._configured_port: int = section["port"]
        self.store = store
        # Shared with the app: channels started later may be added to this dict.
        self.channels = channels
        self._listeners = listeners or Listeners()
        self._route: Route | None = None
        self.port: int | None = None

    async def status(self) -> tuple[int, dict[str, Any]]:
        """The HTTP status and JSON body a probe receives right now."""
        try:
            store_ok = await asyncio.wait_for(self.store.ping(), STORE_PING_TIMEOUT_SECONDS)
        except TimeoutError:
            store_ok = False
        channels = channel_states(self.channels)
        healthy = store_ok and all(channels.values())
        body = {"status": "ok" if healthy else "degraded", "store": store_ok,
                "store_backend": self.store.dialect, "channels": channels}
        return (200 if healthy else 503), body

    async def _healthz(self, request: web.Request) -> web.Response:
        code, body = await self.status()
        return web.json_response(body, status=code, headers={"Cache-Control": "no-store"})

    async def start(self) -> None:
        try:
            self._route = await self._listeners.route(self.listen, self._configured_port, "GET",
                                                      "/healthz", self._healthz)
        except ListenerError as exc:
            raise HealthError(f"[health] {exc}") from exc
        self.port = self._route.port
        log.info("health endpoint on http://%s:%s/healthz", self.listen, self.port)

    async def stop(self) -> None:
        if self._route is not None:
            route, self._route = self._route, None
            await route.remove()
