"""shell_run: run one shell command in the workspace, with a timeout, an output cap and a
scrubbed environment; the whole process group dies on timeout, /stop or cancellation.

Risk is decided per command (`classify`): a known read-only program with plain arguments that
stay inside the workspace is medium; anything else is high. When in doubt: high.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from typing import Any, ClassVar

from bot.config import SECRET_ENV_VARS
from bot.tool import BaseTool, CallContext, Risk, ToolInvalidArgsError, ToolMeta
from tools._shell_risk import classify, holds_secrets, reads_recursively, visible

KILL_GRACE_SECONDS = 0.5      # between SIGTERM and SIGKILL of the group
READER_GRACE_SECONDS = 1.0    # for output pipes held open by a process that left the group
SECRET_NAME_PARTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")
# Read-only runs must stay read-only even in a repository whose config names a program to run.
# The workspace itself must not become one: fs_write can create HEAD, config, objects/ and refs/
# at its root (nothing there is called .git), which git would take for a bare repository and
# whose `config` (diff.external, textconv, ...) a "read-only" `git diff` would obey. Command-line
# config (GIT_CONFIG_COUNT) is protected configuration, so only an explicit --git-dir could
# open a bare repository, and no medium command can pass one.
READ_ONLY_GIT_ENV = {"GIT_CONFIG_COUNT": "2",
                     "GIT_CONFIG_KEY_0": "core.fsmonitor", "GIT_CONFIG_VALUE_0": "false",
                     "GIT_CONFIG_KEY_1": "safe.bareRepository", "GIT_CONFIG_VALUE_1": "explicit"}
QUIET_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "PAGER": "cat"}


def child_environment(secret_values: list[str], base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a command: ours, minus every secret the bot holds.

    Dropped: the known secret variables, any variable whose name suggests a secret, and any
    variable whose value contains one of the bot's secret values (whatever its name).
    """
    env: dict[str, str] = {}
    for name, value in (os.environ if base is None else base).items():
        upper = name.upper()
        if upper in SECRET_ENV_VARS or any(part in upper for part in SECRET_NAME_PARTS):
            continue
        if any(secret in value for secret in secret_values):
            continue
        env[name] = value
    return {**env, **QUIET_ENV}


class _Capture:
    """Keeps the first `limit` bytes of a stream and drops the rest (still reading it, so the
    child never blocks on a full pipe)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.data = bytearray()
        self.dropped = False

    def add(self, chunk: bytes) -> None:
        room = self.limit - len(self.data)
        if room > 0:
            self.data += chunk[:room]
        if len(chunk) > room:
            self.dropped = True

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


class _ShellProtocol(asyncio.SubprocessProtocol):
    """Collects output and reports the shell's exit as soon as it happens.

    (`Process.wait()` on Python 3.11 may only return once every pipe is closed, which a
    background grandchild can delay forever; the protocol's process_exited does not wait.)
    """

    def __init__(self, cap: int):
        self.output = {1: _Capture(cap), 2: _Capture(cap)}
        self.exited = asyncio.Event()
        self.pipes_closed = asyncio.Event()
        self._open_pipes = {1, 2}

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self.output[fd].add(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._open_pipes.discard(fd)
        if not self._open_pipes:
            self.pipes_closed.set()

    def process_exited(self) -> None:
        self.exited.set()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _terminate(pgid: int, exited: asyncio.Event) -> None:
    """SIGTERM to the whole group, a short grace, then SIGKILL to whatever is left."""
    _signal_group(pgid, signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(exited.wait(), KILL_GRACE_SECONDS)
    _signal_group(pgid, signal.SIGKILL)
    await exited.wait()


async def _wait_exit(exited: asyncio.Event, timeout: float, stop: asyncio.Event) -> bool:
    """True if the shell exited within `timeout`; CancelledError if /stop was pressed first."""
    exit_waiter = asyncio.ensure_future(exited.wait())
    stop_waiter = asyncio.ensure_future(stop.wait())
    try:
        done, _ = await asyncio.wait({exit_waiter, stop_waiter}, timeout=timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
    finally:
        exit_waiter.cancel()
        stop_waiter.cancel()
    if stop_waiter in done and exit_waiter not in done:
        raise asyncio.CancelledError("stopped by the user")
    return exit_waiter in done


async def _spawn(command: str, cwd: str, env: dict[str, str],
                 cap: int) -> tuple[asyncio.SubprocessTransport, _ShellProtocol]:
    """Start the shell. A cancellation that lands while asyncio is still wiring the pipes would
    make asyncio kill the shell alone and orphan its children, so the start is shielded and a
    cancelled start kills the whole group itself."""
    spawning = asyncio.ensure_future(asyncio.get_running_loop().subprocess_exec(
        lambda: _ShellProtocol(cap), "/bin/sh", "-c", command, cwd=cwd, env=env,
        start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE))
    try:
        return await asyncio.shield(spawning)
    except asyncio.CancelledError:
        with contextlib.suppress(OSError):
            transport, protocol = await spawning
            try:
                await _terminate(transport.get_pid(), protocol.exited)
            finally:
                transport.close()
        raise


async def run_command(command: str, cwd: str, env: dict[str, str], timeout: float, cap: int,
                      stop: asyncio.Event) -> dict[str, Any]:
    transport, protocol = await _spawn(command, cwd, env, cap)
    pgid = transport.get_pid()  # start_new_session: the shell leads its own process group
    try:
        timed_out = not await _wait_exit(protocol.exited, timeout, stop)
        if timed_out:
            await _terminate(pgid, protocol.exited)
    except BaseException:  # cancelled, /stop, anything: never leave the process tree behind
        await _terminate(pgid, protocol.exited)
        raise
    finally:
        # Background children the command left behind die with it; that closes the pipes too.
        _signal_group(pgid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(protocol.pipes_closed.wait(), READER_GRACE_SECONDS)
        transport.close()
    out, err = protocol.output[1], protocol.output[2]
    return {"exit_code": transport.get_returncode(), "stdout": out.text(), "stderr": err.text(),
            "truncated": out.dropped or err.dropped, "timed_out": timed_out}


class ShellRun(BaseTool):
    examples: ClassVar[list[dict[str, Any]]] = [{"command": "ls -la"}]

    def __init__(self, workspace: str = "<workspace>"):
        self.workspace = workspace
        self.meta = ToolMeta(
            name="shell_run",
            description=(
                "Run one shell command (/bin/sh -c) in the workspace directory and return exit_code, "
                "stdout, stderr, truncated and timed_out. Read-only commands (ls, cat, grep, find, "
                "git status/log/diff, ...) with plain arguments are medium risk; pipes, redirections, "
                "substitutions and other programs are high risk and need approval. Secrets are not "
                "in its environment."
            ),
            schema={
                "type": "object",
                "properties": {
                    "command": {"type": "string", "minLength": 1, "maxLength": 8000},
                    "timeout_seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": 3600,
                                        "description": "Stop earlier than the configured timeout"},
                },
                "required": ["command"],
                "additionalProperties": False,
            },
            has_side_effects=True,
            risk="medium",
            returns_untrusted=True,
            idempotent=False,
            supports_dry_run=True,
            capability_required=f"proc:exec:{workspace}",
        )

    def assess(self, command: str) -> tuple[Risk, str]:
        """classify(), plus what depends on the workspace: a recursive search through a tree
        that holds .env files would read those secrets, which no file tool may."""
        risk, reason = classify(command)
        if (risk == "medium" and reads_recursively(command)
                and holds_secrets(self.workspace)):
            return "high", "searches a workspace tree that holds .env files"
        return risk, reason

    def risk_for(self, args: dict[str, Any]) -> Risk:
        return self.assess(str(args.get("command", "")))[0]

    async def dry_run(self, ctx: CallContext, command: str, timeout_seconds: float | None = None,
                      **_: Any) -> dict[str, Any]:
        _check_command(command)
        risk, reason = self.assess(command)
        timeout = _timeout(ctx, timeout_seconds)
        return {
            "summary": f"Run `{visible(command)}` in {ctx.workspace} ({risk}: {reason})",
            "command": command, "cwd": str(ctx.workspace), "risk": risk, "reason": reason,
            "timeout_seconds": timeout,
        }

    async def execute(self, ctx: CallContext, command: str, timeout_seconds: float | None = None,
                      **_: Any) -> dict[str, Any]:
        _check_command(command)
        config = ctx.services.config
        env = child_environment(config.secret_values())
        if self.assess(command)[0] == "medium":
            env.update(READ_ONLY_GIT_ENV)
        ctx.workspace.mkdir(parents=True, exist_ok=True)
        cap = int(config["tools"]["shell_run"]["max_output_bytes"])
        return await run_command(command, str(ctx.workspace), env, _timeout(ctx, timeout_seconds), cap,
                                 ctx.cancelled)


def _check_command(command: str) -> None:
    if not command.strip():
        raise ToolInvalidArgsError("The command is empty.", "Give the shell command to run.")
    if "\x00" in command:
        raise ToolInvalidArgsError("The command contains a NUL byte.", "Remove the NUL character.")


def _timeout(ctx: CallContext, asked: float | None) -> float:
    configured = float(ctx.services.config["tools"]["shell_run"]["timeout_seconds"])
    return min(configured, float(asked)) if asked else configured


def build(config: Any = None) -> ShellRun:
    return ShellRun(str(config.workspace) if config is not None else "<workspace>")
