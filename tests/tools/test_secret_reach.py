"""No shell command reads a secret file without a person's approval naming it.

One workspace holds a `.env` (also committed to git, so the history has it), a private key, a
hard link and a symlink to the `.env`, and an empty folder. Every way in the table either asks
(high risk: refused to a supervised sender, asked of a full one) or, run as a call no person
approved, prints nothing of the secret: inside bubblewrap the secret files and their other names
are empty read-only files. What the mask cannot hide — git's object store — is asked for each
time: no "Always" covers a command that reads repository history.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from bot.approvals.grants import scope_of
from bot.core.tool import CallContext, ToolPermissionError
from tests.conftest import make_config
from tools import shell_run

VALUE = "sk-live-Q7x9Zr2Lm4Pw8Kd1"
KEY_LINE = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7"

# (command, reads history): each asks; a history reader is also never covered by an "Always".
WAYS = [
    ("cat .env", False),
    ("cat ./.env", False),
    ("cat .ENV", False),
    ("head -c 100 .env", False),
    ("grep -r API_KEY .", False),
    ("grep -R API .", False),
    ("grep -rn API", False),
    ("grep -d recurse API .", False),
    ("grep --recur API .", False),
    ("grep --dir=recurse API .", False),
    ("grep --directories=recurse API .", False),
    ("grep --dereference-recursive API .", False),
    ("rg API_KEY", False),
    ("rg --hidden API", False),
    ("diff -rN empty .", False),
    ("diff -N empty .", False),
    ("diff --new-file empty .", False),
    ("diff empty .", False),
    ("git show HEAD:.env", True),
    ("git show :.env", True),
    ("git show HEAD", True),
    ("git --no-pager show HEAD:.env", True),
    ("git -C . show HEAD:.env", True),
    ("git log -p", True),
    ("git log --patch", True),
    ("git log -u", True),
    ("git log -L1,1:.env", True),
    ("git log --format=%H -p", True),
    ("git diff HEAD", True),
    ("git diff --cached", True),
    ("git grep API_KEY", True),
    ("git cat-file -p HEAD:.env", True),
    ("git archive HEAD", True),
    ("git blame .env", True),
    ("git bundle create - HEAD", True),
    ("git format-patch --stdout --root", True),
    ("sh -c 'git show HEAD:.env'", True),
    # git spellings that print a diff or a blob from the index or history ...
    ("git status -v", True),
    ("git status -vv", True),
    ("git status --verbose", True),
    ("git status --verbose --verbose", True),
    ("git status -v -v", True),
    ("git status -sv", True),
    ("git status --verb", True),
    ("git commit --dry-run -v", True),
    ("git commit --dry-run --verbose", True),
    ("git commit -av --dry-run", True),
    ("git commit -v -m done", True),
    ("git commit --dry-run", True),
    ("git add -p", True),
    ("git add --patch", True),
    ("git add -i", True),
    ("git add -e", True),
    ("git checkout -p", True),
    ("git reset --patch", True),
    ("git restore -p .", True),
    ("git stash show -p", True),
    ("git stash show", True),
    ("git show --stat", True),
    ("git log --patch --stat", True),
    ("git whatchanged -p", True),
    ("git diff --staged", True),
    ("git diff --cached HEAD", True),
    ("git cherry -v", True),
    ("git range-diff HEAD~1 HEAD HEAD", True),
    ("git annotate .env", True),
    ("git blame notes/a.md", True),
    ("git grep -e API", True),
    ("git cat-file --batch-all-objects --batch", True),
    ("git archive --format=tar HEAD", True),
    ("git bundle create x HEAD", True),
    ("git format-patch -1 --stdout", True),
    ("git add --pathspec-from-file=notes/soft.txt", True),
    # ... or run a program that could (an "Always" for git must not cover them).
    ("git rebase --exec 'git show HEAD:.env' HEAD", True),
    ("git rebase -x true HEAD", True),
    ("git fetch --upload-pack=true .", True),
    ("git -c core.pager=cat status -v", True),
    ("env git status -v", True),
    ("sh -c 'git status -v'", True),
    ("sh -c \"g''it status -v\"", True),
    ("sh -c 'g=git; $g status -vv'", True),
    ("tar cf - .", False),
    ("tar -cO .env", False),
    ("zip -r - .", False),
    ("rsync -a . copy", False),
    ("cp -r . copy && cat copy/.env", False),
    ("cp .env copy.txt && cat copy.txt", False),
    ("cp .env c && base64 c", False),
    ("base64 .env", False),
    ("xxd notes/hard.txt", False),
    ("od -c notes/soft.txt", False),
    ("find . -exec cat {} +", False),
    ("find . -name '.env' -exec cat {} ';'", False),
    ("python3 -c \"print(open('.env').read())\"", False),
    ("awk 1 keys/server.pem", False),
    ("sed -n p .env", False),
    ("ln .env x && cat x", False),
    ("mv .env x && cat x", False),
    ("cat keys/server.pem", False),
    ("sort -k1 .env", False),
]
# Medium (they run unasked at full autonomy): each runs with the secrets masked.
MASKED = [
    "cat notes/soft.txt",
    "cat notes/hard.txt",
    "tail -n 5 notes/hard.txt",
    "grep -e API notes/soft.txt",
    "wc -c notes/hard.txt",
    "git log --stat",
    "git status --short",
]


def git(workspace: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(workspace), "-c", "user.email=a@b", "-c", "user.name=a",
                    *args], check=True, capture_output=True)


@pytest.fixture
def ctx(tmp_path: Path) -> CallContext:
    config = make_config(tmp_path, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    ws = config.workspace
    (ws / ".env").write_text(f"API_KEY={VALUE}\nDEBUG=true\n")
    git(ws, "init", "-q")
    git(ws, "add", ".env")
    git(ws, "commit", "-qm", "settings")
    (ws / "keys").mkdir()
    (ws / "keys" / "server.pem").write_text(
        f"-----BEGIN PRIVATE KEY-----\n{KEY_LINE}\n-----END PRIVATE KEY-----\n")
    (ws / "notes").mkdir()
    (ws / "notes" / "a.md").write_text("hello\n")
    os.link(ws / ".env", ws / "notes" / "hard.txt")
    (ws / "notes" / "soft.txt").symlink_to("../.env")
    (ws / "empty").mkdir()
    return CallContext(workspace=ws, settings=config)


def leaked(result: dict) -> bool:
    out = result["stdout"] + result["stderr"]
    return VALUE in out or KEY_LINE in out


@pytest.mark.parametrize(("command", "history"), WAYS)
async def test_each_way_to_read_a_secret_asks_and_without_a_person_prints_nothing_of_it(
        ctx, command, history):
    tool = shell_run.build(ctx.settings)
    args = {"command": command}
    assert tool.risk_for(args) == "high"
    if history:
        # git's objects hold the committed .env: no mask hides them, so no "Always" covers it.
        assert scope_of(tool, args).key.startswith("exact:")
        return
    # As an "Always" grant or the profile's auto_approve would run it: no person approved it.
    result = await tool.execute(ctx, command=command, timeout_seconds=20)
    assert not leaked(result), result


@pytest.mark.parametrize("command", MASKED)
async def test_a_medium_command_sees_secret_files_as_empty_whatever_their_name(ctx, command):
    tool = shell_run.build(ctx.settings)
    assert tool.risk_for({"command": command}) == "medium"
    result = await tool.execute(ctx, command=command)
    assert not leaked(result), result


async def test_the_masks_leave_the_secret_files_themselves_unchanged(ctx):
    tool = shell_run.build(ctx.settings)
    await tool.execute(ctx, command="echo x > .env; mv .env y; ln .env z; rm -f .env")
    assert VALUE in (ctx.workspace / ".env").read_text()
    assert not (ctx.workspace / "y").exists() and not (ctx.workspace / "z").exists()


async def test_a_command_a_person_approved_at_high_risk_reads_the_secret_it_was_shown(ctx):
    tool = shell_run.build(ctx.settings)
    preview = await tool.dry_run(ctx, command="cat .env")
    assert ".env" in preview["summary"] and "keys/server.pem" in preview["summary"]
    approved = CallContext(workspace=ctx.workspace, settings=ctx.settings, approved_by="cli:local")
    result = await tool.execute(approved, command="cat .env")
    assert VALUE in result["stdout"]   # the dispatcher redacts it before the model sees it


async def test_a_history_reader_says_in_its_preview_that_it_reads_history(ctx):
    preview = await shell_run.build(ctx.settings).dry_run(ctx, command="git show HEAD:.env")
    assert "history" in preview["summary"]


async def test_a_medium_call_a_person_approved_still_runs_masked(ctx):
    approved = CallContext(workspace=ctx.workspace, settings=ctx.settings, approved_by="cli:local")
    result = await shell_run.build(ctx.settings).execute(approved, command="cat notes/soft.txt")
    assert not leaked(result)


async def test_a_secret_file_created_by_a_copy_under_another_glob_is_masked_too(ctx):
    """A copy made earlier (say by an approved command) under a secret name is a secret file."""
    (ctx.workspace / "notes" / "credentials.json").write_text(f'{{"token": "{VALUE}"}}')
    result = await shell_run.build(ctx.settings).execute(
        ctx, command="cat notes/soft.txt notes/a.md")
    assert "hello" in result["stdout"] and not leaked(result)
    grep = await shell_run.build(ctx.settings).execute(ctx, command="grep -r token notes")
    assert not leaked(grep)


def test_an_always_for_git_covers_commits_but_never_history_or_secret_names(ctx):
    tool = shell_run.build(ctx.settings)
    assert scope_of(tool, {"command": "git commit -m done"}).key == "programs:git"
    assert scope_of(tool, {"command": "git log --oneline"}).key == "programs:git"
    assert scope_of(tool, {"command": "git add -A"}).key == "programs:git"
    assert scope_of(tool, {"command": "git push origin main"}).key == "programs:git"
    for command in ("git show HEAD", "git log -p", "cat .env", "git add .env", "sh -c 'git grep x'",
                    "git status -v", "git commit -v -m done", "git add -p"):
        assert scope_of(tool, {"command": command}).key.startswith("exact:"), command


async def test_a_workspace_too_large_to_check_runs_no_unapproved_command(ctx, monkeypatch):
    from bot.core.secrets import files as secret_files
    monkeypatch.setattr(secret_files, "SCAN_LIMIT", 3)
    (ctx.workspace / "more").mkdir()
    for index in range(5):
        (ctx.workspace / "more" / f"{index}.txt").write_text("x")
    with pytest.raises(ToolPermissionError, match="too large to check for secret files"):
        await shell_run.build(ctx.settings).execute(ctx, command="cat notes/a.md")
