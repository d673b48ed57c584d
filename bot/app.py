"""The one place that builds and wires everything from the configuration.

Nothing is done at import time: `build_registry` and `open_services` are called by the CLI (or by
tests) with a loaded `Config`.
"""

from __future__ import annotations

import logging

from bot.config import Config
from bot.policy import Profile
from bot.registry import Registry
from bot.services import Services
from bot.store import Store

log = logging.getLogger(__name__)

BUILTIN_TOOLS_PACKAGE = "tools"


def build_registry(config: Config) -> Registry:
    """Built-in tools from the `tools` package, then custom tool modules (issue 8)."""
    registry = Registry(Profile.from_config(config.profile()))
    registry.discover(BUILTIN_TOOLS_PACKAGE, config)
    return registry


async def open_services(config: Config) -> Services:
    config.workspace.mkdir(parents=True, exist_ok=True)
    store = await Store(config.store_path).open()
    return Services(config=config, store=store, registry=build_registry(config))
