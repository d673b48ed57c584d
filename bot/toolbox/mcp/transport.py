"""How the bot reaches one MCP server: a child process over stdio, or streamable HTTP.

A stdio server's environment holds only PATH plus what its config names: none of the bot's
secrets, not even HOME; on Linux it is started under a parent-death signal, so it dies with the
bot. Either transport's read stream is watched: its end sets the `lost` event the server's
supervisor (bot/toolbox/mcp/client.py) waits on, the only sign a server died while idle.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
from typing import Any

import anyio
import httpx2
from mcp import StdioServerParameters
from mcp.client.stdio import DEFAULT_INHERITED_ENV_VARS, stdio_client
from mcp.client.streamable_http import streamable_http_client

from bot.toolbox.mcp.config import ServerConfigError, ServerSpec

# Run by the shell setpriv becomes: the rest of argv only if the bot ($0) is still its parent.
STILL_OURS = 'test "$PPID" = "$0" || exit 137; exec "$@"'


async def open_transport(spec: ServerSpec, bot_env: dict[str, str], stack: contextlib.AsyncExitStack,
                         lost: asyncio.Event) -> Any:
    """The server's transport, watched by `lost`; an HTTP client it needs is closed with `stack`."""
    if spec.transport == "stdio":
        params = stdio_parameters(spec, bot_env)
        return _watched(stdio_client(params, errlog=sys.stderr), lost)
    http = await stack.enter_async_context(
        httpx2.AsyncClient(headers=spec.headers, timeout=httpx2.Timeout(30.0, read=300.0)))
    return _watched(streamable_http_client(spec.url, http_client=http), lost)


def stdio_parameters(spec: ServerSpec, bot_env: dict[str, str]) -> StdioServerParameters:
    """Spawn parameters whose environment is exactly PATH plus the configured `env`."""
    path = spec.env.get("PATH") or bot_env.get("PATH") or os.defpath
    command = shutil.which(spec.command, path=path)
    if command is None:
        raise ServerConfigError(f"MCP server {spec.name}: command {spec.command!r} not found on PATH")
    child_env = {"PATH": path, **spec.env}
    if sys.platform == "win32":
        return StdioServerParameters(command=command, args=list(spec.args), env=child_env)
    # The SDK merges some of the bot's own variables (HOME, USER, SHELL, ...) into every child
    # environment; `env -u` drops those the config did not name, without putting values in argv.
    # (PWD too: the shell that checks the bot is still the parent exports it.)
    inherited = (*DEFAULT_INHERITED_ENV_VARS, "PWD")
    unset = [arg for var in inherited if var not in child_env for arg in ("-u", var)]
    env_program = shutil.which("env", path=os.defpath) or "/usr/bin/env"
    argv = [env_program, *unset, "--", command, *spec.args]
    # The SDK starts the server in a session of its own, so a killed bot would leave it running:
    # a parent-death signal (kept across the exec) makes it die with the bot instead. A bot
    # killed before setpriv asked for it is no longer the parent: then the server does not start.
    setpriv = shutil.which("setpriv", path=os.defpath) if sys.platform.startswith("linux") else None
    if setpriv is not None:
        argv = [setpriv, "--pdeathsig", "KILL", "--", "/bin/sh", "-c", STILL_OURS,
                str(os.getpid()), *argv]
    return StdioServerParameters(command=argv[0], args=argv[1:], env=child_env)


class _WatchedStream:
    """The transport's read stream, reporting its end: the only sign a server died while idle."""

    def __init__(self, inner: Any, lost: asyncio.Event):
        self._inner, self._lost = inner, lost

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._lost.set()
            raise

    def __aiter__(self) -> _WatchedStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _WatchedStream:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()


@contextlib.asynccontextmanager
async def _watched(transport: Any, lost: asyncio.Event):
    async with transport as (read_stream, write_stream):
        yield _WatchedStream(read_stream, lost), write_stream
