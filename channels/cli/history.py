"""Where the terminal keeps what was sent before (↑ / ↓ and Ctrl-R at the prompt): one file per
user in the state directory, readable by that user only. Only messages go there: answers to an
approval question and whatever is typed at a secret prompt never do."""

from __future__ import annotations

import getpass
import os
import re
from pathlib import Path

FILE_MODE = 0o600
DIR_MODE = 0o700


def history_path(data_dir: Path) -> Path:
    user = re.sub(r"[^A-Za-z0-9_.-]", "_", _user()) or str(os.getuid())
    return data_dir / "terminal" / f"history-{user}"


def prepared(path: Path) -> Path:
    """The history file, created (and its mode made 0600) before anything is written to it."""
    path.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_APPEND, FILE_MODE))
    os.chmod(path, FILE_MODE)   # a file made before, by hand or by an older version
    return path


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):   # no name for this uid (a container's arbitrary user)
        return ""
