"""The workspace sandbox: every path a file tool touches resolves inside the workspace.

`resolve_in_workspace` turns what the model asked for into a real path (symlinks followed) and
refuses anything that leaves the workspace, is not a plain file or directory, or is one of the
bot's own files (config, store, receipt key, data dir) — the agent must never be able to lift its
own limits by editing them. A secret file (bot/core/secrets/files.py: by any name on the way, as
a symlink's target, or as another hard link to one) is never written, and read only in a call
a person approved (`CallContext.approved_by`); a preview may name it.

Resolution alone leaves a race: a directory could be swapped for a symlink between the check and
the use. The I/O helpers below therefore walk the resolved path again from the workspace root
one component at a time with O_NOFOLLOW (`openat`-style, through `dir_fd`), so what they open is
exactly what was checked or the call fails. What a refusal says is tools/_refusals.py.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from bot.core.secrets.files import SecretFiles, is_secret_inode
from bot.core.tool import CallContext, ToolInvalidArgsError, ToolNotFoundError, ToolPermissionError
from bot.language.phrase import Phrase
from tools._refusals import forbidden, os_failure, outside_error, secret_refused

STORE_SIBLINGS = ("", "-wal", "-shm", "-journal")
RECEIPT_KEY_NAME = "receipt.key"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def secret_files(ctx: CallContext) -> SecretFiles:
    """The configured secret-file globs (the defaults without a config)."""
    return SecretFiles.from_config(ctx.settings)


@dataclass(frozen=True)
class Protected:
    """The bot's own files and folders as real paths, plus the files' inodes (so a hard link to
    the store inside the workspace is caught too)."""

    files: frozenset[str]
    dirs: tuple[str, ...]
    inodes: frozenset[tuple[int, int]]

    def covers(self, real: str, st: os.stat_result | None) -> bool:
        if real in self.files or any(real == d or real.startswith(d + os.sep) for d in self.dirs):
            return True
        return st is not None and (st.st_dev, st.st_ino) in self.inodes


def protected_paths(ctx: CallContext, root: str) -> Protected:
    config = ctx.settings
    if not hasattr(config, "store_path"):  # a bare context: no store or key files to protect
        return Protected(frozenset(), (), frozenset())
    files, dirs = _protected_locations(config, root)
    inodes = set()
    for name in files:  # per call: the store's -wal file, for one, comes and goes
        try:
            st = os.stat(name)
        except OSError:
            continue
        inodes.add((st.st_dev, st.st_ino))
    return Protected(files, dirs, frozenset(inodes))


# Resolving the protected locations costs a dozen realpath calls; they depend only on the
# (immutable) config and the workspace, so they are computed once per pair. The weak reference
# guards against a new Config reusing a dead one's id().
_LOCATIONS: dict[tuple[int, str], tuple[weakref.ref, tuple[frozenset[str], tuple[str, ...]]]] = {}
_LOCATIONS_MAX = 64


def _protected_locations(config: Any, root: str) -> tuple[frozenset[str], tuple[str, ...]]:
    key = (id(config), root)
    cached = _LOCATIONS.get(key)
    if cached is not None and cached[0]() is config:
        return cached[1]
    store = str(config.store_path)
    files = {os.path.realpath(store + suffix) for suffix in STORE_SIBLINGS}
    files.add(os.path.realpath(config.data_dir / RECEIPT_KEY_NAME))
    if config.source is not None:
        files.add(os.path.realpath(config.source))
    # Custom tool folders are code the bot loads at start-up: writing there would be running
    # arbitrary code outside every policy, so they are as protected as the data dir.
    custom = [os.path.realpath(Path(p).expanduser()) for p in config["tools"].get("custom_paths", [])]
    # A protected folder that *contains* the workspace (the operator put the workspace inside the
    # data dir) would forbid the whole workspace; the named files above stay protected then.
    dirs = tuple(d for d in (os.path.realpath(config.data_dir), *custom)
                 if not (root == d or root.startswith(d + os.sep)))
    if len(_LOCATIONS) >= _LOCATIONS_MAX:
        _LOCATIONS.clear()
    _LOCATIONS[key] = (weakref.ref(config), (frozenset(files), dirs))
    return frozenset(files), dirs


def workspace_root(ctx: CallContext) -> str:
    return os.path.realpath(ctx.workspace)


def display_path(ctx: CallContext, real: Path | str) -> str:
    """The path as the model and the user should see it: relative to the workspace."""
    rel = os.path.relpath(real, workspace_root(ctx))
    return "." if rel == "." else PurePosixPath(*Path(rel).parts).as_posix()


def _is_secret(ctx: CallContext, path: str, real: str, root: str, st: os.stat_result | None) -> bool:
    return _secret_at(secret_files(ctx), path, real, root, st)


def leads_to_secret_file(workspace: str | os.PathLike[str], path: str,
                         files: SecretFiles) -> bool:
    """For rating a call before it runs: does `path` (in `workspace`) name a secret file by its
    own name, or lead to one — a symlink on the way to one (notes/soft.txt -> ../.env, a linked
    folder data -> secrets.d), or another hard link of one? What the call itself refuses unless
    a person approved it, asked for naming it. A path leaving the workspace is the call's own
    refusal, not a secret here."""
    if files.is_secret_path(path):
        return True
    root = os.path.realpath(workspace)
    real = os.path.realpath(os.path.join(root, path))
    if not real.startswith(root + os.sep):
        return False
    try:
        st = os.stat(real)
    except OSError:
        return False
    return _secret_at(files, path, real, root, st)


def _secret_at(files: SecretFiles, path: str, real: str, root: str,
               st: os.stat_result | None) -> bool:
    """By any name on the way (the real path's parts, the name asked for: a symlink called
    .env), or as another hard link to a secret file of this workspace."""
    names = (*Path(os.path.relpath(real, root)).parts, Path(path).name)
    if any(files.is_secret_name(part) for part in names):
        return True
    return st is not None and stat.S_ISREG(st.st_mode) and is_secret_inode(root, st, files)


def is_secret_file(ctx: CallContext, path: str, real: Path) -> bool:
    """Is the resolved `real` (asked for as `path`) a secret file, by any of its names?"""
    root = workspace_root(ctx)
    try:
        st = os.stat(real, follow_symlinks=False)
    except OSError:
        st = None
    return _is_secret(ctx, path, str(real), root, st)


def _lstat(real: str) -> os.stat_result | None:
    try:
        return os.lstat(real)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ValueError("symlink loop") from exc
        raise


def resolve_in_workspace(ctx: CallContext, path: str, *, must_exist: bool, for_write: bool,
                         previewing: bool = False) -> Path:
    """The real path of `path` inside the workspace, or a ToolPermissionError/ToolNotFoundError.

    Relative paths are relative to the workspace; absolute ones must point inside it. Symlinks
    are followed and the *real* target must still be inside. Only regular files and directories
    pass. `for_write` additionally refuses when a parent on the way is not a directory. A
    secret file passes only for reading, in a call a person approved or in a preview (which
    must not show its content).
    """
    if "\x00" in path:
        raise outside_error(ctx, path.replace("\x00", "\\0"), Phrase("it contains a NUL byte"))
    if not path.strip():
        raise ToolInvalidArgsError(Phrase("The path is empty."), "Give a file path such as notes/a.md.")
    root = workspace_root(ctx)
    candidate = os.path.join(root, path) if not os.path.isabs(path) else path
    real = os.path.realpath(candidate)
    if real != root and not real.startswith(root + os.sep):
        raise outside_error(ctx, path, Phrase("it resolves outside the workspace"))
    try:
        st = _lstat(real)
    except ValueError as exc:
        raise outside_error(ctx, path, Phrase("it is a symlink loop")) from exc
    except OSError as exc:
        raise ToolInvalidArgsError(Phrase("Cannot use the path {path}: {problem}.", path=repr(path),
                                          problem=str(exc.strerror)),
                                   "Use a shorter, plain relative path like notes/a.md.") from exc
    if st is not None and stat.S_ISLNK(st.st_mode):  # realpath stops only on a loop
        raise outside_error(ctx, path, Phrase("it is a symlink loop"))
    if protected_paths(ctx, root).covers(real, st):
        raise forbidden(ctx, path)
    if (for_write or not (previewing or ctx.approved_by)) and _is_secret(ctx, path, real, root, st):
        raise secret_refused(path, display_path(ctx, real), for_write=for_write)
    if st is not None and not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        raise outside_error(ctx, path, Phrase("it is not a regular file or directory (device, FIFO or "
                                             "socket)"))
    if st is None and must_exist:
        raise ToolNotFoundError(
            Phrase("{path} does not exist in the workspace.", path=display_path(ctx, real)),
            "Check the spelling; find the right file with glob_list (e.g. pattern '**/*.md'), "
            "or ask the user to confirm the path.",
            {"path_attempted": path},
        )
    # Lower-cased: on a case-insensitive file system (macOS) .GIT/config is .git/config.
    if for_write and ".git" in (p.lower() for p in Path(os.path.relpath(real, root)).parts):
        # A repository's config and hooks run programs (git diff, textconv, hooks): writing
        # there would let the agent plant code that a later "read-only" git command runs.
        raise ToolPermissionError(
            Phrase("Writing inside .git ({path}) is not allowed.", path=display_path(ctx, real)),
            "Change the working tree files instead; the repository's own files are off limits.",
            {"path_attempted": path})
    if st is None and for_write:
        _check_parents_for_write(ctx, path, real, root)
    return Path(real)


def _check_parents_for_write(ctx: CallContext, path: str, real: str, root: str) -> None:
    """Every existing ancestor up to the root must be a real directory."""
    current = os.path.dirname(real)
    while current != root and len(current) > len(root):
        st = _lstat(current)
        if st is not None:
            if not stat.S_ISDIR(st.st_mode):
                raise ToolInvalidArgsError(
                    Phrase("Cannot create {path}: {parent} is not a directory.",
                           path=display_path(ctx, real), parent=display_path(ctx, current)),
                    "Pick a path whose parent folders are folders (or do not exist yet).",
                    {"path_attempted": path},
                )
            return
        current = os.path.dirname(current)


# --- race-safe I/O on resolved paths -------------------------------------------------------


def _parts_below_root(ctx: CallContext, real: Path) -> list[str]:
    rel = os.path.relpath(real, workspace_root(ctx))
    return [] if rel == "." else Path(rel).parts


@contextmanager
def parent_dir_fd(ctx: CallContext, real: Path, *, create: bool = False,
                  created: list[str] | None = None) -> Iterator[int]:
    """An fd of `real`'s parent, reached from the root without following any symlink.

    With `create`, missing directories are made (their workspace-relative names are appended to
    `created`, so a revert can remove them again).
    """
    parts = _parts_below_root(ctx, real)
    if not parts:
        raise ToolInvalidArgsError(Phrase("The workspace root itself is not a file."),
                                   "Name a file inside the workspace, like notes/a.md.")
    fd = os.open(workspace_root(ctx), _DIR_FLAGS)
    try:
        for index, name in enumerate(parts[:-1]):
            try:
                next_fd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(name, 0o755, dir_fd=fd)
                if created is not None:
                    created.append("/".join(parts[: index + 1]))
                next_fd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = next_fd
        yield fd
    finally:
        os.close(fd)


def read_regular_file(ctx: CallContext, real: Path, limit: int | None = None) -> tuple[bytes, int]:
    """Up to `limit` bytes of a regular file (all of it when None) and the file's full size."""
    try:
        with parent_dir_fd(ctx, real) as dir_fd:
            fd = os.open(real.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         dir_fd=dir_fd)
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                os.close(fd)
                raise _not_a_file(ctx, real, st)
            with os.fdopen(fd, "rb") as handle:
                data = handle.read() if limit is None else handle.read(limit)
                return data, st.st_size
    except OSError as exc:
        raise os_failure(ctx, display_path(ctx, real), exc, "read") from exc


def _not_a_file(ctx: CallContext, real: Path, st: os.stat_result) -> Exception:
    shown = display_path(ctx, real)
    if stat.S_ISDIR(st.st_mode):
        # The hint is read outside the untrusted wrapper: it names no path (`shown` may be a
        # name someone else chose, reached through a symlink).
        return ToolInvalidArgsError(Phrase("{path} is a directory, not a file.", path=shown),
                                    "List its content with glob_list (the folder's path + '/*').")
    return outside_error(ctx, shown, Phrase("it is not a regular file"))


def write_atomic(ctx: CallContext, real: Path, data: bytes) -> list[str]:
    """Replace (or create) `real` with `data` atomically; returns the directories created.

    The bytes go to a temporary file in the same directory, are fsynced, then renamed over the
    target, so a reader sees the old or the new content, never half of it. The previous file's
    permission bits are kept.
    """
    created: list[str] = []
    try:
        with parent_dir_fd(ctx, real, create=True, created=created) as dir_fd:
            mode = _existing_mode(ctx, real, dir_fd)
            temp = f".{real.name}.{secrets.token_hex(6)}.tmp"
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o600, dir_fd=dir_fd)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fchmod(handle.fileno(), mode)
                    os.fsync(handle.fileno())
                os.replace(temp, real.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except BaseException:
                _unlink_quietly(temp, dir_fd)
                raise
            os.fsync(dir_fd)
    except OSError as exc:
        raise os_failure(ctx, display_path(ctx, real), exc, "write") from exc
    return created


def _existing_mode(ctx: CallContext, real: Path, dir_fd: int) -> int:
    try:
        st = os.stat(real.name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return 0o644
    if not stat.S_ISREG(st.st_mode):
        raise _not_a_file(ctx, real, st)
    return stat.S_IMODE(st.st_mode)


def _unlink_quietly(name: str, dir_fd: int) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass  # never created, or already gone: nothing to clean


def remove_file(ctx: CallContext, real: Path) -> None:
    """Delete a regular file (never a symlink or directory) inside the workspace."""
    try:
        with parent_dir_fd(ctx, real) as dir_fd:
            st = os.stat(real.name, dir_fd=dir_fd, follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode):
                raise _not_a_file(ctx, real, st)
            os.unlink(real.name, dir_fd=dir_fd)
    except OSError as exc:
        raise os_failure(ctx, display_path(ctx, real), exc, "delete") from exc


def remove_empty_dirs(ctx: CallContext, relative_dirs: list[str]) -> list[str]:
    """Remove the given workspace directories, deepest first, if they are (still) empty."""
    removed = []
    for rel in sorted(relative_dirs, key=lambda d: d.count("/"), reverse=True):
        real = resolve_in_workspace(ctx, rel, must_exist=False, for_write=False)
        if str(real) == workspace_root(ctx):
            continue
        try:
            with parent_dir_fd(ctx, real) as dir_fd:
                os.rmdir(real.name, dir_fd=dir_fd)
        except OSError:
            continue  # not empty any more (the user put something there) or already gone
        removed.append(rel)
    return removed
