"""MCP client: the lifecycle of Model Context Protocol servers whose tools the bot registers.

Servers come from `[mcp.servers.<name>]` (parsed in bot/toolbox/mcp/config.py): stdio or streamable HTTP.
Each server is owned by one supervising task that connects, lists the tools, registers them (as
bot/toolbox/mcp/tools.py adapts them, named `<server>__<tool>`) and waits for the connection to end; when it
ends (the process died, the HTTP server went away) the tools are unregistered — they vanish from
every catalog — and the server is restarted with capped exponential backoff.

How a server is reached (a child process over stdio, or HTTP) and how its death is noticed is
bot/toolbox/mcp/transport.py's; this module supervises servers and speaks the protocol over that transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT, Implementation
from pydantic import ValidationError

from bot.core.tool import CallContext, ToolExternalError, ToolNetworkError
from bot.language.phrase import Phrase
from bot.toolbox.mcp.config import ServerConfigError, ServerSpec, parse_spec
from bot.toolbox.mcp.tools import MCPTool, result_to_dict, tool_meta
from bot.toolbox.mcp.transport import open_transport
from bot.toolbox.registry import RegistrationError, Registry

log = logging.getLogger(__name__)

STABLE_AFTER_SECONDS = 60.0   # a connection that lived this long resets the backoff
MAX_LIST_PAGES = 50
STOP_ATTEMPTS, STOP_WAIT_SECONDS = 3, 5.0  # shutdown re-cancels a task that ignored cancel


class ConnectionLost(ConnectionError):
    """The server's connection ended while the bot was using it."""


# --- one server ----------------------------------------------------------------------------


class ServerRunner:
    """Connects one server, keeps its tools registered while it lives, restarts it when it dies."""

    def __init__(self, spec: ServerSpec, manager: MCPManager):
        self.spec, self.manager = spec, manager
        self.state, self.error, self.restarts = "starting", "", 0
        self.tools: list[str] = []
        self.tool_errors: dict[str, str] = {}
        self.first_attempt = asyncio.Event()
        self._client: Client | None = None
        self._lost = asyncio.Event()

    def status(self) -> dict[str, Any]:
        return {"transport": self.spec.transport, "state": self.state, "error": self.error,
                "tools": list(self.tools), "tool_errors": dict(self.tool_errors),
                "restarts": self.restarts}

    async def supervise(self) -> None:
        failures = 0
        while True:
            started = time.monotonic()
            try:
                await self._serve_once()
            except ServerConfigError as exc:
                self._set("failed", str(exc))
                log.error("%s", exc)
                return
            except Exception as exc:  # supervision boundary: a server's failure never stops the bot
                repeated = _one_line(exc) == self.error
                self._set("down", _one_line(exc))
                # The traceback once per kind of failure, not at every retry of a server that is away.
                log.warning("MCP server %s is down: %s", self.spec.name, self.error,
                            exc_info=None if repeated else exc)
            finally:
                self.first_attempt.set()
            if self.manager.stopping or _cancel_requested():
                # The transport's task groups can swallow the cancel of stop(); never loop past it.
                raise asyncio.CancelledError
            failures = 0 if time.monotonic() - started >= STABLE_AFTER_SECONDS else failures
            delay = min(self.manager.base_delay * 2 ** failures, self.manager.max_delay)
            failures += 1
            await asyncio.sleep(delay)  # backoff before the restart, not synchronisation
            self.restarts += 1
            self._set("starting", self.error)

    async def _serve_once(self) -> None:
        self._lost = asyncio.Event()
        async with contextlib.AsyncExitStack() as stack:
            transport = await open_transport(self.spec, self.manager.bot_env, stack, self._lost)
            client = Client(transport, read_timeout_seconds=self.spec.startup_timeout,
                            cache=None, client_info=Implementation(name="myclaw", version="1"))
            await stack.enter_async_context(client)
            remote_tools = await _list_tools(client)
            self._client = client
            try:
                self._register(remote_tools)
                self._set("running", "")
                self.first_attempt.set()
                await self._lost.wait()
            finally:
                self._client = None
                self.unregister_tools()  # before the state changes: "down" never lists tools
        raise ConnectionLost("the server closed the connection")

    def _register(self, remote_tools: list[Any]) -> None:
        registry = self.manager.registry
        self.tool_errors = {}
        for remote in remote_tools:
            try:
                tool = MCPTool(tool_meta(self.spec, remote), self, remote.name, self.spec.name)
                registry.register(tool, source=f"mcp:{self.spec.name}")
            except (RegistrationError, TypeError, ValueError) as exc:
                self.tool_errors[remote.name] = str(exc)
                log.warning("MCP server %s: tool %s not registered: %s", self.spec.name, remote.name, exc)
                continue
            self.tools.append(tool.meta.name)

    def unregister_tools(self) -> None:
        for name in self.tools:
            self.manager.registry.unregister(name)
        self.tools = []

    def _set(self, state: str, error: str) -> None:
        self.state, self.error = state, error
        self.manager.changed()

    async def call(self, remote: str, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        client, name = self._client, self.spec.name
        if client is None:
            raise ToolNetworkError(Phrase("MCP server {server} is not connected ({why})", server=name,
                                          why=self.error or self.state),
                                   "The server is restarting; try again in a minute or answer without it.")

        async def progress(done: float, total: float | None, message: str | None) -> None:
            await ctx.progress(message or (f"{done:g}/{total:g}" if total else f"{done:g}"))

        call = client.call_tool(remote, args, read_timeout_seconds=self.spec.call_timeout,
                                progress_callback=progress)
        try:
            result = await _unless_cancelled(call, ctx.cancelled)
        except MCPError as exc:
            raise self._translate(exc) from exc
        except (httpx2.TransportError, OSError, anyio.BrokenResourceError,
                anyio.ClosedResourceError) as exc:
            self._lost.set()
            raise ToolNetworkError(Phrase("MCP server {server} is unreachable: {why}", server=name,
                                          why=_one_line(exc))) from exc
        except ValidationError as exc:
            raise ToolExternalError(Phrase("MCP server {server} sent a malformed result",
                                           server=name)) from exc
        if result.is_error:
            text = result_to_dict(result)["text"][:2000] or Phrase("(no message)")
            raise ToolExternalError(Phrase("{server}/{tool} failed: {text}", server=name, tool=remote,
                                           text=text), details={"server": name})
        return result_to_dict(result)

    def _translate(self, exc: MCPError) -> Exception:
        name = self.spec.name
        if exc.code == CONNECTION_CLOSED:
            self._lost.set()
            return ToolNetworkError(Phrase("MCP server {server} closed the connection during the "
                                           "call", server=name),
                                    "The server is restarting; try again later or answer without it.")
        if exc.code == REQUEST_TIMEOUT:
            return ToolNetworkError(Phrase("MCP server {server} did not answer within {seconds}s",
                                           server=name, seconds=f"{self.spec.call_timeout:g}"))
        return ToolExternalError(Phrase("MCP server {server} refused the call: {why}", server=name,
                                        why=exc.message),
                                 details={"code": exc.code})


async def _unless_cancelled(coro: Any, cancelled: asyncio.Event) -> Any:
    """Await `coro`, abandoning it (the SDK then cancels the request) when `cancelled` is set."""
    if cancelled.is_set():
        coro.close()
        raise asyncio.CancelledError("cancelled before the call started")
    call = asyncio.ensure_future(coro)
    stop = asyncio.ensure_future(cancelled.wait())
    try:
        await asyncio.wait({call, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
        if not call.done():
            call.cancel()
            await asyncio.wait({call})  # the SDK sends its cancel notice; the call's error is not raised
        if call.done() and not call.cancelled():
            call.exception()  # retrieved: a late failure of an abandoned call is not logged as lost
    if call.cancelled():
        raise asyncio.CancelledError("the call was cancelled")
    return call.result()


async def _list_tools(client: Client) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_LIST_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _cancel_requested() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _one_line(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = " ".join(str(exc).split())[:300]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# --- the manager ---------------------------------------------------------------------------


class MCPManager:
    """Starts every configured MCP server and keeps its tools in the registry while it lives."""

    def __init__(self, config: Any, registry: Registry, *, base_delay: float = 1.0,
                 max_delay: float = 60.0):
        self.config, self.registry = config, registry
        self.base_delay, self.max_delay = base_delay, max_delay
        self.bot_env: dict[str, str] = dict(getattr(config, "env", None) or os.environ)
        self._runners: dict[str, ServerRunner] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._problems: dict[str, dict[str, Any]] = {}
        self._changed = asyncio.Event()
        self.stopping = False

    async def start(self) -> None:
        """Start every enabled server; return once each has connected or failed its first try."""
        for key, table in self.config["mcp"]["servers"].items():
            if not table.get("enabled", True):
                self._problems[key] = {"state": "disabled", "error": "", "tools": []}
                continue
            try:
                spec = parse_spec(key, table, self.bot_env)
            except ServerConfigError as exc:
                log.error("%s", exc)
                self._problems[key] = {"state": "failed", "error": str(exc), "tools": []}
                continue
            if spec.name in self._runners:
                self._problems[key] = {"state": "failed", "tools": [],
                                       "error": f"server name {spec.name!r} is used twice"}
                continue
            runner = ServerRunner(spec, self)
            self._runners[spec.name] = runner
            self._tasks.append(asyncio.create_task(runner.supervise(), name=f"mcp:{spec.name}"))
        if not self._runners:
            return
        limit = max(r.spec.startup_timeout for r in self._runners.values()) + 5
        with contextlib.suppress(TimeoutError):  # a slow server keeps starting in the background
            await asyncio.wait_for(
                asyncio.gather(*(r.first_attempt.wait() for r in self._runners.values())), limit)

    async def stop(self) -> None:
        """Stop every server (their processes are shut down) and unregister their tools."""
        self.stopping = True
        pending = set(self._tasks)
        for _ in range(STOP_ATTEMPTS):  # again if a transport swallowed the first cancel
            for task in pending:
                task.cancel()
            if not pending:
                break
            _, pending = await asyncio.wait(pending, timeout=STOP_WAIT_SECONDS)
        for task in pending:
            log.warning("MCP server task %s did not stop", task.get_name())
        self._tasks.clear()
        for runner in self._runners.values():
            runner.unregister_tools()
            runner.state = "stopped"
        self.changed()

    def status(self) -> dict[str, dict[str, Any]]:
        """Per server: transport, state (starting|running|down|failed|disabled|stopped), error,
        tools, tool_errors, restarts. For `myclaw doctor` and /tools."""
        out = {key: dict(value) for key, value in self._problems.items()}
        out.update({name: runner.status() for name, runner in self._runners.items()})
        return out

    def changed(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_for(self, predicate: Any, timeout: float) -> dict[str, dict[str, Any]]:
        """Wait until `predicate(status())` holds; TimeoutError after `timeout` seconds."""
        async with asyncio.timeout(timeout):
            while not predicate(self.status()):
                await self._changed.wait()
        return self.status()
