"""The operator's surfaces a running bot serves: `/healthz` and the web console.

They are handed to `App.open` by whoever starts the bot (`myclaw run`/`chat`, tests, benches),
so the composition root builds the process without knowing the operator's tools; each surface
starts only when its config section enables it.
"""

from __future__ import annotations

from typing import Any


async def health_surface(app: Any) -> tuple[str, Any] | None:
    if not app.config["health"]["enabled"]:
        return None
    from bot.ops.health import HealthServer

    health = HealthServer(app.config, app.services.store, app.channels)
    await health.start()
    return "health", health


async def console_surface(app: Any) -> tuple[str, Any] | None:
    if not app.config["console"]["enabled"]:
        return None
    from bot.ops.console import build

    console = build(app.config, app.services, app.agent, app.channels)
    await console.start()
    return "console", console


OPERATOR_SURFACES = (health_surface, console_surface)
