"""A real MCP server for the tests, built with the SDK's MCPServer (FastMCP's name in mcp 2.x).

Run over stdio by default, or `--http PORT` for streamable HTTP on 127.0.0.1. Tools:
echo, add, env_keys / getenv (what environment the server got), header (what HTTP headers it got),
pid, fail (an isError result), fail_with_env (one whose text the server chose), crash (the
process exits mid-call), slow + was_cancelled (to prove a cancelled call is cancelled on the
server too), progress (reports progress notifications).
"""

from __future__ import annotations

import os
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("echo")
cancelled_calls = anyio.Event()


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def env_keys() -> list[str]:
    """The names of the environment variables this server process received."""
    return sorted(os.environ)


@server.tool()
def getenv(name: str) -> str:
    """The value of one environment variable ('' when unset)."""
    return os.environ.get(name, "")


@server.tool()
def header(name: str, ctx: Context) -> str:
    """The value of one HTTP request header ('' over stdio or when absent)."""
    return (ctx.headers or {}).get(name, "")


@server.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool()
def fail(message: str) -> str:
    """Always fails with the given message."""
    raise ValueError(message)


@server.tool()
def fail_with_env(name: str) -> str:
    """Always fails; the message is the server's own text (an environment variable's value)."""
    raise ToolError(os.environ.get(name, ""))


@server.tool()
def crash() -> str:
    """Exit the server process immediately, mid-call."""
    os._exit(3)


@server.tool()
async def slow(seconds: float, ctx: Context) -> str:
    """Sleep, remembering whether the client cancelled the call; reports progress on start."""
    await ctx.report_progress(0, None, "started")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        cancelled_calls.set()
        raise
    return "finished"


@server.tool()
async def was_cancelled(timeout: float) -> bool:
    """Whether a `slow` call was cancelled by the client, waiting up to `timeout` seconds."""
    with anyio.move_on_after(timeout):
        await cancelled_calls.wait()
    return cancelled_calls.is_set()


@server.tool()
async def progress(steps: int, ctx: Context) -> str:
    """Report `steps` progress notifications, then finish."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step} of {steps}")
    return "done"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
