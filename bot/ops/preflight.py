"""What `myclaw run` checks before it starts anything, and `myclaw doctor` shows: one list.

Each check looks without changing anything (a directory that does not exist yet is probed by
creating and removing a temporary one next to where it will be) and says `ok`, `warn` or
`FAIL`; `run` refuses to start at the first FAIL with that one line (exit 2), doctor prints
them all. They need no network: the remote services are asked only by `doctor --online` and the
per-channel flags.

    the workspace      not too broad, and a directory that exists or can be created
    the data directory where the SQLite store and the receipt key live: can be created
    the receipt key    readable when it exists
    each channel       the shape of its tokens, what its mode needs (the checks its start runs)
    each port          the address and port of every listener the config starts can be bound
"""

from __future__ import annotations

import importlib
import os
import socket
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bot.config.settings import Config
from bot.core.errors import ChannelError, ConfigError, MyclawError
from bot.core.events import valid_text
from bot.store.sqlite import OPEN_FIX

Status = Literal["ok", "warn", "FAIL"]

# name, section, label: the channels and the token that switches each on
CHANNELS = (("telegram", "TELEGRAM_BOT_TOKEN", "Telegram"),
            ("discord", "DISCORD_BOT_TOKEN", "Discord"),
            ("slack", "SLACK_BOT_TOKEN", "Slack"),
            ("whatsapp", "WHATSAPP_ACCESS_TOKEN", "WhatsApp"))


class StartupError(MyclawError):
    """`myclaw run` cannot start: one line naming the thing and what to do."""


@dataclass(frozen=True)
class Check:
    status: Status
    name: str
    detail: str

    def line(self) -> str:
        # Paths and values come from the environment and the config: shown back as valid text.
        return valid_text(f"{self.status:<4} {self.name}: {self.detail}")


def checks(config: Config, import_module: Callable[[str], Any] = importlib.import_module,
           *, channels: bool = True) -> list[Check]:
    """Every check of the list, in order (`channels=False`: for the terminal alone, `myclaw
    chat`, which starts no platform channel)."""
    found = [workspace_check(config)]
    if not config.database_url:
        found.append(directory_check("data directory", config.data_dir, OPEN_FIX))
    found.append(receipt_key_check(config))
    if channels:
        found += channel_checks(config, import_module)
    found += port_checks(config, channels=channels)
    return found


def refuse(config: Config, *, channels: bool = True) -> None:
    """Raise StartupError with the first check that FAILs (what `myclaw run` does first)."""
    for check in checks(config, channels=channels):
        if check.status == "FAIL":
            raise StartupError(f"{check.name}: {check.detail}")


# --- paths ----------------------------------------------------------------------------------

def cannot_create(path: Path) -> str | None:
    """Why the directory `path` cannot be had (None: it exists, or it can be created)."""
    existing = path
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    if existing == path:
        return None if path.is_dir() else f"{path} exists and is not a directory"
    if not existing.is_dir():
        return f"{existing} is a file, so {path} cannot be created under it"
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".myclaw-probe-", dir=existing))
    except OSError as exc:
        return f"cannot create {path}: {existing} does not allow it ({exc.strerror or exc})"
    return None


def directory_check(name: str, path: Path, fix: str) -> Check:
    problem = cannot_create(path)
    if problem:
        return Check("FAIL", name, f"{problem}; {fix}")
    return Check("ok", name, f"{path} ({'exists' if path.is_dir() else 'will be created at start'})")


def workspace_check(config: Config) -> Check:
    from bot.access.workspace_scope import CREATE_FIX, FIX, broad_workspace_reason

    broad = broad_workspace_reason(config)
    if broad and config["agent"]["allow_broad_workspace"]:
        return Check("warn", "workspace", f"{broad} (allowed by [agent] allow_broad_workspace)")
    if broad:
        return Check("FAIL", "workspace", f"{broad}: start-up refuses it; {FIX}")
    return directory_check("workspace", config.workspace, CREATE_FIX)


def receipt_key_check(config: Config) -> Check:
    from bot.approvals.receipts import env_key, key_path, read_key

    if env_key(config.env) is not None:
        return Check("ok", "receipt key", "from MYCLAW_RECEIPT_KEY")
    path = key_path(config.data_dir)
    try:
        exists = read_key(path) is not None
    except MyclawError as exc:
        return Check("FAIL", "receipt key", f"{exc}; make it a readable file of this user "
                     "(chmod 600), or set MYCLAW_RECEIPT_KEY")
    return Check("ok", "receipt key", f"{path} ({'exists' if exists else 'created at start'})")


# --- channels -------------------------------------------------------------------------------

def channel_checks(config: Config, import_module: Callable[[str], Any] = importlib.import_module
                   ) -> list[Check]:
    """Per channel: off, or the checks its start runs before any network call."""
    from bot.app import channel_module

    found = []
    for name, token, label in CHANNELS:
        if not config[name]["enabled"]:
            found.append(Check("ok", token, f"{label} is disabled in [{name}]"))
        elif not config.secret(token):
            found.append(Check("warn", token, f"not set: the {label} channel stays off"))
        else:
            try:
                channel_module(name, import_module).check_config(config)
            except (ChannelError, ConfigError) as exc:
                found.append(Check("FAIL", token, f"{exc}; `myclaw run` refuses to start"))
                continue
            except ImportError as exc:
                found.append(Check("FAIL", token, f"set, but the {label} channel cannot be "
                                   f"loaded ({exc}): install myclaw's dependencies"))
                continue
            found.append(Check("ok", token, f"set: the {label} channel starts"))
    return found


# --- ports ----------------------------------------------------------------------------------

def listeners(config: Config, *, channels: bool = True) -> dict[tuple[str, int], str]:
    """(address, port) -> the config section of every listener `run` will start (port 0, any
    free port, is left out: it cannot be taken)."""
    wanted = []
    if config["health"]["enabled"]:
        wanted.append("health")
    if config["console"]["enabled"]:
        wanted.append("console")
    if channels and config.telegram_enabled and config["telegram"]["mode"] == "webhook":
        wanted.append("telegram")
    if channels and config.slack_enabled and config["slack"]["mode"] == "events":
        wanted.append("slack")
    if channels and config.whatsapp_enabled:
        wanted.append("whatsapp")
    found: dict[tuple[str, int], str] = {}
    for section in wanted:
        address = (str(config[section]["listen"]), int(config[section]["port"]))
        if address[1]:
            found.setdefault(address, section)
    return found


def port_checks(config: Config, *, channels: bool = True) -> list[Check]:
    return [_port_check(section, host, port)
            for (host, port), section in listeners(config, channels=channels).items()]


def _port_check(section: str, host: str, port: int) -> Check:
    name = f"[{section}] port"
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except OSError as exc:
        return Check("FAIL", name, f"cannot resolve listen = {host!r}: {exc.strerror or exc}; "
                     f"set [{section}] listen to an address of this machine")
    family, kind, proto, _, where = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # as the server binds
        try:
            probe.bind(where)
        except OSError as exc:
            return Check("FAIL", name, f"cannot listen on {host}:{port}: {exc.strerror or exc}; "
                         f"stop what uses it or set [{section}] port to a free one")
    return Check("ok", name, f"{host}:{port} is free")
