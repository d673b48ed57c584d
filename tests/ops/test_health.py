"""GET /healthz over real HTTP on 127.0.0.1, against a real store (SQLite and PostgreSQL)."""

from __future__ import annotations

import socket
from dataclasses import dataclass

import httpx
import pytest

from bot.ops.health import HealthError, HealthServer
from tests.conftest import make_config
from tests.support.pg_support import on_both_backends

backend_name = on_both_backends()


@dataclass
class Channel:
    """What the health server needs from a channel adapter: a `connected` flag."""

    connected: bool = True


@pytest.fixture
def health_config(tmp_path):
    return make_config(tmp_path, {"health": {"enabled": True, "listen": "127.0.0.1", "port": 0}})


@pytest.fixture
async def server(health_config, store):
    channels = {"telegram": Channel(), "discord": Channel()}
    health = HealthServer(health_config, store, channels)
    await health.start()
    yield health
    await health.stop()


async def get(server: HealthServer, path: str = "/healthz", method: str = "GET") -> httpx.Response:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}") as client:
        return await client.request(method, path)


async def test_healthz_is_200_when_the_store_answers_and_every_channel_is_connected(
        server, backend_name):
    response = await get(server)
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "store": True, "store_backend": backend_name,
                               "channels": {"discord": True, "telegram": True}}
    assert response.headers["content-type"].startswith("application/json")
    assert response.headers["cache-control"] == "no-store"


async def test_a_disconnected_channel_makes_it_503_and_names_the_channel(server, backend_name):
    server.channels["discord"].connected = False
    response = await get(server)
    assert response.status_code == 503
    assert response.json() == {"status": "degraded", "store": True, "store_backend": backend_name,
                               "channels": {"discord": False, "telegram": True}}
    server.channels["discord"].connected = True
    assert (await get(server)).status_code == 200


async def test_a_store_that_does_not_answer_makes_it_503(server, store):
    await store.close()
    response = await get(server)
    assert response.status_code == 503
    assert response.json()["store"] is False
    assert response.json()["channels"] == {"discord": True, "telegram": True}


async def test_a_channel_without_a_connected_flag_counts_as_down(health_config, store):
    health = HealthServer(health_config, store, {"cli": object()})
    await health.start()
    try:
        response = await get(health)
    finally:
        await health.stop()
    assert response.status_code == 503
    assert response.json()["channels"] == {"cli": False}


async def test_with_no_channels_started_the_store_alone_decides(health_config, store):
    health = HealthServer(health_config, store, {})
    await health.start()
    try:
        assert (await get(health)).json() == {"status": "ok", "store": True,
                                              "store_backend": store.dialect, "channels": {}}
    finally:
        await health.stop()


async def test_only_get_healthz_is_served(server):
    assert (await get(server, "/")).status_code == 404
    assert (await get(server, "/healthz/../admin")).status_code == 404
    assert (await get(server, "/healthz", method="POST")).status_code == 405


async def test_port_zero_picks_a_free_port_and_exposes_it(server):
    assert isinstance(server.port, int) and server.port > 0
    with socket.create_connection(("127.0.0.1", server.port), timeout=2):
        pass


async def test_a_port_in_use_is_a_clear_error(tmp_path, store):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = make_config(tmp_path, {"health": {"enabled": True, "port": port}})
        health = HealthServer(config, store, {})
        with pytest.raises(HealthError, match=rf"\[health\] cannot listen on 127.0.0.1:{port}"):
            await health.start()
    assert health.port is None


async def test_after_stop_nothing_listens(health_config, store):
    health = HealthServer(health_config, store, {})
    await health.start()
    port = health.port
    await health.stop()
    await health.stop()  # a second stop is harmless
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient() as client:
            await client.get(f"http://127.0.0.1:{port}/healthz")
