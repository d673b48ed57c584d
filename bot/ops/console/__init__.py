"""The operator's web console, served by `myclaw run` when `[console] enabled = true`.

    server = build(config, services, agent, channels); await server.start(); ...; await server.stop()
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.config.settings import Config
    from bot.ops.console.server import ConsoleServer
    from bot.runtime.services import Services
    from bot.store.protocol import Store


def auth_for(config: Config, store: Store) -> Any:
    """The login links and sessions (also used by `myclaw console login/logout`)."""
    from bot.ops.console.auth import ConsoleAuth

    section = config["console"]
    return ConsoleAuth(store, login_ttl_seconds=section["login_ttl_seconds"],
                       session_ttl_seconds=section["session_ttl_seconds"])


def build(config: Config, services: Services, agent: Any, channels: dict[str, Any]) -> ConsoleServer:
    from bot.ops.console.server import ConsoleServer
    from bot.ops.console.web import ConsoleContext

    context = ConsoleContext(config=config, services=services, agent=agent, channels=channels,
                             auth=auth_for(config, services.store))
    return ConsoleServer(context)
