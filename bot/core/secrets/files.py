"""What a secret file is, and which secret files a workspace holds: the one place that decides
(and, beside it, which environment variables hold the bot's own secrets: `SECRET_ENV_VARS`).

A path is a secret file when any of its components (the file's name or a folder on the way)
matches one of the configured globs (`[security] secret_files`), case-insensitively: case-
insensitive file systems treat `.ENV` as `.env`, and a folder called `secrets.d` holds secrets
whatever its files are called.

`inventory(root, files)` lists the secret files below a workspace: the regular files whose
path matches, the targets (inside the workspace) of symlinks whose name matches, and every
other name of the same inode (a hard link called `notes.txt` is the same secret). The walk
follows no symlink and is bounded; a walk that had to stop says so (`complete` is False), and
callers then assume the worst. Each folder's listing is remembered with the folder's mtime, so
asking again costs one stat per folder plus one per secret file, and no listing of a folder
that did not change.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

# The bot's own secrets: never logged, never passed to a tool's process, redacted everywhere.
SECRET_ENV_VARS = (
    "ANTHROPIC_API_KEY",
    "TELEGRAM_BOT_TOKEN",
    "DISCORD_BOT_TOKEN",
    "SLACK_BOT_TOKEN",
    "SLACK_APP_TOKEN",
    "SLACK_SIGNING_SECRET",
    "BRAVE_API_KEY",
    "TELEGRAM_WEBHOOK_SECRET",
    "MYCLAW_RECEIPT_KEY",
    "MYCLAW_DATABASE_URL",  # a PostgreSQL URL may carry the password
    "MYCLAW_STT_API_KEY",
    "MYCLAW_TTS_API_KEY",
    "WHATSAPP_ACCESS_TOKEN",
    "WHATSAPP_APP_SECRET",
    "WHATSAPP_VERIFY_TOKEN",
    "OPENAI_API_KEY",   # the default key of [models.*] provider = "openai"
)

DEFAULT_SECRET_FILES = (".env*", "*.pem", "*.key", "id_*", ".netrc", ".git-credentials",
                        "credentials*", "secrets.*")
SCAN_LIMIT = 200_000   # entries visited before a workspace counts as too large to be sure of
LISTINGS_KEPT = 100_000   # folder listings remembered (over every workspace) before starting afresh


@dataclass(frozen=True)
class SecretFiles:
    """The globs that make a path a secret file, compiled once."""

    patterns: tuple[str, ...] = DEFAULT_SECRET_FILES
    _regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        joined = "|".join(fnmatch.translate(p.lower()) for p in self.patterns if p)
        object.__setattr__(self, "_regex", re.compile(joined or r"(?!)", re.DOTALL))  # frozen

    @classmethod
    def from_config(cls, config: Any) -> SecretFiles:
        """The configured globs (`[security] secret_files`), the defaults without a config."""
        if config is None:
            return DEFAULT
        try:
            patterns = tuple(config["security"]["secret_files"])
        except (KeyError, TypeError):
            return DEFAULT
        return DEFAULT if patterns == DEFAULT_SECRET_FILES else _cached(patterns)

    def is_secret_name(self, name: str) -> bool:
        """Does one file or folder name match a secret glob?"""
        return self._regex.match(name.lower()) is not None

    def is_secret_path(self, path: str) -> bool:
        """Does any component of `path` (relative or absolute, `/`-separated) match?"""
        return any(self.is_secret_name(part) for part in re.split(r"[/\\]", path) if part)

    def named_in(self, words: Iterable[str]) -> list[str]:
        """The words that name a secret file anywhere in them: as a path, an option's value
        (--file=.env, -f.env), a revision's path (HEAD:.env) or inside quoted code."""
        found = []
        for word in words:
            tokens = _NAME_SEPARATORS.split(word)
            if word.startswith("-") and not word.startswith("--"):
                tokens += [word[i:] for i in range(2, len(word))]   # -f.env: -f with .env
            if any(token and self.is_secret_name(token) for token in tokens):
                found.append(word)
        return found


# What cannot be part of a file name as people write them in a command: a name is whatever
# lies between these (a path separator, rev:path, --opt=value, quotes, code punctuation).
_NAME_SEPARATORS = re.compile(r"[\s/\\:=,;'\"()`<>|&\[\]{}$]+")
DEFAULT = SecretFiles()
_BY_PATTERNS: dict[tuple[str, ...], SecretFiles] = {}


def _cached(patterns: tuple[str, ...]) -> SecretFiles:
    found = _BY_PATTERNS.get(patterns)
    if found is None:
        found = _BY_PATTERNS[patterns] = SecretFiles(patterns)
    return found


# --- which secret files a workspace holds -----------------------------------------------------


@dataclass(frozen=True)
class Inventory:
    """The secret files below one workspace, as real paths.

    `files`: the regular files that are secrets (by their path, or as a symlink's target).
    `aliases`: other names (hard links) of the same files. `stamp`: (path, mtime_ns, size) of
    each secret file, to tell whether their content may have changed. `complete`: False when
    the walk stopped at SCAN_LIMIT (then there may be more).
    """

    files: tuple[str, ...]
    aliases: tuple[str, ...]
    stamp: tuple[tuple[str, int, int], ...]
    complete: bool
    folders: int = 0   # folders walked: what asking again costs

    @property
    def masked(self) -> tuple[str, ...]:
        """Every path a sandbox must cover for the secrets to be out of reach."""
        return tuple(sorted({*self.files, *self.aliases}))

    @property
    def any(self) -> bool:
        return bool(self.files) or not self.complete


@dataclass(frozen=True)
class _Listing:
    """One folder as last listed: its mtime, subfolders, secret-named entries, regular files'
    (name, inode), and how many entries it had."""

    mtime_ns: int
    subdirs: tuple[str, ...]
    secret_names: tuple[str, ...]
    files: tuple[tuple[str, int], ...]
    entries: int


class _Scanner:
    """The folder listings of every workspace asked about, kept up to date by mtime."""

    def __init__(self) -> None:
        self._listings: dict[tuple[tuple[str, ...], str], _Listing] = {}
        self._lock = threading.Lock()   # scans run in worker threads too

    def inventory(self, root: str, files: SecretFiles) -> Inventory:
        root = os.path.realpath(root)
        with self._lock:
            return self._walk(root, files)

    def _listing(self, files: SecretFiles, path: str) -> _Listing | None:
        try:
            mtime = os.stat(path, follow_symlinks=False).st_mtime_ns
        except OSError:
            return None
        key = (files.patterns, path)
        known = self._listings.get(key)
        if known is not None and known.mtime_ns == mtime:
            return known
        try:
            with os.scandir(path) as it:
                entries = list(it)
        except OSError:
            return None
        subdirs, secret, regular = [], [], []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    subdirs.append(entry.name)
                elif entry.is_file(follow_symlinks=False):
                    regular.append((entry.name, entry.inode()))
            except OSError:
                continue
            if files.is_secret_name(entry.name):
                secret.append(entry.name)
        listing = _Listing(mtime, tuple(subdirs), tuple(secret), tuple(regular), len(entries))
        if len(self._listings) >= LISTINGS_KEPT:
            self._listings.clear()   # folders that are gone would otherwise stay forever
        self._listings[key] = listing
        return listing

    def _walk(self, root: str, files: SecretFiles) -> Inventory:
        found: set[str] = set()
        visited: list[tuple[str, _Listing]] = []
        stack, seen, complete = [(root, False)], 0, True
        while stack:
            path, inside_secret = stack.pop()
            listing = self._listing(files, path)
            if listing is None:
                continue
            seen += listing.entries
            if seen > SCAN_LIMIT:
                complete = False
                break
            visited.append((path, listing))
            secret = set(listing.secret_names)
            for name, _inode in listing.files:
                if inside_secret or name in secret:
                    found.add(os.path.join(path, name))
            for name in listing.subdirs:
                stack.append((os.path.join(path, name), inside_secret or name in secret))
            for name in secret - {n for n, _ in listing.files} - set(listing.subdirs):
                target = _link_target(root, os.path.join(path, name))
                if target is not None:
                    found.add(target)
        return _inventory(found, visited, complete)


def _link_target(root: str, path: str) -> str | None:
    """The regular file inside `root` that a secret-named symlink points to, if any."""
    real = os.path.realpath(path)
    if not real.startswith(root + os.sep):
        return None
    try:
        return real if stat.S_ISREG(os.stat(real).st_mode) else None
    except OSError:
        return None


def _inventory(found: set[str], visited: list[tuple[str, _Listing]], complete: bool) -> Inventory:
    stamp, linked = [], set()
    for path in sorted(found):
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:
            continue
        stamp.append((path, st.st_mtime_ns, st.st_size))
        if st.st_nlink > 1:   # another name for the same secret exists somewhere
            linked.add(st.st_ino)
    aliases = tuple(sorted({os.path.join(path, name) for path, listing in (visited if linked else ())
                            for name, inode in listing.files if inode in linked} - found))
    return Inventory(tuple(s[0] for s in stamp), aliases, tuple(stamp), complete, len(visited))


_SCANNER = _Scanner()


def inventory(root: str | os.PathLike[str], files: SecretFiles = DEFAULT) -> Inventory:
    """The secret files below `root` now (blocking: run it off the event loop for big trees)."""
    return _SCANNER.inventory(os.fspath(root), files)


def is_secret_inode(root: str | os.PathLike[str], st: os.stat_result,
                    files: SecretFiles = DEFAULT) -> bool:
    """Is this file (by inode) one of the workspace's secret files under another name? Only a
    file with several names can be, so the common case costs nothing."""
    if st.st_nlink < 2:
        return False
    for path in inventory(root, files).files:
        try:
            other = os.stat(path, follow_symlinks=False)
        except OSError:
            continue
        if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
            return True
    return False
