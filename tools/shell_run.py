"""shell_run: run one shell command in the caller's workspace, inside the bubblewrap sandbox
(tools/_bwrap.py), with a timeout, an output cap, resource limits and a scrubbed environment;
the whole process tree dies on timeout, /stop or cancellation.

The sandbox is the boundary: a command sees only the caller's workspace, read-only system files,
a private /tmp and /proc, and no network unless the call asks for it. Where bubblewrap cannot
run, every call is refused (`myclaw doctor --security` says how to fix it).

Risk is still decided per command (`classify`), for the approval: a known read-only program
in a known shape with plain arguments that stay inside the workspace is medium; anything else
is high, and so is any call with network (data can leave). When in doubt: high. Secret files
are masked for every call not approved by a person at high risk (tools/_shell_secrets.py).
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Any, ClassVar

from bot.core.secrets.files import DEFAULT, SECRET_ENV_VARS, SecretFiles
from bot.core.secrets.redaction import hidden_from_tools
from bot.core.tool import (
    BaseTool,
    CallContext,
    Finding,
    Risk,
    ToolInvalidArgsError,
    ToolMeta,
    ToolPermissionError,
)
from bot.language.phrase import Phrase

if TYPE_CHECKING:
    from tools._bwrap import SandboxFinder

SECRET_NAME_PARTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")
# Read-only runs must stay read-only even in a repository whose config names a program to run.
# The workspace itself must not become one: fs_write can create HEAD, config, objects/ and refs/
# at its root (nothing there is called .git), which git would take for a bare repository and
# whose `config` (diff.external, textconv, ...) a "read-only" `git diff` would obey. Command-line
# config (GIT_CONFIG_COUNT) is protected configuration, so only an explicit --git-dir could
# open a bare repository, and no medium command can pass one.
READ_ONLY_GIT_ENV = {"GIT_CONFIG_COUNT": "2",
                     "GIT_CONFIG_KEY_0": "core.fsmonitor", "GIT_CONFIG_VALUE_0": "false",
                     "GIT_CONFIG_KEY_1": "safe.bareRepository", "GIT_CONFIG_VALUE_1": "explicit"}
QUIET_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "PAGER": "cat"}


def child_environment(secret_values: list[str], base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a command: ours, minus every secret the bot holds.

    Dropped: the known secret variables, any variable whose name suggests a secret (GITHUB_TOKEN,
    MYSQL_PWD, GH_PAT, SENTRY_DSN: bot/core/secrets/redaction.py, judged once per variable), any URL
    with a password in it (HTTPS_PROXY=http://user:pw@proxy, DATABASE_URL), and any variable
    whose value contains one of the bot's secret values (whatever its name).
    """
    env: dict[str, str] = {}
    for name, value in (os.environ if base is None else base).items():
        upper = name.upper()
        if upper in SECRET_ENV_VARS or any(part in upper for part in SECRET_NAME_PARTS) \
                or hidden_from_tools(name, value):
            continue
        if any(secret in value for secret in secret_values):
            continue
        env[name] = value
    return {**env, **QUIET_ENV}


# The sandbox, the command classifier and the secret masking (tools/_bwrap.py, _shell_risk.py,
# _shell_secrets.py) are imported with the first command the model proposes, not with the tool
# catalog: a bot that never runs a command has no use for their code.
def __getattr__(name: str) -> Any:
    if name == "classify":      # re-exported: the classification of a command
        from tools._shell_risk import classify

        return classify
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def shared_sandbox() -> SandboxFinder:
    """One probe per process: whether bwrap works here does not change while the bot runs."""
    from tools._bwrap import SandboxFinder

    return SandboxFinder()

NETWORK_REASON = "asks for network access: data can leave this machine"
UNAVAILABLE_HINT = ("No shell command runs without the sandbox. The operator can run "
                    "`myclaw doctor --security` to see how to fix it.")


class ShellRun(BaseTool):
    examples: ClassVar[list[dict[str, Any]]] = [{"command": "ls -la"}]

    def __init__(self, workspace: str = "<workspace>", sandbox: SandboxFinder | None = None,
                 secrets: SecretFiles = DEFAULT):
        self.workspace = workspace
        self._sandbox = sandbox
        self.secrets = secrets
        self.meta = ToolMeta(
            name="shell_run",
            description=(
                "Run one shell command (/bin/sh -c) in the workspace directory, inside a sandbox "
                "that sees only the workspace and read-only system programs, with no network "
                "unless `network` is true; returns exit_code, stdout, stderr, truncated and "
                "timed_out. Read-only commands (ls, cat, grep, find, git status/log, ...) "
                "with plain arguments are medium risk; pipes, redirections, substitutions, other "
                "programs, git show/diff, and network access are high risk and need approval. "
                "Secrets are not in its environment, and secret files (.env, keys, "
                "credentials) read as empty unless the user approves a high-risk command."
            ),
            schema={
                "type": "object",
                "properties": {
                    "command": {"type": "string", "minLength": 1, "maxLength": 8000},
                    "timeout_seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": 3600,
                                        "description": "Stop earlier than the configured timeout"},
                    "network": {"type": "boolean",
                                "description": "Give the command network access (high risk; "
                                               "default false: no network at all)"},
                },
                "required": ["command"],
                "additionalProperties": False,
            },
            has_side_effects=True,
            risk="medium",
            returns_untrusted=True,
            idempotent=False,
            supports_dry_run=True,
            capability_required=f"proc:exec:{workspace}",
            egress=False,   # by its arguments: with network it is a way out (egress_for)
        )

    @property
    def sandbox(self) -> SandboxFinder:
        return shared_sandbox() if self._sandbox is None else self._sandbox

    def assess(self, command: str, network: bool = False) -> tuple[Risk, str]:
        """The command's verdict, plus what depends on the call: network access lets data
        leave, and a command reading every file of a tree that holds secret files reads them."""
        from tools._shell_risk import judge
        from tools._shell_secrets import TREE_REASON, reads_secret_tree

        if network:
            return "high", NETWORK_REASON
        verdict = judge(command, self.secrets)
        if verdict.risk == "medium" and reads_secret_tree(self.workspace, verdict, self.secrets):
            return "high", TREE_REASON
        return verdict.risk, verdict.reason

    def environment_report(self) -> tuple[str, list[Finding]]:
        """For `myclaw doctor --security`: does the sandbox work on this machine, and how well.
        Blocking (one probe): for the command line only."""
        from tools._bwrap import OPTIONAL_FLAGS, SandboxUnavailable, probe_sync

        try:
            sandbox = probe_sync(self.sandbox.search_path)
        except SandboxUnavailable as exc:
            return "", [Finding("medium", "tools.shell_run",
                                f"{exc.problem}, so shell_run refuses every command", exc.fix)]
        findings = []
        if not sandbox.caps_processes:
            findings.append(Finding(
                "medium", "tools.shell_run.max_processes",
                "the bot runs as root, where Linux never applies the process limit, and no "
                "pids cgroup can be made: a shell command can start processes until its timeout",
                "run the bot as an ordinary user (deploy/myclaw.service and the Dockerfile do)"))
        missing = [flag for flag in OPTIONAL_FLAGS if flag not in sandbox.optional_flags]
        if missing:
            findings.append(Finding(
                "low", "tools.shell_run",
                f"this bubblewrap does not support {', '.join(missing)}: commands may create "
                "nested user namespaces", "upgrade bubblewrap to 0.8 or later"))
        if not sandbox.proc:
            findings.append(Finding(
                "low", "tools.shell_run",
                "the kernel refuses the sandbox a /proc of its own here (parts of this "
                "machine's /proc are hidden), so commands get an empty /proc: ps and "
                "/dev/fd do not work", "see deploy/README.md, 'The shell sandbox'"))
        return (f"bubblewrap works ({sandbox.bwrap}): commands see only the workspace, "
                "read-only system files and no network"), findings

    def approval_scope(self, args: dict[str, Any]) -> tuple[str, str] | None:
        """An "Always" covers the program(s) this command runs — `git` for `git status`, so
        `git log` is covered but `rm` is not (and `git push`, being riskier, still asks)."""
        from tools._shell_risk import judge, programs_of, visible
        from tools._shell_secrets import grantable

        command = str(args.get("command", ""))
        programs = programs_of(command)
        if not programs or args.get("network") is True:
            return None
        # A read-only shape prints no file content (git log without -p, diff --stat); any other
        # command that could print the repository's history or a secret file is asked each time.
        if judge(command, self.secrets).risk != "medium" and not grantable(command, self.secrets):
            return None
        shown = ", ".join(f"`{visible(p)[:40]}`" for p in programs)
        return "programs:" + " ".join(programs), shown

    def egress_for(self, args: dict[str, Any]) -> bool:
        return args.get("network") is True

    def risk_for(self, args: dict[str, Any]) -> Risk:
        return self.assess(str(args.get("command", "")), args.get("network") is True)[0]

    async def dry_run(self, ctx: CallContext, command: str, timeout_seconds: float | None = None,
                      network: bool = False, **_: Any) -> dict[str, Any]:
        from tools._shell_risk import visible
        from tools._shell_secrets import preview_note

        _check_command(command)
        risk, reason = self.assess(command, network)
        timeout = _timeout(ctx, timeout_seconds)
        where = f"{ctx.workspace}, with network" if network else str(ctx.workspace)
        note = await preview_note(ctx, command, self.secrets) if risk == "high" else ""
        return {
            "summary": Phrase("Run `{command}` in {where} ({risk}: {reason})", command=visible(command),
                              where=where, risk=Phrase(risk), reason=reason)
                       if not note else Phrase("Run `{command}` in {where} ({risk}: {reason})\n{note}",
                                               command=visible(command), where=where,
                                               risk=Phrase(risk), reason=reason, note=note),
            "command": command, "cwd": str(ctx.workspace), "risk": risk, "reason": reason,
            "timeout_seconds": timeout, "network": network,
        }

    async def execute(self, ctx: CallContext, command: str, timeout_seconds: float | None = None,
                      network: bool = False, **_: Any) -> dict[str, Any]:
        from tools._bwrap import Limits, SandboxUnavailable
        from tools._shell_secrets import masks_for, unmasked

        _check_command(command)
        try:
            sandbox = await self.sandbox.get()
        except SandboxUnavailable as exc:
            raise ToolPermissionError(Phrase("shell_run is disabled on this machine: {why}.", why=str(exc)),
                                      UNAVAILABLE_HINT) from exc
        settings = ctx.settings["tools"]["shell_run"]
        env = child_environment(ctx.settings.secret_values())
        risk = self.assess(command, network is True)[0]
        if risk == "medium":
            env.update(READ_ONLY_GIT_ENV)
        ctx.workspace.mkdir(parents=True, exist_ok=True)
        masks = () if unmasked(ctx, risk) else await masks_for(ctx, SecretFiles.from_config(ctx.settings))
        return await sandbox.run(command, ctx.workspace, env, network=network is True,
                                 limits=Limits.from_settings(settings),
                                 timeout=_timeout(ctx, timeout_seconds),
                                 cap=int(settings["max_output_bytes"]), stop=ctx.cancelled,
                                 masks=masks)


def _check_command(command: str) -> None:
    if not command.strip():
        raise ToolInvalidArgsError(Phrase("The command is empty."), "Give the shell command to run.")
    if "\x00" in command:
        raise ToolInvalidArgsError(Phrase("The command contains a NUL byte."), "Remove the NUL character.")


def _timeout(ctx: CallContext, asked: float | None) -> float:
    configured = float(ctx.settings["tools"]["shell_run"]["timeout_seconds"])
    return min(configured, float(asked)) if asked else configured


def build(config: Any = None) -> ShellRun:
    return ShellRun(str(config.workspace) if config is not None else "<workspace>",
                    secrets=SecretFiles.from_config(config))
