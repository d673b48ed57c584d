"""Host-side views of a sandboxed command's processes.

Inside the sandbox a command lives in its own PID namespace, so the pids it can print ($$, $!)
mean nothing out here; the tests find the tree from the outside instead, as descendants of the
test process, and wait for each to die on a pidfd.
"""

from __future__ import annotations

import asyncio
import os


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None  # exited while we looked


def descendants(root: int | None = None) -> list[int]:
    """Every live process below `root` (default: this process), by walking parent links."""
    root = os.getpid() if root is None else root
    parents = {int(name): _parent_of(int(name)) for name in os.listdir("/proc") if name.isdigit()}
    found: list[int] = []
    frontier = [root]
    while frontier:
        current = frontier.pop()
        children = [pid for pid, parent in parents.items() if parent == current]
        found += children
        frontier += children
    return found


async def is_gone(pid: int, within: float = 3.0) -> bool:
    """True once the process has exited (a zombie counts: this container's init does not reap
    orphans). Waits on a pidfd, which becomes readable when the process dies: an event, no
    polling; SIGKILL is delivered asynchronously, so death may trail the kill by a moment."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    loop = asyncio.get_running_loop()
    died = asyncio.Event()
    loop.add_reader(pidfd, died.set)
    try:
        await asyncio.wait_for(died.wait(), within)
        return True
    except TimeoutError:
        return False
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)


async def all_gone(pids: list[int], within: float = 3.0) -> bool:
    results = await asyncio.gather(*(is_gone(pid, within) for pid in pids))
    return all(results)
