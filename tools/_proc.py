"""Running one child process tree: output capped, the whole process group killed on timeout,
/stop or cancellation. No policy here: what runs, and inside which sandbox, is the caller's."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from typing import Any

KILL_GRACE_SECONDS = 0.5      # between SIGTERM and SIGKILL of the group
READER_GRACE_SECONDS = 1.0    # for output pipes held open by a process that left the group
PR_SET_PDEATHSIG = 1


def dies_with_us() -> Any:
    """What the child runs between fork and exec: SIGKILL when this process dies, and an exit
    at once if it already has. bubblewrap's own --die-with-parent is set only once it runs: a
    bot killed in between (a kill -9 during a command's start) left the sandbox behind for
    good. The signal survives the exec of prlimit and bwrap (neither is set-user-ID). None off
    Linux, where there is no such signal."""
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def in_the_child() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:   # died before the signal was asked for
            os._exit(137)
    return in_the_child


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


async def _spawn(argv: list[str], cwd: str, env: dict[str, str],
                 cap: int) -> tuple[asyncio.SubprocessTransport, _ShellProtocol]:
    """Start the shell. A cancellation that lands while asyncio is still wiring the pipes would
    make asyncio kill the shell alone and orphan its children, so the start is shielded and a
    cancelled start kills the whole group itself."""
    spawning = asyncio.ensure_future(asyncio.get_running_loop().subprocess_exec(
        lambda: _ShellProtocol(cap), *argv, cwd=cwd, env=env,
        start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, preexec_fn=dies_with_us()))
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


async def run_process(argv: list[str], cwd: str, env: dict[str, str], timeout: float, cap: int,
                      stop: asyncio.Event) -> dict[str, Any]:
    """Run argv in a new session; return exit_code, stdout, stderr, truncated and timed_out."""
    transport, protocol = await _spawn(argv, cwd, env, cap)
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
