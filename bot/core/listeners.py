"""The process's HTTP listeners: one aiohttp server per (address, port), shared by every part that
names that address and port (the Telegram and WhatsApp webhooks, /healthz).

    route = await listeners.route("127.0.0.1", 8443, "POST", "/whatsapp", handler)
    route.port            # the bound port (useful with port 0)
    await route.remove()  # the last route of a server closes it

Routes can come and go while the server runs (channels start one after another), so each server
has a single catch-all route that looks the request's method and path up in its own table; an
unknown path is 404, a known path with another method 405. Port 0 asks for any free port, and
every later request for port 0 on the same address shares that server. A body larger than
`MAX_BODY_BYTES` is refused by aiohttp before any handler runs; handlers keep their own,
smaller limits. aiohttp's server side is imported when the first server opens, so a process
that listens on nothing (Telegram polling without /healthz) never loads it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bot.core.errors import MyclawError

if TYPE_CHECKING:
    from aiohttp import web

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 4 << 20
Handler = Callable[["web.Request"], Awaitable["web.StreamResponse"]]


class ListenerError(MyclawError):
    """A listener could not be opened (address in use, bad address) or a route is taken."""


@dataclass
class _Server:
    listen: str
    asked_port: int
    runner: web.AppRunner | None = None
    port: int = 0
    routes: dict[tuple[str, str], Handler] = field(default_factory=dict)

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        handler = self.routes.get((request.method, request.path))
        if handler is None and request.method == "HEAD":
            handler = self.routes.get(("GET", request.path))
        if handler is not None:
            return await handler(request)
        if any(path == request.path for _, path in self.routes):
            return web.Response(status=405, text="method not allowed")
        return web.Response(status=404, text="not found")

    async def open(self) -> None:
        from aiohttp import web

        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_route("*", "/{tail:.*}", self.dispatch)
        # No access log: health probes every few seconds would drown the useful lines.
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.listen, self.asked_port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise ListenerError(f"cannot listen on {self.listen}:{self.asked_port}: "
                                f"{exc.strerror or exc}; stop what uses it or choose another "
                                "port") from exc
        self.runner = runner
        self.port = int(runner.addresses[0][1]) if runner.addresses else self.asked_port

    async def close(self) -> None:
        runner, self.runner = self.runner, None
        if runner is not None:
            await runner.cleanup()


class Route:
    """One method and path on a shared server; `remove` takes it off (and closes the server
    when it was the last)."""

    def __init__(self, owner: Listeners, server: _Server, key: tuple[str, str]):
        self._owner = owner
        self._server = server
        self._key = key

    @property
    def port(self) -> int:
        return self._server.port

    async def remove(self) -> None:
        await self._owner._remove(self._server, self._key)


class Listeners:
    def __init__(self) -> None:
        self._servers: dict[tuple[str, int], _Server] = {}

    async def route(self, listen: str, port: int, method: str, path: str,
                    handler: Handler) -> Route:
        """Serve `handler` for `method path` on listen:port (opened on first use)."""
        path = path if path.startswith("/") else f"/{path}"
        server = self._servers.get((listen, port))
        if server is None:
            server = _Server(listen, port)
            await server.open()
            self._servers[(listen, port)] = server
            self._servers[(listen, server.port)] = server
            log.info("listening on http://%s:%s", listen, server.port)
        key = (method.upper(), path)
        if key in server.routes:
            raise ListenerError(f"{listen}:{server.port} already serves {key[0]} {path}: give "
                                "one of the two parts another path or port")
        server.routes[key] = handler
        return Route(self, server, key)

    async def _remove(self, server: _Server, key: tuple[str, str]) -> None:
        server.routes.pop(key, None)
        if server.routes:
            return
        for name in [name for name, found in self._servers.items() if found is server]:
            del self._servers[name]
        await server.close()

    async def close(self) -> None:
        """Close every server (at process end, whatever routes are left)."""
        servers = {id(s): s for s in self._servers.values()}.values()
        self._servers.clear()
        for server in servers:
            await server.close()
