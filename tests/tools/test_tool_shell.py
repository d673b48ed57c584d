"""shell_run: runs in the workspace, caps output, kills the whole process tree on timeout and
cancellation, hides the bot's secrets, and classifies risk conservatively."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from bot.core.tool import CallContext, ToolInvalidArgsError, risk_of
from tests.conftest import make_config
from tests.support.process_tree import all_gone, descendants
from tools import shell_run

SECRETS = {
    "ANTHROPIC_API_KEY": "sk-ant-test-0123456789",
    "TELEGRAM_BOT_TOKEN": "123456:telegram-test-token",
    "DISCORD_BOT_TOKEN": "discord-test-token-abcdef",
}


def shell_ctx(tmp_path: Path, **settings) -> CallContext:
    config = make_config(tmp_path, {"tools": {"shell_run": settings}},
                         env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **SECRETS})
    return CallContext(workspace=config.workspace, settings=config)


# A shell that ignores SIGTERM, with a grandchild that ignores it too (SIG_IGN is inherited);
# it says when it is ready through a FIFO in the workspace.
STUBBORN_TREE = "trap '' TERM; sleep 300 & echo go > ready; wait"


async def test_a_command_runs_in_the_workspace(tmp_path):
    ctx = shell_ctx(tmp_path)
    (ctx.workspace / "notes.txt").write_text("hello\n")
    result = await shell_run.build(ctx.settings).execute(ctx, command="pwd && cat notes.txt")
    assert result == {"exit_code": 0, "stdout": f"{ctx.workspace}\nhello\n", "stderr": "",
                      "truncated": False, "timed_out": False}


async def test_a_failing_command_reports_its_exit_code_and_stderr(tmp_path):
    ctx = shell_ctx(tmp_path)
    result = await shell_run.build().execute(ctx, command="echo oops >&2; exit 3")
    assert (result["exit_code"], result["stderr"], result["timed_out"]) == (3, "oops\n", False)


async def test_output_is_capped_and_flagged(tmp_path):
    ctx = shell_ctx(tmp_path, max_output_bytes=1000)
    result = await shell_run.build().execute(ctx, command="head -c 5000000 /dev/zero | tr '\\0' a")
    assert result["stdout"] == "a" * 1000
    assert result["truncated"] is True
    assert result["exit_code"] == 0  # the writer was drained, never blocked on a full pipe


async def test_undecodable_output_is_replaced_not_fatal(tmp_path):
    result = await shell_run.build().execute(shell_ctx(tmp_path), command="printf 'ok \\377\\n'")
    assert result["stdout"] == "ok \ufffd\n"


async def test_a_timeout_kills_a_child_that_ignores_sigterm_and_its_grandchildren(tmp_path):
    _, task, tree = await _start_stubborn_tree(tmp_path, timeout_seconds=2)
    started = time.monotonic()
    result = await asyncio.wait_for(task, 10)
    assert time.monotonic() - started < 5
    assert result["timed_out"] is True
    assert result["exit_code"] < 0  # killed by a signal, not exited on its own
    assert len(tree) >= 3 and await all_gone(tree)


async def test_the_configured_timeout_is_a_ceiling(tmp_path):
    ctx = shell_ctx(tmp_path, timeout_seconds=0.3)
    result = await shell_run.build().execute(ctx, command="sleep 30", timeout_seconds=100)
    assert result["timed_out"] is True


async def test_background_processes_do_not_outlive_the_command(tmp_path):
    ctx = shell_ctx(tmp_path, timeout_seconds=30)
    before = set(descendants())
    started = time.monotonic()
    result = await shell_run.build().execute(ctx, command="sleep 300 & echo started")
    assert time.monotonic() - started < 5  # the open pipe of the background sleep did not hang us
    assert (result["stdout"], result["timed_out"]) == ("started\n", False)
    assert await all_gone(sorted(set(descendants()) - before))


async def _start_stubborn_tree(tmp_path: Path, timeout_seconds: float = 60,
                               ) -> tuple[CallContext, asyncio.Task, list[int]]:
    """Start the tree, wait until it signals readiness through a FIFO (no sleeping), and return
    the host pids of everything it started (sandbox, shell, grandchild)."""
    ctx = shell_ctx(tmp_path, timeout_seconds=timeout_seconds)
    os.mkfifo(ctx.workspace / "ready")
    before = set(descendants())
    task = asyncio.create_task(shell_run.build().execute(ctx, command=STUBBORN_TREE))
    await asyncio.wait_for(asyncio.to_thread((ctx.workspace / "ready").read_text), 10)
    return ctx, task, sorted(set(descendants()) - before)


async def test_cancelling_the_call_kills_the_whole_tree_quickly(tmp_path):
    _, task, tree = await _start_stubborn_tree(tmp_path)
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert time.monotonic() - started < 3
    assert len(tree) >= 3 and await all_gone(tree)


async def test_stop_kills_the_tree_and_raises_cancelled(tmp_path):
    ctx, task, tree = await _start_stubborn_tree(tmp_path)
    ctx.cancelled.set()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert len(tree) >= 3 and await all_gone(tree)


async def test_the_command_cannot_see_the_bots_secrets(tmp_path, monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HARMLESS_LOOKING", SECRETS["TELEGRAM_BOT_TOKEN"])  # a secret by value
    monkeypatch.setenv("WIDGET_PASSWORD", "hunter2")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_other")
    monkeypatch.setenv("PLAIN_SETTING", "visible")
    result = await shell_run.build().execute(shell_ctx(tmp_path), command="env")
    variables = dict(line.split("=", 1) for line in result["stdout"].splitlines() if "=" in line)
    assert variables["PLAIN_SETTING"] == "visible"
    for hidden in ("ANTHROPIC_API_KEY", "TELEGRAM_BOT_TOKEN", "DISCORD_BOT_TOKEN", "HARMLESS_LOOKING",
                   "WIDGET_PASSWORD", "GITHUB_TOKEN"):
        assert hidden not in variables
    for value in SECRETS.values():
        assert value not in result["stdout"]


async def test_the_command_gets_no_variable_whose_name_or_url_holds_a_secret(tmp_path, monkeypatch):
    hidden = {"DATABASE_URL": "postgres://app:Hunter2Secret@db/x",
              "SENTRY_DSN": "https://abc123def456@o1.ingest.sentry.io/1",
              "MYSQL_PWD": "Tr0ub4dor&3", "GH_PAT": "github_pat_11ABCDEFG0123",
              "HTTPS_PROXY": "http://bob:Pr0xyPassw0rd@proxy.internal:3128",
              "REDIS_URL": "redis://:R3disPassw0rd@cache:6379/0", "DB_PW": "abc"}
    kept = {"GIT_AUTHOR_NAME": "Ada Lovelace", "DESKTOP_SESSION": "ubuntu",
            "PLAIN_URL": "https://example.com/x"}
    for name, value in {**hidden, **kept}.items():
        monkeypatch.setenv(name, value)
    result = await shell_run.build().execute(shell_ctx(tmp_path), command="env")
    variables = dict(line.split("=", 1) for line in result["stdout"].splitlines() if "=" in line)
    assert not set(hidden) & set(variables)
    assert all(variables.get(name) == value for name, value in kept.items())
    assert not any(secret in result["stdout"] for secret in (
        "Hunter2Secret", "abc123def456", "Tr0ub4dor", "github_pat", "Pr0xyPassw0rd", "R3dis"))


async def git(*args: str) -> None:
    process = await asyncio.create_subprocess_exec("git", *args)
    assert await process.wait() == 0


async def test_a_read_only_git_command_cannot_be_turned_into_code_execution(tmp_path):
    ctx = shell_ctx(tmp_path)
    workspace = ctx.workspace
    await git("init", "-q", str(workspace))
    await git("-C", str(workspace), "config", "core.fsmonitor", "touch pwned; false")
    result = await shell_run.build().execute(ctx, command="git status --short")
    assert result["exit_code"] == 0
    assert not (workspace / "pwned").exists()


async def test_dry_run_runs_nothing_and_explains_the_risk(tmp_path):
    ctx = shell_ctx(tmp_path)
    preview = await shell_run.build().dry_run(ctx, command="touch made.txt")
    assert not (ctx.workspace / "made.txt").exists()
    assert preview["summary"] == (
        f"Run `touch made.txt` in {ctx.workspace} (high: `touch` is not a known read-only command)")
    assert preview["network"] is False
    assert (preview["risk"], preview["cwd"]) == ("high", str(ctx.workspace))
    quiet = await shell_run.build().dry_run(ctx, command="ls -la")
    assert quiet["summary"] == f"Run `ls -la` in {ctx.workspace} (medium: read-only command)"


async def test_the_approval_text_shows_hidden_characters(tmp_path):
    preview = await shell_run.build().dry_run(shell_ctx(tmp_path), command="ls\u202e ; rm -rf x\ny")
    assert "\\u202e" in preview["summary"] and "\\n" in preview["summary"]
    assert preview["risk"] == "high"


@pytest.mark.parametrize("command", ["", "   ", "ls\x00 -la"])
async def test_empty_or_nul_commands_are_invalid(tmp_path, command):
    with pytest.raises(ToolInvalidArgsError):
        await shell_run.build().execute(shell_ctx(tmp_path), command=command)


MEDIUM = [
    "ls", "ls -la", "ls -la .", "cat notes.txt", "cat 'my notes.txt'", "head -n 5 a.txt", "tail -20 log.txt",
    "wc -l a.txt", "grep -rn TODO .", "grep -rn 'a|b' src", "rg -n TODO", "find . -name '*.py'",
    "pwd", "echo hello world", "echo '$HOME'", "date", "whoami", "uname -a", "df -h", "du -sh .",
    "stat a.txt", "file a.bin", "sort names.txt", "uniq names.txt", "diff a.txt b.txt", "git status",
    "git log --oneline -5", "git diff --stat HEAD~1", "ls x~",
]
HIGH = [
    "git diff HEAD~1", "git show HEAD",
    "rm -rf x", "touch a", "ls | wc -l", "ls; rm x", "ls && rm x", "ls || rm x", "ls & rm x",
    "cat a > b", "cat a >> b", "cat < a", "echo $(id)", "echo `id`", "echo $HOME", 'echo "$HOME"',
    "echo ${HOME}", "ls *.txt", "ls a?", "ls [ab]", "cat ~/x", "FOO=1 ls", "env ls", "nice ls",
    "timeout 5 ls", "xargs rm", "sudo ls", "sh -c ls", "bash -c 'ls'", "python -c 1", "python3 x.py",
    "find . -exec rm {} +", "find . -delete", "find . -fprint out", "sort -o out in", "sort -uo out in",
    "sort --out=x in", "sort --compress-program=sh in", "uniq in out", "date -s 2020-01-01",
    "rg --pre=sh x", "file -C", "git push", "git -c core.pager=sh status", "git commit -m x",
    "git diff --output=x", "git diff --ext-diff", "cat /etc/passwd", "cat ../secret", "cat a/../../b",
    "cat /proc/1/environ", "grep -f/etc/shadow x", "grep --file=/etc/shadow x", "./ls", "/bin/ls",
    "ls\u202e", "ls # x", "cat a\nrm b", "echo 'unterminated", "(ls)", "ls\\ -la", "",
]


@pytest.mark.parametrize("command", MEDIUM)
def test_plain_read_only_commands_are_medium(command):
    assert shell_run.classify(command) == ("medium", "read-only command")
    assert risk_of(shell_run.build(), {"command": command}) == "medium"


@pytest.mark.parametrize("command", HIGH)
def test_everything_else_is_high(command):
    assert risk_of(shell_run.build(), {"command": command}) == "high"
