"""A process cap that also binds root: one pids cgroup per sandboxed command.

RLIMIT_NPROC (set by prlimit) caps the processes of an ordinary user, but Linux never applies it
to root. When the bot runs as root and the cgroup v1 `pids` hierarchy is writable (containers
and CI machines often look like that), each command instead runs in a cgroup of its own with
`pids.max` set, joined before bubblewrap starts, so everything the command forks is counted.
The cgroup is removed when the command has ended (the sandbox's PID namespace is empty by then).

Found once, with the sandbox probe; absent anywhere else (cgroup v2 needs a delegated subtree,
which a service manager has to set up): doctor then says the process limit does not bind root.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import uuid
from dataclasses import dataclass
from pathlib import Path

PREFIX = "myclaw-sandbox-"
# bwrap reports the command's exit before its PID namespace has finished dying, so the group
# may still hold exiting processes for a moment: they are killed and the group is retried, up to
# this long (the kernel gives no event for "cgroup empty" on v1).
RELEASE_SECONDS = 2.0
RELEASE_STEP_SECONDS = 0.01
# Joins the cgroup named by $0, then execs the real command line.
JOIN = 'echo $$ > "$0/cgroup.procs" && exec "$@"'


@dataclass(frozen=True)
class PidsCgroup:
    """The directory under which per-command pids cgroups are made."""

    base: Path

    def create(self, limit: int) -> Path:
        # The bot's pid in the name: sweep() leaves the groups of running bots alone. An older
        # bot's sweep may still remove a group between mkdir and the limit: then try again.
        for attempt in range(3):
            group = self.base / f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex}"
            try:
                group.mkdir(mode=0o700)
                (group / "pids.max").write_text(f"{limit}\n")
                return group
            except OSError:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def wrap(self, group: Path, argv: list[str]) -> list[str]:
        return ["/bin/sh", "-c", JOIN, str(group), *argv]

    @staticmethod
    async def release(group: Path) -> None:
        """Kill what is left in the group and remove it (or leave it to a later sweep)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RELEASE_SECONDS
        while True:
            try:
                pids = [int(p) for p in (group / "cgroup.procs").read_text().split()]
            except OSError:
                return  # already gone
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            if not pids:
                PidsCgroup.remove(group)
                return
            if loop.time() > deadline:
                return
            await asyncio.sleep(RELEASE_STEP_SECONDS)

    @staticmethod
    def remove(group: Path) -> None:
        with contextlib.suppress(OSError):  # still busy or gone: a later sweep() retries
            group.rmdir()

    def sweep(self) -> None:
        """Remove the groups left by bots that are gone (killed while a command ran)."""
        with contextlib.suppress(OSError):
            for entry in self.base.iterdir():
                owner = entry.name.removeprefix(PREFIX).partition("-")[0]
                if entry.name.startswith(PREFIX) and owner.isdigit() and not _alive(int(owner)):
                    self.remove(entry)


def _alive(pid: int) -> bool:
    return pid == os.getpid() or os.path.exists(f"/proc/{pid}")


def _own_v1_pids_path(cgroup_file: str = "/proc/self/cgroup") -> str | None:
    with open(cgroup_file) as handle:
        for line in handle:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if "pids" in controllers.split(","):
                return path
    return None


def _v1_pids_mount(mountinfo: str = "/proc/self/mountinfo") -> tuple[str, str] | None:
    """(root within the hierarchy, mount point) of the cgroup v1 pids hierarchy."""
    with open(mountinfo) as handle:
        for line in handle:
            fields = line.split()
            dash = fields.index("-")
            fstype, options = fields[dash + 1], fields[dash + 3].split(",")
            if fstype == "cgroup" and "pids" in options and "rw" in fields[5].split(","):
                return fields[3], fields[4]
    return None


def find_pids_cgroup() -> PidsCgroup | None:
    """A writable pids hierarchy for root, or None (not root, or nothing usable)."""
    if os.geteuid() != 0:
        return None
    try:
        own, mount = _own_v1_pids_path(), _v1_pids_mount()
        if own is None or mount is None:
            return None
        root, point = mount
        base = Path(point) / os.path.relpath(own, root)
        cap = PidsCgroup(base)
        cap.remove(cap.create(1))  # really writable?
        cap.sweep()
    except (OSError, ValueError):
        return None
    return cap
