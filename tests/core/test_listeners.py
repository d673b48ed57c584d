"""The shared HTTP listener: routes of several parts on one address and port, added and removed
while it runs; the last route closes the server; a taken route or address is a clear error."""

from __future__ import annotations

import socket

import aiohttp
import pytest
from aiohttp import web

from bot.core.listeners import ListenerError, Listeners


def answering(text: str):
    async def handler(request: web.Request) -> web.Response:
        return web.Response(text=text)
    return handler


async def get(port: int, path: str, method: str = "GET") -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.request(
            method, f"http://127.0.0.1:{port}{path}") as response:
        return response.status, await response.text()


async def test_two_parts_naming_the_same_port_share_one_server():
    listeners = Listeners()
    first = await listeners.route("127.0.0.1", 0, "GET", "/healthz", answering("health"))
    second = await listeners.route("127.0.0.1", 0, "POST", "/whatsapp", answering("wa"))
    assert first.port == second.port
    assert await get(first.port, "/healthz") == (200, "health")
    assert await get(first.port, "/whatsapp", "POST") == (200, "wa")
    assert (await get(first.port, "/whatsapp"))[0] == 405
    assert (await get(first.port, "/other"))[0] == 404
    await first.remove()
    assert (await get(second.port, "/healthz"))[0] == 404   # still serving the other route
    await second.remove()
    with pytest.raises(aiohttp.ClientConnectionError):
        await get(second.port, "/whatsapp", "POST")
    await listeners.close()


async def test_a_route_taken_twice_is_refused_with_both_names():
    listeners = Listeners()
    route = await listeners.route("127.0.0.1", 0, "POST", "/hook", answering("one"))
    with pytest.raises(ListenerError, match="already serves POST /hook"):
        await listeners.route("127.0.0.1", route.port, "POST", "/hook", answering("two"))
    await listeners.close()


async def test_a_port_in_use_is_a_clear_error():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ListenerError, match=f"cannot listen on 127.0.0.1:{port}"):
            await Listeners().route("127.0.0.1", port, "GET", "/x", answering("x"))
