"""Fixtures of the Slack tests: the fake Slack, an injected clock, and a starter of real Apps
(store, registry, agent against the fake Anthropic) with the real Slack channel."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

import pytest

from bot.app import App
from tests.conftest import FAKE_ENV, make_config
from tests.fakes.slack_server import FakeSlack
from tests.jobs.test_jobs import Clock
from tests.support.slack_support import ADA, BOB, running, slack_env, slack_overrides

SENDERS = {f"slack:{ADA}": "supervised", f"slack:{BOB}": "full", "unknown": "pairing"}


@pytest.fixture
async def slack():
    async with FakeSlack() as fake:
        yield fake


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def bot(tmp_path, slack, fake_anthropic, store_backend, clock):
    """`app, channel = await bot(senders=…, slack_section={…}, overrides={…})`; `app=` starts
    a new channel on an existing App (a restart of the channel); `fresh=True` a new App on the
    same store (a restart of the process)."""
    async with AsyncExitStack() as stack:
        opened: list[tuple[App, Any]] = []

        async def start(app: App | None = None, *, fresh: bool = False,
                        senders: dict[str, str] | None = None,
                        slack_section: dict[str, Any] | None = None,
                        overrides: dict[str, Any] | None = None) -> tuple[App, Any]:
            if fresh:
                old_app, old_channel = opened[-1]
                await old_channel.stop()
                await old_app.close()
                app = await App.open(old_app.config, clock=clock)
                stack.push_async_callback(app.close)
            elif app is None:
                env = {**FAKE_ENV, "ANTHROPIC_BASE_URL": fake_anthropic.base_url,
                       **store_backend.env, **slack_env(slack)}
                config = make_config(tmp_path, {
                    "agent": {"llm_max_retries": 1, "llm_timeout_seconds": 10},
                    "senders": senders or SENDERS, **slack_overrides(slack, **(slack_section or {})),
                    **(overrides or {})}, env=env)
                app = await App.open(config, clock=clock)
                stack.push_async_callback(app.close)
            channel = await stack.enter_async_context(running(app))
            opened.append((app, channel))
            return app, channel

        yield start
