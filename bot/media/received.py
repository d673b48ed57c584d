"""Uploads saved under <workspace>/inbox/ so tools can work on them, within a per-sender quota.

The file name is ours, never the sender's: a timestamp, the original name reduced to
[A-Za-z0-9._-] (no dots in front, at most 40 characters) and an extension chosen from the
*content* (a photo is .jpg/.png/…, whatever it was called). The file is created relative to an
`inbox` directory opened without following symlinks, with O_EXCL and O_NOFOLLOW, so neither a
name nor a planted symlink can put it anywhere else or overwrite anything.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
import unicodedata
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from bot.language.phrase import Phrase, size_phrase
from bot.media.limits import MediaRefused

INBOX = "inbox"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
AUDIO_SUFFIXES = (".ogg", ".oga", ".opus", ".mp3", ".m4a", ".wav", ".webm", ".flac", ".aac")
MAX_SHOWN_NAME = 80
_BRACKETS = str.maketrans("[]<>", "()()")


def shown_name(original: str, fallback: str = "") -> str:
    """A file name as the model and the chat show it: the last path component, with control
    and format characters turned into spaces (a newline could fake a line of our own next to an
    attachment, a right-to-left override could make "gpj.exe" read as "exe.jpg"), no brackets
    (a name cannot close our "[photo …]" label and go on as if we said it), at most 80
    characters, the extension kept."""
    base = PurePosixPath(original.replace("\\", "/")).name
    visible = "".join(" " if unicodedata.category(c)[0] in "CZ" else c for c in base)
    name = " ".join(visible.translate(_BRACKETS).split())
    if len(name) > MAX_SHOWN_NAME:
        suffix = PurePosixPath(name).suffix[:16]
        name = name[:MAX_SHOWN_NAME - len(suffix) - 1].rstrip() + "…" + suffix
    return name or fallback


def safe_stem(original: str, fallback: str) -> str:
    base = PurePosixPath(original.replace("\\", "/")).name
    stem = _UNSAFE.sub("-", PurePosixPath(base).stem)[:40].strip(".-")
    return stem or fallback


def candidates(original: str, suffix: str, fallback: str, when: float):
    stamp = datetime.fromtimestamp(when, UTC).strftime("%Y%m%d-%H%M%S")
    stem = f"{stamp}-{safe_stem(original, fallback)}"
    yield f"{stem}{suffix}"
    for number in range(2, 1000):
        yield f"{stem}-{number}{suffix}"


def write_new_file(workspace: Path, original: str, suffix: str, fallback: str, data: bytes,
                   when: float) -> str:
    """Create inbox/<safe unique name> with `data`; returns the workspace-relative path."""
    root = os.open(workspace, _DIR)
    try:
        try:
            os.mkdir(INBOX, 0o755, dir_fd=root)
        except FileExistsError:
            pass
        try:
            inbox = os.open(INBOX, _DIR | os.O_NOFOLLOW, dir_fd=root)
        except OSError as exc:   # a symlink or a file named inbox
            raise MediaRefused(Phrase("The workspace's inbox folder is not a plain folder; the "
                                      "file was not saved.")) from exc
    finally:
        os.close(root)
    try:
        for name in candidates(original, suffix, fallback, when):
            try:
                fd = os.open(name, _NEW_FILE, 0o644, dir_fd=inbox)
            except FileExistsError:
                continue
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            return f"{INBOX}/{name}"
    finally:
        os.close(inbox)
    raise MediaRefused(Phrase("Too many files with this name in the inbox this second; not "
                              "saved."))


class Inbox:
    def __init__(self, store: Any, quota_bytes: int):
        self.store = store
        self.quota_bytes = quota_bytes

    async def used(self, sender: str) -> int:
        row = await self.store.fetchone(
            "SELECT COALESCE(SUM(size), 0) AS used FROM inbox_files WHERE sender = ?", (sender,))
        return int(row["used"]) if row else 0

    async def save(self, workspace: Path, sender: str, original: str, suffix: str, fallback: str,
                   data: bytes) -> str:
        """Save an upload; MediaRefused when the sender's quota would be exceeded."""
        used = await self.used(sender)
        if used + len(data) > self.quota_bytes:
            raise MediaRefused(Phrase(
                "Your inbox is full ({used} of {quota} used), so this file was not saved to the "
                "workspace; delete old files from inbox/ to make room.", used=size_phrase(used),
                quota=size_phrase(self.quota_bytes)))
        now = time.time()
        path = await asyncio.to_thread(write_new_file, workspace, original, suffix, fallback, data, now)
        async with self.store.transaction() as tx:
            await tx.execute(
                "INSERT INTO inbox_files(sender, path, size, created_at) VALUES (?, ?, ?, ?)",
                (sender, path, len(data), now))
        return path
