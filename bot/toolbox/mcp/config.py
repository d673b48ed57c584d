"""MCP server configuration: `[mcp.servers.<name>]` tables parsed into a ServerSpec.

A table names either a stdio server (`command`, `args`, `env`) or a streamable HTTP one (`url`,
`headers`). `${VAR}` in an env or header value is read from the bot's environment, so a token never
has to live in the config file; the bot's own secrets are refused, by name and by value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from bot.config.settings import SECRET_ENV_VARS
from bot.core.tool import NAME_RE

DEFAULT_CALL_TIMEOUT = 120.0
DEFAULT_STARTUP_TIMEOUT = 30.0
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class ServerConfigError(ValueError):
    """A `[mcp.servers.<name>]` table that cannot be started as written."""


@dataclass(frozen=True)
class ServerSpec:
    name: str                               # normalised: the prefix of every tool name
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    risk: str | None = None
    has_side_effects: bool | None = None
    # The server runs on this machine and keeps what it is given to itself: its calls are not a
    # way out (egress). Unset, every call of an MCP tool can carry data out.
    local: bool = False
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    call_timeout: float = DEFAULT_CALL_TIMEOUT
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT

    @property
    def transport(self) -> str:
        return "stdio" if self.command else "http"


def lower_snake(text: str) -> str:
    return re.sub(r"[^a-z0-9_]+", "_", text.lower()).strip("_")


def parse_spec(key: str, table: dict[str, Any], env: dict[str, str]) -> ServerSpec:
    name = lower_snake(key)
    if not NAME_RE.match(name):
        raise ServerConfigError(f"[mcp.servers.{key}]: the name must start with a letter")
    if bool(table.get("command")) == bool(table.get("url")):
        raise ServerConfigError(f"[mcp.servers.{key}]: set either command (stdio) or url (HTTP)")
    return ServerSpec(
        name=name, command=table.get("command", ""), args=tuple(table.get("args", ())),
        env=_interpolate(key, "env", table.get("env", {}), env), url=table.get("url", ""),
        headers=_interpolate(key, "headers", table.get("headers", {}), env),
        risk=table.get("risk"), has_side_effects=table.get("has_side_effects"),
        local=table.get("local") is True,
        tools=dict(table.get("tools", {})),
        call_timeout=float(table.get("timeout_seconds", DEFAULT_CALL_TIMEOUT)),
        startup_timeout=float(table.get("startup_timeout_seconds", DEFAULT_STARTUP_TIMEOUT)),
    )


def _interpolate(key: str, where: str, values: dict[str, str], env: dict[str, str]) -> dict[str, str]:
    def value_of(match: re.Match[str]) -> str:
        if match[1] in SECRET_ENV_VARS:
            raise ServerConfigError(f"[mcp.servers.{key}] {where}: ${{{match[1]}}} is one of the "
                                    "bot's own secrets and is never passed to an MCP server")
        if not env.get(match[1]):
            raise ServerConfigError(
                f"[mcp.servers.{key}] {where}: ${{{match[1]}}} is not set in the environment")
        return env[match[1]]

    out = {name: _VAR.sub(value_of, value) for name, value in values.items()}
    own = {env[var] for var in SECRET_ENV_VARS if len(env.get(var, "")) >= 4}
    for name, value in out.items():
        if any(secret in value for secret in own):
            raise ServerConfigError(f"[mcp.servers.{key}] {where}.{name} holds one of the bot's own "
                                    "secrets, which is never passed to an MCP server")
    return out
