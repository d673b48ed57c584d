"""`myclaw doctor --security`: risky settings of the effective configuration, each with its fix.

`audit(config)` changes nothing and reaches no network: it reads the merged configuration, the
environment the config was loaded with, and the permission bits of the config file, the store and
the receipt key. Severity: high = a stranger, a group member or the model itself can get past the
approval model or read secrets; medium = a weaker boundary than the owner probably meant; low =
worth knowing.
"""

from __future__ import annotations

import ipaddress
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from bot.config.settings import Config, SessionScope
from bot.core.identity import OPERATOR, is_operator
from bot.core.secrets.files import DEFAULT_SECRET_FILES
from bot.core.tool import Finding, Severity

SEVERITY_ORDER: tuple[Severity, ...] = ("high", "medium", "low")

SHELL_TOOL = "shell_run"
# Cloud instance-metadata endpoints: a request there can hand out the machine's credentials.
METADATA_ADDRESSES = frozenset({
    ipaddress.ip_address("169.254.169.254"),   # AWS, GCP, Azure, OpenStack, ...
    ipaddress.ip_address("fd00:ec2::254"),     # AWS over IPv6
    ipaddress.ip_address("100.100.100.200"),   # Alibaba Cloud
    ipaddress.ip_address("169.254.170.2"),     # AWS ECS task credentials
})
METADATA_HOSTNAMES = frozenset({
    "metadata.google.internal", "metadata.goog", "metadata", "instance-data",
    "instance-data.ec2.internal",
})
SYSTEM_DIRS = frozenset(Path(p) for p in (
    "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib64", "/opt", "/proc", "/root",
    "/run", "/sbin", "/srv", "/sys", "/usr", "/var",
))
# Sender ids the channels produce: numeric Telegram/Discord user ids, a word for the terminal.
APPROVER_RE = re.compile(r"^(telegram:\d{1,20}|discord:\d{15,21}|cli:[A-Za-z0-9_.\-]+)$")
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


def groups_explained(config: Config) -> str:
    """What the workspace and session modes mean for a group, in words (doctor --security)."""
    agent = config["agent"]
    shared = agent["session_scope"] == "chat"
    talk = ("members share one conversation (each one's words reach the others' turns as "
            "data, and taint them)" if shared else
            "each member has a conversation of their own, but every answer is posted in the group")
    if agent["workspace_mode"] == "per_sender":
        reach = ("a turn there works in the group's own folder and memory, never a member's "
                 "private one; share_private shows a member's file or memory to the group only "
                 "after that member approves")
    else:
        reach = ("workspace_mode is \"shared\": a turn there reads (and, approved, changes) the "
                 "one workspace everybody shares and the member's own memory, and whatever it "
                 "reads can end up in the group's chat — set workspace_mode = \"per_sender\" to "
                 "give each group a folder and memory of its own")
    return (f"in a group everyone reads the bot's answers: {talk}; {reach}. Sending a file, a "
            "reminder or a job to the chat, the network and MCP servers count as leaving: after "
            "the turn read anything the requester did not type, they are asked")


def audit(config: Config) -> list[Finding]:
    """Every finding, most severe first (ties keep the order of the checks)."""
    findings = [f for check in _CHECKS for f in check(config)]
    return sorted(findings, key=lambda f: SEVERITY_ORDER.index(f.severity))


# --- who can do what ---------------------------------------------------------------------------


def _check_unknown_senders(config: Config) -> Iterator[Finding]:
    level = config["senders"]["unknown"]
    fix = 'set [senders] unknown = "pairing" and approve people with `myclaw pair approve CODE`'
    if level in ("supervised", "full"):
        yield Finding("high", "senders.unknown",
                      f'anyone who finds the bot gets "{level}" autonomy, and a requester may '
                      "approve their own requests", fix)
    elif level == "read_only":
        yield Finding("low", "senders.unknown",
                      "anyone who finds the bot can chat and run low-risk tools on your API key", fix)


def _full_non_cli_sources(config: Config) -> list[str]:
    """The config keys through which a non-CLI sender reaches full autonomy."""
    sources = [f"senders.{s}" for s, lvl in config["senders"].items()
               if s != "unknown" and not is_operator(s) and lvl == "full"]
    if config["senders"]["unknown"] == "full":
        sources.append("senders.unknown")
    if config["discord"]["guilds"]:
        sources += [f"discord.roles.{role}" for role, lvl in config["discord"]["roles"].items()
                    if lvl == "full"]
    return sources


def _check_groups_with_full(config: Config) -> Iterator[Finding]:
    shared = config.session_scope is SessionScope.CHAT
    if config["discord"]["guilds"]:
        for role, level in config["discord"]["roles"].items():
            if level == "full":
                yield Finding("high", f"discord.roles.{role}",
                              f'every member given the "{role}" role in an allowed guild gets full '
                              "autonomy, and whoever can assign roles decides who that is",
                              'map the role to "supervised" or "read_only" and give yourself '
                              '"full" with an explicit [senders] "discord:<your id>" entry')
    groups = {"telegram": ("telegram.groups", config["telegram"]["groups"]),
              "discord": ("discord.guilds", config["discord"]["guilds"])}
    for channel, (key, allowed) in groups.items():
        full = [s for s, lvl in config["senders"].items()
                if s.startswith(f"{channel}:") and lvl == "full"]
        if not (allowed and full):
            continue
        problem = (f"{', '.join(full)} has full autonomy and {key} lets the bot answer in shared "
                   "chats, where tool output is shown to everyone")
        if shared:
            yield Finding("high", key, problem + ' and, with session_scope = "chat", other '
                          "members' messages are read (as data) in the same full-autonomy "
                          "session",
                          'set [agent] session_scope = "sender", or remove the groups')
        else:
            yield Finding("medium", key, problem,
                          "keep full autonomy to private chats: remove the groups, or lower those "
                          "senders to supervised")


def _check_shell_without_approval(config: Config) -> Iterator[Finding]:
    profile_name = config["agent"]["profile"]
    profile = config.profile()
    where = f"profiles.{profile_name}"
    if SHELL_TOOL in profile["excluded_tools"]:
        return
    if profile["allowed_tools"] and SHELL_TOOL not in profile["allowed_tools"]:
        return
    full = _full_non_cli_sources(config)
    supervised = [f"senders.{s}" for s, lvl in config["senders"].items()
                  if (s == "unknown" or not is_operator(s)) and lvl == "supervised"]
    fix = (f'add "{SHELL_TOOL}" to {where}.always_ask (approve every command) or to '
           f"{where}.excluded_tools (terminal only)")
    if SHELL_TOOL in profile["auto_approve"] and SHELL_TOOL not in profile["always_ask"]:
        unfix = f"remove {SHELL_TOOL} from {where}.auto_approve; " + fix
        if full:
            yield Finding("high", f"{where}.auto_approve",
                          f"{SHELL_TOOL} is auto-approved, so any shell command from "
                          f"{', '.join(full)} runs with no human in the loop", unfix)
            return
        if supervised:
            yield Finding("medium", f"{where}.auto_approve",
                          f"{SHELL_TOOL} is auto-approved, so read-only shell commands from "
                          f"{', '.join(supervised)} run with no human in the loop", unfix)
            return
    if full and SHELL_TOOL not in profile["always_ask"]:
        yield Finding("medium", f"{where}.always_ask",
                      f"read-only shell commands run without approval for {', '.join(full)} "
                      "(full autonomy on a chat channel)", fix)


def _check_approvers(config: Config) -> Iterator[Finding]:
    for approver in config["approvals"]["approvers"]:
        if not APPROVER_RE.match(approver):
            yield Finding("medium", "approvals.approvers",
                          f"{approver!r} is not a sender id the channels produce, so it matches "
                          "nobody (or not whom you meant)",
                          'use "telegram:<numeric user id>", "discord:<numeric user id>" or '
                          f'"{OPERATOR}"; /whoami shows yours')


# --- where the agent may write -----------------------------------------------------------------


def _homes(config: Config) -> set[Path]:
    homes = {Path.home().resolve()}
    if config.env.get("HOME"):
        homes.add(Path(config.env["HOME"]).expanduser().resolve())
    return homes


def _check_workspace(config: Config) -> Iterator[Finding]:
    workspace = config.workspace
    fix = 'point [agent] workspace at a dedicated directory, e.g. "~/myclaw-workspace"'
    homes = _homes(config)
    if workspace == Path(workspace.anchor):
        yield Finding("high", "agent.workspace",
                      "the workspace is the filesystem root: file and shell tools reach every "
                      "file the service user can read", fix)
    elif workspace in homes or any(home.is_relative_to(workspace) for home in homes):
        yield Finding("high", "agent.workspace",
                      f"the workspace {workspace} contains your home directory: file and shell "
                      "tools reach SSH keys, shell profiles and other programs' credentials", fix)
    elif workspace in SYSTEM_DIRS:
        yield Finding("high", "agent.workspace",
                      f"the workspace {workspace} is a system directory", fix)


def _inside(path: Path, workspace: Path) -> bool:
    return path.resolve().is_relative_to(workspace)


def _check_state_outside_workspace(config: Config) -> Iterator[Finding]:
    workspace = config.workspace
    if _inside(config.store_path, workspace):
        yield Finding("high", "store.path",
                      f"the store {config.store_path} is inside the workspace: the model's file "
                      "tools can rewrite approvals, receipts and history (and the receipt key "
                      "beside it)",
                      "move [store] path outside the workspace (the default is "
                      "$XDG_DATA_HOME/myclaw/myclaw.db)")
    if config.source is not None and _inside(config.source, workspace):
        yield Finding("high", "agent.workspace",
                      f"the config file {config.source} is inside the workspace: the model can "
                      "raise its own autonomy",
                      "keep the config file outside the workspace (e.g. ~/.config/myclaw/myclaw.toml)")
    for entry in config["tools"]["custom_paths"]:
        if _inside(Path(entry).expanduser(), workspace):
            yield Finding("high", "tools.custom_paths",
                          f"custom tool directory {entry!r} is inside the workspace: the model "
                          "can write a tool that runs as code on the next start",
                          "keep custom tools outside the workspace")


def _check_permissions(config: Config) -> Iterator[Finding]:
    files = [("config file", "permissions.config", config.source),
             ("receipt key", "permissions.receipt_key", config.data_dir / "receipt.key"),
             ("store", "permissions.store", config.store_path)]
    for label, key, path in files:
        if path is None:
            continue
        try:
            mode = path.stat().st_mode
        except OSError:
            continue  # not created yet: nothing readable
        fix = f"chmod 600 {path}"
        if mode & stat.S_IROTH:
            yield Finding("high", key, f"the {label} {path} is readable by every user on this "
                          "machine", fix)
        elif mode & stat.S_IRGRP:
            yield Finding("medium", key, f"the {label} {path} is readable by its group", fix)


# --- network -----------------------------------------------------------------------------------


def _check_net_allow_list(config: Config) -> Iterator[Finding]:
    net = config["tools"]["net"]
    for key in ("allow_hosts", "allow_domains"):
        for entry in net[key]:
            finding = _allow_entry_finding(f"tools.net.{key}", str(entry))
            if finding is not None:
                yield finding


def _allow_entry_finding(key: str, entry: str) -> Finding | None:
    fix = f"remove {entry!r} from {key}; list only the single hosts the agent needs"
    host = entry.strip().lower().rstrip(".").strip("[]")
    if host in ("*", "0.0.0.0/0", "::/0"):
        return Finding("high", key, f"{entry!r} lets the agent reach every private address, "
                       "cloud metadata included", fix)
    try:
        network = ipaddress.ip_network(host, strict=False)
    except ValueError:
        if host in METADATA_HOSTNAMES:
            return Finding("high", key, f"{entry!r} is a cloud metadata endpoint", fix)
        return None
    if any(address in network for address in METADATA_ADDRESSES
           if address.version == network.version):
        what = "is" if network.num_addresses == 1 else "contains"
        return Finding("high", key, f"{entry!r} {what} a cloud metadata address: a fetched page "
                       "can make the agent read the machine's cloud credentials", fix)
    if network.num_addresses > 1 and (network.is_private or network.is_loopback
                                      or network.is_link_local):
        return Finding("medium", key, f"{entry!r} opens a whole private range ({network}) to the "
                       "agent's web tools", fix)
    return None


def _check_telegram_transport(config: Config) -> Iterator[Finding]:
    telegram = config["telegram"]
    if not telegram["enabled"]:
        return
    for key in ("base_url", "base_file_url"):
        parts = urlsplit(telegram[key])
        if parts.scheme != "https" and (parts.hostname or "") not in LOOPBACK_HOSTS:
            yield Finding("high", f"telegram.{key}",
                          f"{telegram[key]!r} is not https: the bot token travels in clear text",
                          "use an https:// Bot API URL (plain http only to a server on localhost)")
    if telegram["mode"] != "webhook":
        return
    if not config.secret("TELEGRAM_WEBHOOK_SECRET"):
        yield Finding("high", "telegram.mode",
                      "webhook mode without TELEGRAM_WEBHOOK_SECRET: anyone who finds the URL can "
                      "post updates that look like they come from you",
                      "set TELEGRAM_WEBHOOK_SECRET in the service environment (run doctor with the "
                      "same environment)")
    if urlsplit(telegram["webhook_url"]).scheme != "https":
        yield Finding("medium", "telegram.webhook_url",
                      f"{telegram['webhook_url']!r} is not an https URL",
                      "serve the webhook behind a TLS reverse proxy and use its https:// URL")


def _check_health_exposure(config: Config) -> Iterator[Finding]:
    health = config["health"]
    if health["enabled"] and health["listen"] not in LOOPBACK_HOSTS:
        yield Finding("low", "health.listen",
                      f"the health endpoint listens on {health['listen']}, visible beyond this "
                      "machine", 'use listen = "127.0.0.1" unless a remote monitor needs it')


# --- money -------------------------------------------------------------------------------------


def _others_can_spend(config: Config) -> list[str]:
    """Who besides the terminal operator can start model calls, as config keys."""
    who = [f"senders.{s}" for s, level in config["senders"].items()
           if s != "unknown" and not is_operator(s)]
    if config["senders"]["unknown"] != "ignore":
        who.append("senders.unknown")  # "pairing": every sender paired later
    if config["discord"]["guilds"]:
        who += [f"discord.roles.{role}" for role in config["discord"]["roles"]]
    return who


def _check_budgets(config: Config) -> Iterator[Finding]:
    who = _others_can_spend(config)
    if not who:
        return
    budgets = config["budgets"]
    reach = f"paired and listed senders ({', '.join(who[:3])}{', …' if len(who) > 3 else ''})"
    if not budgets["sender_daily"] and not budgets["sender_monthly"]:
        yield Finding("medium", "budgets.sender_daily",
                      f"{reach} can spend on your API key with no per-sender limit",
                      "set [budgets] sender_daily and sender_monthly (e.g. 2.0 and 30.0)")
    if not budgets["global_daily"]:
        yield Finding("low", "budgets.global_daily",
                      "nothing caps what everyone together spends in a day",
                      "set [budgets] global_daily (e.g. 20.0)")


def _check_secret_files(config: Config) -> Iterator[Finding]:
    configured = set(config["security"]["secret_files"])
    missing = [g for g in DEFAULT_SECRET_FILES if g not in configured]
    if not configured:
        yield Finding("medium", "security.secret_files",
                      "no file counts as a secret file: .env files and keys are read, shown to "
                      "the model and readable in the shell like any other file",
                      "remove [security] secret_files to get the defaults back")
    elif missing:
        yield Finding("low", "security.secret_files",
                      f"{', '.join(missing)} no longer count as secret files",
                      "add them back to [security] secret_files unless they hold no secrets here")


_CHECKS = (
    _check_unknown_senders,
    _check_groups_with_full,
    _check_shell_without_approval,
    _check_approvers,
    _check_workspace,
    _check_state_outside_workspace,
    _check_permissions,
    _check_net_allow_list,
    _check_telegram_transport,
    _check_health_exposure,
    _check_budgets,
    _check_secret_files,
)
