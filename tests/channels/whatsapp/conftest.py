"""The WhatsApp tests' bot: the real App (store, agent, the fake Anthropic) with the WhatsApp
channel started by the App itself, against the fake Graph API, and a driver posting signed
deliveries to its webhook."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.fakes.whatsapp_server import FakeWhatsApp, WebhookDriver

APP_SECRET = "test-app-secret-0123456789"
VERIFY_TOKEN = "test-verify-token"
ADA, BOB, EVE = "393470000001", "393470000002", "393470000666"


@dataclass
class Bot:
    app: Any
    channel: Any
    driver: WebhookDriver

    @property
    def url(self) -> str:
        return self.driver.url


@pytest.fixture
async def wa():
    async with FakeWhatsApp() as fake:
        yield fake


def whatsapp_overrides(wa: FakeWhatsApp, **section: Any) -> dict[str, Any]:
    return {"whatsapp": {"base_url": wa.base_url, "phone_number_id": wa.phone_number_id,
                         "listen": "127.0.0.1", "port": 0, **section}}


def whatsapp_env(wa: FakeWhatsApp) -> dict[str, str]:
    return {"WHATSAPP_ACCESS_TOKEN": wa.token, "WHATSAPP_APP_SECRET": APP_SECRET,
            "WHATSAPP_VERIFY_TOKEN": VERIFY_TOKEN}


@pytest.fixture
async def bot(app_factory, wa):
    """`await bot(senders=..., app=None, **overrides)` → Bot: the App's own channel start-up."""
    apps: list[Any] = []

    async def start(senders: dict[str, str] | None = None, app: Any = None,
                    whatsapp: dict[str, Any] | None = None, **overrides: Any) -> Bot:
        if app is None:
            config = {"senders": senders or {f"whatsapp:{ADA}": "supervised"},
                      **whatsapp_overrides(wa, **(whatsapp or {})), **overrides}
            app = await app_factory(config, env=whatsapp_env(wa))
        await app.start_channels(["whatsapp"])
        apps.append(app)
        channel = app.channels["whatsapp"]
        url = f"http://127.0.0.1:{channel.webhook_port}/whatsapp"
        return Bot(app, channel, wa.driver(url, APP_SECRET))

    yield start
    for app in reversed(apps):
        await app.stop_channels()
