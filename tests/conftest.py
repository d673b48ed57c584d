"""Shared fixtures: a config rooted in a temporary directory, an open store, a call context.

Nothing here reaches the network; fakes of remote services live in tests/fakes/ and bind to
127.0.0.1 only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot import config as config_mod
from bot.policy import Profile
from bot.registry import Registry
from bot.services import Services
from bot.store import Store
from bot.tool import CallContext

FAKE_ENV = {
    "HOME": "/nonexistent-home",
    "ANTHROPIC_API_KEY": "sk-test-anthropic-000000000000",
    "PATH": "/usr/bin:/bin",
}


def make_config(tmp_path: Path, overrides: dict[str, Any] | None = None,
                env: dict[str, str] | None = None) -> config_mod.Config:
    raw: dict[str, Any] = {
        "agent": {"workspace": str(tmp_path / "workspace")},
        "store": {"path": str(tmp_path / "data" / "myclaw.db")},
    }
    for section, values in (overrides or {}).items():
        raw.setdefault(section, {})
        if isinstance(values, dict):
            raw[section].update(values)
        else:
            raw[section] = values
    cfg = config_mod.from_dict(raw, env=dict(FAKE_ENV if env is None else env))
    cfg.workspace.mkdir(parents=True, exist_ok=True)
    return cfg


@pytest.fixture
def config(tmp_path: Path) -> config_mod.Config:
    return make_config(tmp_path)


@pytest.fixture
async def store(config: config_mod.Config):
    async with Store(config.store_path) as opened:
        yield opened


@pytest.fixture
def services(config: config_mod.Config, store: Store) -> Services:
    return Services(config=config, store=store,
                    registry=Registry(Profile.from_config(config.profile())))


@pytest.fixture
def ctx(config: config_mod.Config, services: Services) -> CallContext:
    return CallContext(sender="cli:local", session_id="test-session", channel="cli",
                       workspace=config.workspace, services=services)
