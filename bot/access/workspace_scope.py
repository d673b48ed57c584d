"""Is the agent's workspace a dedicated directory, or something far broader?

The workspace is the only directory the file and shell tools may touch. Pointing it at `/`, at
the home directory or at any directory that contains the home or the bot's own data (store,
receipt key) hands the model the operator's SSH keys, shell profiles and the approval records
themselves. That is refused at start-up unless the operator sets
`[agent] allow_broad_workspace = true`; `myclaw doctor` reports it as FAIL (as a warning when
it is allowed).
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path

from bot.config.settings import Config
from bot.core.errors import ConfigError

FIX = ('point [agent] workspace at a dedicated directory such as "~/myclaw-workspace" '
       "(or set [agent] allow_broad_workspace = true if you really mean it)")


def _homes(config: Config) -> set[Path]:
    homes = {config.home.resolve()}
    try:
        homes.add(Path(pwd.getpwuid(os.getuid()).pw_dir).resolve())
    except KeyError:  # a uid with no passwd entry (some containers): HOME is all there is
        pass
    return homes


def broad_workspace_reason(config: Config) -> str | None:
    """Why the workspace reaches more than it should, or None when it is a dedicated directory."""
    workspace = config.workspace
    if workspace == Path(workspace.anchor):
        return f"the workspace {workspace} is the filesystem root"
    for home in sorted(_homes(config)):
        if home.is_relative_to(workspace):
            what = "is" if home == workspace else "contains"
            return f"the workspace {workspace} {what} the home directory {home}"
    if config.data_dir.is_relative_to(workspace):
        return (f"the workspace {workspace} contains myclaw's own data ({config.data_dir}: "
                "approvals, receipts, the receipt key)")
    return None


def require_dedicated_workspace(config: Config) -> None:
    """Refuse to start on a broad workspace unless the config explicitly allows it."""
    reason = broad_workspace_reason(config)
    if reason and not config["agent"]["allow_broad_workspace"]:
        raise ConfigError(f"{config.origin}: [agent] workspace: {reason}: {FIX}")


CREATE_FIX = "set [agent] workspace to a directory this user can create and write"


def create_workspace(config: Config) -> None:
    """The workspace directory, created if missing, or one ConfigError naming it and the fix."""
    try:
        config.workspace.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"workspace: cannot create {config.workspace}: "
                          f"{exc.strerror or exc}; {CREATE_FIX}") from exc
