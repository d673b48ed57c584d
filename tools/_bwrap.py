"""The shell sandbox: every shell_run command runs inside bubblewrap (`bwrap`).

What a command sees:
- the caller's workspace, read-write, at its real path (and the working directory), with an
  empty read-only file bound over each secret file given as a mask (a command not approved at
  high risk sees `.env` and its hard links as empty files it can neither change, move nor link);
- the system directories programs need, read-only: /usr and the /bin, /sbin, /lib* entries
  (recreated as the same symlinks on merged-/usr systems), and a short allow-list of /etc files
  that hold no secrets (users and groups, the dynamic linker's cache, time zone, alternatives);
  resolver and CA files only when the call has network;
- a private, empty /tmp (tmpfs, also $HOME), a new /proc for a new PID namespace (so it sees only
  its own processes and their environments), a minimal /dev;
- no home directory, no store or data directory, no config, no /run, /var, /sys or /opt;
- no network (a new, empty network namespace) unless the call asks for it;
- new user, IPC, UTS and cgroup namespaces, no capabilities, no nested user namespaces (where
  bwrap supports --disable-userns), a new session (no terminal injection);
- resource limits set by `prlimit` before bwrap starts: CPU seconds, address space, file size
  and processes (the kernel never applies the process limit to root; as root the cap comes
  from a pids cgroup per command where one can be made, see tools/_pidcap.py);
- it dies with the bot (--die-with-parent), and its whole PID namespace dies with it.

`probe()` runs a trivial command with exactly these flags once per process, so a machine where
bubblewrap is missing or cannot create namespaces (a container without the needed seccomp and
AppArmor settings) is found out before any command runs; shell_run then refuses every call.
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import os
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools._pidcap import PidsCgroup, find_pids_cgroup
from tools._proc import run_process

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
# Top-level system entries a program may need; each bound read-only if it exists (or recreated
# as the same symlink, e.g. /bin -> usr/bin).
SYSTEM_ENTRIES = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# /etc is an allow-list: no shadow, no ssh host keys, no ssl/private, no apt/pip/npm credentials,
# no gitconfig (a credential helper), no environment files.
ETC_ENTRIES = ("passwd", "group", "nsswitch.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
               "localtime", "timezone", "alternatives", "os-release", "locale.alias",
               "mime.types", "magic", "magic.mime")
ETC_NETWORK_ENTRIES = ("resolv.conf", "hosts", "host.conf", "gai.conf", "services", "protocols",
                       "ssl/certs", "ca-certificates", "ca-certificates.conf")
# Flags that harden but that an older bwrap may not know: dropped (and said so by doctor) when the
# probe shows this bwrap refuses them.
OPTIONAL_FLAGS = ("--disable-userns",)
# What the probe tries, best first: (optional flags, a fresh /proc). The kernel refuses a fresh
# /proc where the outer one is partly hidden (Docker's masked paths, systemd's
# ProtectKernelTunables); the sandbox then gets an empty /proc instead, never the outer one.
VARIANTS: tuple[tuple[tuple[str, ...], bool], ...] = (
    (OPTIONAL_FLAGS, True), ((), True), (OPTIONAL_FLAGS, False), ((), False))
PROBE_TIMEOUT_SECONDS = 10.0
INSTALL_HINT = ("install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap); in a container "
                "it also needs user namespaces: see deploy/README.md, 'The shell sandbox'")


@dataclass(frozen=True)
class Limits:
    """Per-process resource limits of a sandboxed command (0 = no limit)."""

    cpu_seconds: int = 60
    memory_bytes: int = 2 * 1024 ** 3
    processes: int = 256
    file_bytes: int = 1024 ** 3

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> Limits:
        return cls(cpu_seconds=int(settings.get("cpu_seconds", cls.cpu_seconds)),
                   memory_bytes=int(settings.get("memory_mb", cls.memory_bytes >> 20)) << 20,
                   processes=int(settings.get("max_processes", cls.processes)),
                   file_bytes=int(settings.get("max_file_mb", cls.file_bytes >> 20)) << 20)

    def prlimit_args(self) -> list[str]:
        pairs = (("--cpu", self.cpu_seconds), ("--as", self.memory_bytes),
                 ("--nproc", self.processes), ("--fsize", self.file_bytes))
        return [f"{flag}={value}" for flag, value in pairs if value > 0]


@dataclass(frozen=True)
class Sandbox:
    """A working bwrap (and prlimit) and the optional flags this bwrap accepts."""

    bwrap: str
    prlimit: str
    optional_flags: tuple[str, ...]
    proc: bool = True  # a fresh /proc of its own; False: an empty /proc
    pids: PidsCgroup | None = None  # where root's per-command process cap lives, if anywhere

    @property
    def caps_processes(self) -> bool:
        """Whether Limits.processes binds here: always for an ordinary user, for root only
        through a pids cgroup."""
        return os.geteuid() != 0 or self.pids is not None

    def argv(self, command: str, workspace: Path | None, *, network: bool,
             limits: Limits, masks: tuple[str, ...] = ()) -> list[str]:
        """The full argv: prlimit, bwrap with its flags, then /bin/sh -c command."""
        flags = bwrap_flags(workspace, network=network, optional=self.optional_flags,
                            proc=self.proc, masks=masks)
        return [self.prlimit, *limits.prlimit_args(), "--", self.bwrap, *flags,
                "--", "/bin/sh", "-c", command]

    async def run(self, command: str, workspace: Path, env: dict[str, str], *, network: bool,
                  limits: Limits, timeout: float, cap: int, stop: asyncio.Event,
                  masks: tuple[str, ...] = ()) -> dict[str, Any]:
        """Run one command in the sandbox (same result shape as tools._proc.run_process);
        `masks`: real paths inside the workspace to cover with an empty read-only file."""
        real = _real_directory(workspace)
        argv = self.argv(command, real, network=network, limits=limits, masks=masks)
        group = None
        if self.pids is not None and limits.processes > 0:
            group = self.pids.create(limits.processes)
            argv = self.pids.wrap(group, argv)
        try:
            return await run_process(argv, str(real), sandbox_environment(env), timeout, cap, stop)
        finally:
            if group is not None:
                await PidsCgroup.release(group)


def _real_directory(path: Path) -> Path:
    """Bind the directory itself, not a symlink to it (a symlink would dangle inside)."""
    return Path(os.path.realpath(path))


class SandboxUnavailable(Exception):
    """bwrap is missing or cannot create its namespaces here: `problem`, and `fix`."""

    def __init__(self, problem: str, fix: str = INSTALL_HINT):
        super().__init__(f"{problem}: {fix}")
        self.problem = problem
        self.fix = fix


def sandbox_environment(env: dict[str, str]) -> dict[str, str]:
    """The (already scrubbed) environment, with paths that mean something inside the sandbox."""
    return {**env, "HOME": "/tmp", "TMPDIR": "/tmp", "PATH": SYSTEM_PATH}


def bwrap_flags(workspace: Path | None, *, network: bool, optional: tuple[str, ...] = (),
                proc: bool = True, masks: tuple[str, ...] = ()) -> list[str]:
    flags = ["--unshare-all", "--unshare-user", *optional, "--cap-drop", "ALL",
             "--die-with-parent", "--new-session", "--hostname", "sandbox"]
    if network:
        flags.append("--share-net")
    for entry in SYSTEM_ENTRIES:
        flags += _mirror(entry)
    for name in ETC_ENTRIES + (ETC_NETWORK_ENTRIES if network else ()):
        flags += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    flags += ["--proc" if proc else "--dir", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    if workspace is not None:
        flags += ["--bind", str(workspace), str(workspace)]
        if masks:
            empty = empty_file()
            inside = str(workspace) + os.sep
            for path in masks:
                if path.startswith(inside):  # only ever inside the workspace bound above
                    flags += ["--ro-bind", empty, path]
        flags += ["--chdir", str(workspace)]
    return flags


_EMPTY: list[str] = []   # the empty file bound over masked secrets, made on first use


def empty_file() -> str:
    """An empty, read-only regular file of ours (made again if something removed or changed
    it): what a masked secret file looks like inside the sandbox."""
    if _EMPTY:
        try:
            st = os.stat(_EMPTY[0], follow_symlinks=False)
            if stat.S_ISREG(st.st_mode) and st.st_size == 0 and st.st_uid == os.geteuid():
                return _EMPTY[0]
        except OSError:
            pass
        _EMPTY.clear()
    fd, path = tempfile.mkstemp(prefix="myclaw-masked-")
    os.fchmod(fd, 0o444)
    os.close(fd)
    atexit.register(_remove, path)
    _EMPTY.append(path)
    return path


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass  # already gone: nothing to clean


def _mirror(entry: str) -> list[str]:
    if os.path.islink(entry):
        return ["--symlink", os.readlink(entry), entry]
    if os.path.isdir(entry):
        return ["--ro-bind", entry, entry]
    return []


# --- is it usable here? ------------------------------------------------------------------------


def _binaries(search_path: str) -> tuple[str, str]:
    bwrap, prlimit = shutil.which("bwrap", path=search_path), shutil.which("prlimit", path=search_path)
    if bwrap is None:
        raise SandboxUnavailable("bubblewrap (bwrap) is not installed")
    if prlimit is None:
        raise SandboxUnavailable("prlimit is not installed (it sets the sandbox's resource "
                                 "limits)", "install util-linux")
    return bwrap, prlimit


def _verdict(tried: list[tuple[Sandbox, int, str]]) -> Sandbox:
    """The first variant that worked, or SandboxUnavailable quoting bwrap's first complaint."""
    for sandbox, code, _ in tried:
        if code == 0:
            return dataclasses.replace(sandbox, pids=find_pids_cgroup())
    complaint = tried[0][2].strip().splitlines()[-1:] or ["no message"]
    raise SandboxUnavailable(f"bubblewrap cannot create its sandbox here ({complaint[0][:200]})")


def probe_sync(search_path: str = SYSTEM_PATH) -> Sandbox:
    """Blocking probe for the command line (`myclaw doctor`)."""
    bwrap, prlimit = _binaries(search_path)
    tried = []
    for optional, proc in VARIANTS:
        sandbox = Sandbox(bwrap, prlimit, optional, proc)
        try:
            done = subprocess.run(sandbox.argv("true", None, network=False, limits=Limits()),
                                  capture_output=True, text=True, timeout=PROBE_TIMEOUT_SECONDS,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            tried.append((sandbox, -1, str(exc)))
            continue
        tried.append((sandbox, done.returncode, done.stderr))
        if done.returncode == 0:
            break
    return _verdict(tried)


async def probe(search_path: str = SYSTEM_PATH) -> Sandbox:
    """The same probe without blocking the event loop."""
    bwrap, prlimit = _binaries(search_path)
    tried = []
    for optional, proc in VARIANTS:
        sandbox = Sandbox(bwrap, prlimit, optional, proc)
        try:
            process = await asyncio.create_subprocess_exec(
                *sandbox.argv("true", None, network=False, limits=Limits()),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            async with asyncio.timeout(PROBE_TIMEOUT_SECONDS):
                _, err = await process.communicate()
        except (OSError, TimeoutError) as exc:
            tried.append((sandbox, -1, str(exc)))
            continue
        tried.append((sandbox, process.returncode or 0, err.decode(errors="replace")))
        if process.returncode == 0:
            break
    return _verdict(tried)


class SandboxFinder:
    """Probes on first use and remembers the answer (working sandbox or why not). Two first
    calls at once may both probe: harmless, and no lock ties the finder to one event loop."""

    def __init__(self, search_path: str = SYSTEM_PATH) -> None:
        self.search_path = search_path  # where bwrap and prlimit are looked for
        self._found: Sandbox | SandboxUnavailable | None = None

    async def get(self) -> Sandbox:
        if self._found is None:
            try:
                self._found = await probe(self.search_path)
            except SandboxUnavailable as exc:
                self._found = exc
        if isinstance(self._found, SandboxUnavailable):
            raise self._found
        return self._found
