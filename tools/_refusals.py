"""What the workspace sandbox (tools/_sandbox.py) says when it refuses a path: the message a
person reads (a Phrase, in their language on the status line) and the hint the model acts on.
"""

from __future__ import annotations

import errno

from bot.core.tool import (
    CallContext,
    ToolExternalError,
    ToolNotFoundError,
    ToolPermissionError,
)
from bot.language.catalogs import N_
from bot.language.phrase import Phrase


def outside_error(ctx: CallContext, path: str, why: Phrase) -> ToolPermissionError:
    return ToolPermissionError(
        Phrase("{path} is not allowed: {why}.", path=repr(path), why=why),
        f"Paths must be inside the workspace {ctx.workspace}; use a relative path like "
        "notes/a.md. List what exists with glob_list (pattern '**/*').",
        {"path_attempted": path},
    )


def forbidden(ctx: CallContext, path: str) -> ToolPermissionError:
    return ToolPermissionError(
        Phrase("{path} is one of the bot's protected files (configuration, store or keys); "
               "tools may never read or write it.", path=repr(path)),
        "Do not try to reach the bot's own configuration or secrets. Work on other files in "
        f"the workspace {ctx.workspace}, or ask the user to change settings themselves.",
        {"path_attempted": path},
    )


SECRET_WRITE_HINT = ("Secret files (.env, keys, credentials) are never written by a tool: tell the "
                     "user what to put in it and let them edit it themselves.")
SECRET_READ_HINT = ("A secret file is read only in a call the user approves naming it. If the "
                    "user asked for it, call the tool again with the secret file's own path "
                    "(that call asks them first); never guess what it holds.")


def secret_refused(path: str, shown: str, *, for_write: bool) -> ToolPermissionError:
    if for_write:
        return ToolPermissionError(Phrase("{path} is a secret file ({shown}); tools never write "
                                          "it.", path=repr(path), shown=shown),
                                   SECRET_WRITE_HINT, {"path_attempted": path})
    return ToolPermissionError(
        Phrase("{path} is a secret file ({shown}) and this call was not approved by a person.",
               path=repr(path), shown=shown),
        SECRET_READ_HINT, {"path_attempted": path})


# One sentence per action, not a verb put into one: each language builds its own.
_REFUSED = {"read": N_("The operating system refused to read {path}."),
            "write": N_("The operating system refused to write {path}."),
            "delete": N_("The operating system refused to delete {path}.")}
_CANNOT = {"read": N_("Cannot read {path}: {problem}."),
           "write": N_("Cannot write {path}: {problem}."),
           "delete": N_("Cannot delete {path}: {problem}.")}


def os_failure(ctx: CallContext, shown: str, exc: OSError, action: str) -> Exception:
    """An OS error on `shown` (the workspace-relative path) while trying to `action` it."""
    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        return outside_error(ctx, shown, Phrase("a part of it changed into a symlink or "
                                                "non-directory"))
    if isinstance(exc, FileNotFoundError):
        return ToolNotFoundError(Phrase("{path} does not exist in the workspace.", path=shown),
                                 "List what exists with glob_list, then retry with a real path.")
    if isinstance(exc, PermissionError):
        return ToolPermissionError(Phrase(_REFUSED[action], path=shown),
                                   "Try another file in the workspace or ask the user.")
    return ToolExternalError(Phrase(_CANNOT[action], path=shown, problem=str(exc.strerror or exc)),
                             "The disk refused the operation; tell the user what failed.")
