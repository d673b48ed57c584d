"""What shell_run does about secret files (bot/core/secrets/files.py).

- A command that reads whole trees (a recursive search, ripgrep, diff of folders) is rated as
  reading every file in them: high when the workspace holds a secret file.
- A call that is not approved by a person at high risk runs with every secret file of the
  workspace, and every hard link to one, masked by an empty read-only file (tools/_bwrap.py).
  A workspace too large to be sure of runs no such call at all.
- The preview of a high-risk call names the secret files the command will be able to read
  once approved, and says when it can read the repository's history.
- An "Always" never covers a command that names a secret file or reads repository history:
  the mask cannot hide what git keeps in its objects, so each of those is asked on its own.
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

from bot.core.secrets.files import SecretFiles, inventory
from bot.core.tool import CallContext, Risk, ToolPermissionError
from bot.language.catalogs import N_
from bot.language.phrase import Phrase
from tools._shell_risk import Verdict, _words
from tools._shell_shapes import GIT_GRANTABLE_SHAPES, parse

MAX_MASKS = 4096          # secret files one command can have masked
SHOWN_IN_PREVIEW = 12     # secret files named in a preview before "and N more"
TREE_REASON = "reads every file of a folder tree, and the workspace holds secret files"
TOO_LARGE = N_("The workspace is too large to check for secret files, so only a command approved "
               "at high risk runs here.")
TOO_LARGE_HINT = ("Ask the user to approve this command, or to move large folders (dependencies, "
                  "data) out of the workspace.")
UNMASKED_NOTE = "If approved, it can read these secret files: {names}"
MORE = " and {count} more"
HISTORY_NOTE = "If approved, it can read the repository's history, secret files committed there included."
# git subcommands that print no file content: an "Always" for git may cover them, each with
# the options of its shape (tools/_shell_shapes.py GIT_GRANTABLE_SHAPES).
GIT_GRANTABLE = frozenset(GIT_GRANTABLE_SHAPES)
MAX_CODE_DEPTH = 4        # `sh -c "sh -c '...'"`: deeper than this is not looked into


def reads_secret_tree(workspace: str, verdict: Verdict, secrets: SecretFiles) -> bool:
    """Does this medium command read every file of a tree that holds a secret file?"""
    tree = verdict.tree or any(os.path.isdir(os.path.join(workspace, f)) for f in verdict.folders)
    return tree and inventory(workspace, secrets).any


def unmasked(ctx: CallContext, risk: Risk) -> bool:
    """Only a call a person approved at high risk sees the secret files as they are."""
    return ctx.approved_by is not None and risk == "high"


async def masks_for(ctx: CallContext, secrets: SecretFiles) -> tuple[str, ...]:
    """The real paths to mask for this call (refused when they cannot all be known)."""
    found = await asyncio.to_thread(inventory, ctx.workspace, secrets)
    if not found.complete or len(found.masked) > MAX_MASKS:
        raise ToolPermissionError(Phrase(TOO_LARGE), TOO_LARGE_HINT)
    return found.masked


async def preview_note(ctx: CallContext, command: str, secrets: SecretFiles) -> str:
    """For a high-risk preview: what the approval will let the command read."""
    return await asyncio.to_thread(_preview_note, str(ctx.workspace), command, secrets)


def _preview_note(workspace: str, command: str, secrets: SecretFiles) -> str:
    found = inventory(workspace, secrets)
    root = os.path.realpath(workspace)
    names = [Path(os.path.relpath(p, root)).as_posix() for p in found.masked]
    lines = []
    if names:
        shown = ", ".join(names[:SHOWN_IN_PREVIEW])
        if len(names) > SHOWN_IN_PREVIEW:
            shown += MORE.format(count=len(names) - SHOWN_IN_PREVIEW)
        lines.append(UNMASKED_NOTE.format(names=shown))
    if _has_repository(root) and _GIT_CALL.search(command + " "):
        lines.append(HISTORY_NOTE)
    return "\n".join(lines)


def _has_repository(root: str) -> bool:
    return os.path.exists(os.path.join(root, ".git"))


def grantable(command: str, secrets: SecretFiles) -> bool:
    """May an "Always" for this command's programs cover it? Not when it names a secret file
    or runs git in a way that can print what the repository holds: a subcommand or an option
    outside GIT_GRANTABLE_SHAPES (`status -v`, `commit --dry-run -v`, `add -p`, `stash show
    -p`, `--exec`), looked for anywhere in the text (`sh -c "git show ..."` runs git too) and
    in every quoted piece of code it carries, nor when that code hides what it runs."""
    if secrets.named_in(_words(command) or [command]):
        return False
    if not all(sub in GIT_GRANTABLE for sub in _GIT_CALL.findall(command + " ")):
        return False
    calls = _git_calls(command, 0)
    return calls is not None and all(_grantable_git(args) for args in calls)


def _grantable_git(args: list[str]) -> bool:
    if not args or args[0] not in GIT_GRANTABLE_SHAPES:
        return False
    return not parse(f"git {args[0]}", GIT_GRANTABLE_SHAPES[args[0]], args[1:]).problem


def _git_calls(text: str, depth: int) -> list[list[str]] | None:
    """The arguments of every git call in a command line, and in every word of it that is
    itself code (has spaces or shell operators: `sh -c '...'`); None when that cannot be known
    (unparsable, nested too deep, or code that computes what it runs: `$g status -v`)."""
    words = _words(text)
    if words is None or depth > MAX_CODE_DEPTH:
        return None
    calls: list[list[str]] = []
    segment: list[str] = []
    for word in [*words, ";"]:
        if word and set(word) <= _OPERATOR:
            calls += [segment[i + 1:] for i, w in enumerate(segment) if _is_git(w)]
            segment = []
            continue
        segment.append(word)
        if depth and _HIDDEN.search(word):
            return None
        if _CODE.search(word):
            inner = _git_calls(word, depth + 1)
            if inner is None:
                return None
            calls += inner
    return calls


def _is_git(word: str) -> bool:
    return word.rsplit("/", 1)[-1] == "git"


_OPERATOR = set("();<>|&\n")
_CODE = re.compile(r"[\s;&|()<>]")
_HIDDEN = re.compile(r"[$`\\]")   # in quoted code: a variable, substitution or escape
_GIT_CALL = re.compile(r"(?<![\w.-])git(?:\s+(\S*)|$)")
