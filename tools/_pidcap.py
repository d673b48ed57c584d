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

import contextlib
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

PREFIX = "myclaw-sandbox-"
# Joins the cgroup named by $0, then execs the real command line.
JOIN = 'echo $$ > "$0/cgroup.procs" && exec "$@"'


@dataclass(frozen=True)
class PidsCgroup:
    """The directory under which per-command pids cgroups are made."""

    base: Path

    def create(self, limit: int) -> Path:
        group = self.base / f"{PREFIX}{uuid.uuid4().hex}"
        group.mkdir(mode=0o700)
        (group / "pids.max").write_text(f"{limit}\n")
        return group

    def wrap(self, group: Path, argv: list[str]) -> list[str]:
        return ["/bin/sh", "-c", JOIN, str(group), *argv]

    @staticmethod
    def remove(group: Path) -> None:
        with contextlib.suppress(OSError):  # still busy or gone: sweep() retries next time
            group.rmdir()

    def sweep(self) -> None:
        """Remove leftovers of commands whose cgroup could not be removed at once."""
        with contextlib.suppress(OSError):
            for entry in self.base.iterdir():
                if entry.name.startswith(PREFIX):
                    self.remove(entry)


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
    except (OSError, ValueError):
        return None
    return cap
