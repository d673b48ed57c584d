"""Whose folder a tool call works in: `workspace_for(config, sender)`.

`[agent] workspace_mode`:
- "shared" (the default, so existing installs keep working): every sender works in the
  workspace root, and so sees everyone's files;
- "per_sender": each sender gets a folder of their own under the root, created on first use,
  and the file and shell tools are confined to it. The terminal (any `cli:` sender, the owner at
  the keyboard) keeps the root, and so sees every sender's folder.

Folder names are derived from the sender's text form, injectively and safely: letters and digits
stay, ":" becomes "_", every other byte becomes "-xx" (hex). So "telegram:42" is "telegram_42",
no two senders share a folder, and no name can be ".", "..", hidden or contain a "/".
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Any

from bot.core.errors import ConfigError
from bot.core.identity import is_operator

MODES = ("shared", "per_sender")
MAX_NAME = 120  # far below any filesystem's limit, even after escaping
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")


def folder_name(sender: str) -> str:
    """The sender's folder name: injective, only [a-z0-9_-], never empty."""
    if not sender:
        raise ValueError("a sender id cannot be empty")
    name = "".join(_escape(byte) for byte in sender.encode("utf-8"))
    if len(name) > MAX_NAME:  # keep a readable head, then a digest of the whole id
        name = f"{name[:MAX_NAME - 65]}-{hashlib.sha256(sender.encode('utf-8')).hexdigest()}"
    return name


def _escape(byte: int) -> str:
    char = chr(byte)
    if char in _PLAIN:
        return char
    return "_" if char == ":" else f"-{byte:02x}"


def uses_root(sender: str) -> bool:
    return is_operator(sender)


def workspace_for(config: Any, sender: str) -> Path:
    """The folder this sender's tool calls work in (created on first use in per_sender mode).

    A folder that exists but is not a real directory (a symlink someone planted while the
    workspace was shared) is refused rather than followed.
    """
    root = config.workspace
    if config["agent"].get("workspace_mode", "shared") != "per_sender" or uses_root(sender):
        return root
    folder = root / folder_name(sender)
    root.mkdir(parents=True, exist_ok=True)
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        pass
    if not stat.S_ISDIR(os.lstat(folder).st_mode):
        raise ConfigError(f"{folder} (the workspace of {sender}) is not a directory; move it "
                          "away so myclaw can create the sender's folder")
    return folder
