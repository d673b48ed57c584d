"""Security regressions for shell_run's risk classification and its "read-only" git runs.

A medium command runs without approval at full autonomy and with one tap at supervised, so a
command classified medium must really be unable to run programs, write, or read secrets.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bot.core.tool import CallContext
from tests.conftest import make_config
from tools import fs_write, shell_run


def shell_ctx(tmp_path: Path) -> CallContext:
    config = make_config(tmp_path, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                                        "HOME": str(tmp_path / "home")})
    return CallContext(workspace=config.workspace, settings=config)


async def test_fs_write_cannot_turn_the_workspace_into_a_bare_repo_that_git_diff_obeys(tmp_path):
    """fs_write (medium) plants HEAD/config/objects/refs at the workspace root; a medium
    `git diff --no-index` there used to read that `config` and run its diff.external."""
    ctx = shell_ctx(tmp_path)
    writer = fs_write.build(ctx.settings)
    planted = {
        "HEAD": "ref: refs/heads/main\n",
        "objects/info/keep": "",
        "refs/heads/keep": "",
        "config": "[diff]\n\texternal = touch pwned\n",
        "a.txt": "a\n",
        "b.txt": "b\n",
    }
    for path, content in planted.items():
        await writer.execute(ctx, path=path, content=content)
    command = "git diff --no-index a.txt b.txt"
    assert shell_run.classify(command)[0] == "medium"  # runs unapproved at full autonomy
    await shell_run.build(ctx.settings).execute(ctx, command=command)
    assert not (ctx.workspace / "pwned").exists()


@pytest.mark.parametrize("command", [
    "cat .env",
    "cat sub/.env",
    "head -n 5 .env.production",
    "grep KEY .ENV",
    "grep -f.env x",
    "rg --file=.env x",
])
def test_naming_a_dotenv_file_is_high_risk(command):
    """fs_read refuses any .env (secrets by convention); a medium `cat .env` read it anyway."""
    assert shell_run.classify(command)[0] == "high"


@pytest.mark.parametrize("command", [
    "grep -hf/etc/passwd x",        # -h -f /etc/passwd
    "grep -rf../outside x",         # -r -f ../outside
    "sort -mT/tmp a",
])
def test_a_path_glued_to_grouped_short_options_is_seen(command):
    assert shell_run.classify(command) == ("high", "reads outside the workspace")


def test_ripgrep_hostname_bin_launches_a_program():
    assert shell_run.classify("rg --hostname-bin=sh --hyperlink-format=default x")[0] == "high"


@pytest.mark.parametrize("command", ["ls -la", "grep -rn TODO notes", "cat notes/a.md",
                                     "git log -n 5", "find . -name '*.md'", "head -n5 a.txt"])
def test_plain_read_only_commands_stay_medium(command):
    assert shell_run.classify(command)[0] == "medium"
