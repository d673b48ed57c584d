"""Shared fixtures: a config rooted in a temporary directory, an open store, a call context.

Nothing here reaches the network; fakes of remote services live in tests/fakes/ and bind to
127.0.0.1 only.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from bot.app import build_services
from bot.config import settings as config_mod
from bot.core import logs
from bot.core.identity import OPERATOR, Level
from bot.core.policy import Profile
from bot.core.tool import CallContext
from bot.ops.surfaces import OPERATOR_SURFACES
from bot.runtime.services import Services
from bot.store.sqlite import Store
from bot.toolbox.registry import Registry
from tests.support.pg_support import (
    Backend,
    PgTestSchema,
    database_url_for_tests,
    require_postgres,
    unreachable_reason,
)

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


@pytest.fixture(autouse=True)
def english_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """The terminal follows LANG: tests read its English words whatever the machine's locale
    (a test of another language sets its own)."""
    for name in ("LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", "C.UTF-8")


@pytest.fixture(autouse=True)
def root_logging_restored():
    """A test that runs the CLI in-process installs myclaw's log handler on the root logger; it is
    taken off afterwards so its redacting filter (which drops exc_info) cannot reach later tests."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in [h for h in root.handlers if h not in handlers]:
        if isinstance(handler, logs.MyclawHandler):
            root.removeHandler(handler)
            handler.close()
    root.setLevel(level)
    logging.captureWarnings(False)


@pytest.fixture
def config(tmp_path: Path) -> config_mod.Config:
    return make_config(tmp_path)


@pytest.fixture(scope="session")
def pg_schema():
    """This run's PostgreSQL schema (created and migrated once, dropped at the end); skips, or
    under CI=true fails, when no server is reachable (see tests/support/pg_support.py)."""
    url = database_url_for_tests()
    require_postgres(unreachable_reason(url), os.environ)
    schema = PgTestSchema(url)
    asyncio.run(schema.create())
    yield schema
    asyncio.run(schema.drop())


@pytest.fixture
def backend_name() -> str:
    """SQLite; a module runs its tests on both with `backend_name = on_both_backends()`."""
    return "sqlite"


@pytest.fixture
def _pg_schema_if_needed(backend_name: str, request: pytest.FixtureRequest) -> PgTestSchema | None:
    # Resolved here, outside the event loop: the session fixture runs its own asyncio.run.
    return request.getfixturevalue("pg_schema") if backend_name == "postgresql" else None


@pytest.fixture
async def store_backend(backend_name: str, config: config_mod.Config,
                        _pg_schema_if_needed: PgTestSchema | None) -> Backend:
    if _pg_schema_if_needed is None:
        return Backend("sqlite", lambda: Store(config.store_path), f"sqlite:{config.store_path}", {})
    schema = _pg_schema_if_needed
    await schema.empty()
    return Backend("postgresql", schema.store, schema.store_url,
                   {"MYCLAW_DATABASE_URL": schema.store_url})


@pytest.fixture
async def store(store_backend: Backend):
    async with store_backend.open() as opened:
        yield opened


@pytest.fixture
def services(config: config_mod.Config, store: Store) -> Services:
    return build_services(config, store, Registry(Profile.from_config(config.profile())))


@pytest.fixture
def ctx(config: config_mod.Config, services: Services) -> CallContext:
    return services.call_context(sender=OPERATOR, level=Level.FULL, session_id="test-session",
                                 chat="local", workspace=config.workspace)


@pytest.fixture
def provider_name() -> str:
    """Anthropic; a module or test runs on both providers with tests/support/providers.py."""
    return "anthropic"


@pytest.fixture
async def fake_model(provider_name: str):
    """The fake model API of the test's provider on 127.0.0.1: tests/fakes/anthropic_server.py
    or tests/fakes/openai_server.py (the same scripting API)."""
    from tests.fakes.anthropic_server import FakeAnthropic
    from tests.fakes.openai_server import FakeOpenAI

    async with (FakeOpenAI() if provider_name == "openai" else FakeAnthropic()) as fake:
        yield fake


@pytest.fixture
def fake_anthropic(fake_model):
    """A fake Anthropic Messages API on 127.0.0.1 (see tests/fakes/anthropic_server.py); in a
    test run on both providers, the fake of the provider in use."""
    return fake_model


@pytest.fixture
async def tg():
    """A fake Telegram Bot API on 127.0.0.1 (see tests/fakes/telegram_server.py)."""
    from tests.fakes.telegram_server import FakeTelegram

    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
async def app_factory(tmp_path: Path, fake_model, provider_name: str, store_backend: Backend):
    """Build real Apps (store, registry, LLM client, agent) talking to the fake Anthropic, on
    the module's store backend (SQLite unless it runs on both).

    `await app_factory(overrides={...}, env={...})`; every app is closed at teardown.
    """
    from bot.app import App

    opened: list[App] = []

    async def factory(overrides: dict[str, Any] | None = None,
                      env: dict[str, str] | None = None) -> App:
        from tests.support.providers import provider_overrides

        merged: dict[str, Any] = {"agent": {"llm_max_retries": 1, "llm_timeout_seconds": 10}}
        model_overrides, model_env = provider_overrides(provider_name, fake_model)
        for section, values in [*model_overrides.items(), *(overrides or {}).items()]:
            if isinstance(values, dict) and isinstance(merged.get(section), dict):
                merged[section] = {**merged[section], **values}
            else:
                merged[section] = values
        full_env = {**FAKE_ENV, **model_env, **store_backend.env, **(env or {})}
        app = await App.open(make_config(tmp_path, merged, env=full_env), surfaces=OPERATOR_SURFACES)
        opened.append(app)
        return app

    yield factory
    for app in reversed(opened):
        await app.close()
