"""How risky one shell command line is: the classification behind shell_run's `risk_for`.

Medium only for a plain, known read-only program in a shape known to be safe
(tools/_shell_shapes.py) with plain arguments that stay inside the workspace and name no
secret file; anything else — shell operators, substitutions, redirections, wrappers, unknown
programs, any option not listed for the program, paths outside the workspace, secret files,
git beyond status/log/diff summaries (history holds every file ever committed) — is high.
A medium command that reads whole trees says so (`Verdict.tree`): the caller rates it as
reading every secret file in them. When in doubt: high.
"""

from __future__ import annotations

import shlex
import unicodedata
from dataclasses import dataclass

from bot.core.secrets.files import DEFAULT, SecretFiles
from bot.core.tool import Risk
from tools._shell_shapes import GIT_SHAPES, GIT_SUMMARY, SHAPES, parse


def visible(text: str) -> str:
    """Show control, format and separator characters escaped, so an approval shows all of it."""
    return "".join(
        ch.encode("unicode_escape").decode("ascii") if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp")
        else ch for ch in text)


# --- risk -----------------------------------------------------------------------------------

# find prints names, never contents: its expression may use these predicates (and how many
# words each takes), nothing that runs, writes or reads a file (-exec, -fprint, -delete, ...).
FIND_PREDICATES = {
    "-name": 1, "-iname": 1, "-path": 1, "-ipath": 1, "-wholename": 1, "-type": 1,
    "-maxdepth": 1, "-mindepth": 1, "-size": 1, "-mtime": 1, "-mmin": 1, "-newer": 1,
    "-perm": 1, "-user": 1, "-group": 1, "-empty": 0, "-print": 0, "-print0": 0, "-not": 0,
    "!": 0, "-a": 0, "-o": 0, "-and": 0, "-or": 0, "-ls": 0, "-depth": 0, "-prune": 0,
    "-xdev": 0, "-readable": 0, "-true": 0, "-false": 0}
FIND_OPTIONS = frozenset({"-L", "-P", "-H"})
READ_ONLY_PROGRAMS = frozenset({*SHAPES, "find", "git"})
HISTORY_REASON = ("reads the repository's history or objects, where a committed secret file "
                  "stays readable")
UNQUOTED_SPECIAL = {    "|": "a pipe", "&": "a background or && operator", ";": "a command separator",
    "<": "a redirection", ">": "a redirection", "(": "a subshell", ")": "a subshell",
    "$": "a substitution or variable expansion", "`": "a command substitution",
    "*": "a glob", "?": "a glob", "[": "a glob", "{": "a brace expansion", "~": "a home expansion",
    "#": "a comment", "\\": "an escape", "\n": "several lines", "!": "a history expansion",
}
DOUBLE_QUOTED_SPECIAL = {"$": "a substitution or variable expansion", "`": "a command substitution",
                         "\\": "an escape"}
_PUNCTUATION = set("();<>|&")


def _special_character(command: str) -> str | None:
    """The first shell feature beyond plain words, honouring quotes; None when there is none."""
    quote, previous = "", " "
    for ch in command:
        tilde_inside_word = ch == "~" and previous not in " \t=:"
        previous = ch
        if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") and ch not in "\n\t":
            return "an invisible control character"
        if quote == "'":
            quote = "" if ch == "'" else quote
        elif quote == '"':
            if ch in DOUBLE_QUOTED_SPECIAL:
                return DOUBLE_QUOTED_SPECIAL[ch]
            quote = "" if ch == '"' else quote
        elif ch in "'\"":
            quote = ch
        elif ch in UNQUOTED_SPECIAL and not tilde_inside_word:  # HEAD~1 is not a home path
            return UNQUOTED_SPECIAL[ch]
    return "an unterminated quote" if quote else None


def _words(command: str) -> list[str] | None:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:
        return None


@dataclass(frozen=True)
class Verdict:
    """The risk of one command line and what a medium one reads: `tree` when it reads every
    file below a folder, `folders` the operands that would make it do so if they are folders."""

    risk: Risk
    reason: str
    tree: bool = False
    folders: tuple[str, ...] = ()


def _values(word: str) -> list[str]:
    """The path-like values one word may carry: itself, or an option's value (--opt=x, -fx).

    Short options can be grouped with the last one's value glued on (`grep -hf/etc/passwd` is
    -h -f /etc/passwd), so every tail of a short-option word counts as a possible value.
    """
    if word.startswith("--"):
        return [word.split("=", 1)[1]] if "=" in word else []
    if word.startswith("-"):
        return [word[i:] for i in range(2, len(word))]
    return [word]


def _leaves_workspace(word: str) -> bool:
    """An absolute, home-relative or `..` path, also as an option value (--opt=/x, -f/x)."""
    return any(v.startswith(("/", "~")) or ".." in v.split("/") for v in _values(word))


def classify(command: str, secrets: SecretFiles = DEFAULT) -> tuple[Risk, str]:
    """(risk, why) of one command line. Medium only for a known read-only shape."""
    verdict = judge(command, secrets)
    return verdict.risk, verdict.reason


def judge(command: str, secrets: SecretFiles = DEFAULT) -> Verdict:
    """The verdict on one command line: medium only for a plain program in a known shape."""
    feature = _special_character(command)
    if feature:
        return Verdict("high", f"uses {feature}")
    words = _words(command)
    if not words:
        return Verdict("high", "cannot be parsed as plain words")
    if any(set(word) <= _PUNCTUATION for word in words):
        return Verdict("high", "uses shell operators")
    program, args = words[0], words[1:]
    if "=" in program:
        return Verdict("high", "sets environment variables")
    if program not in READ_ONLY_PROGRAMS:
        return Verdict("high", f"`{visible(program)[:60]}` is not a known read-only command")
    if any(_leaves_workspace(arg) for arg in args):
        return Verdict("high", "reads outside the workspace")
    if secrets.named_in(args):
        return Verdict("high", "names a secret file")
    if program == "find":
        return _judge_find(args)
    if program == "git":
        return _judge_git(args)
    parsed = parse(program, SHAPES[program], args)
    if parsed.problem:
        return Verdict("high", visible(parsed.problem))
    folders = tuple(parsed.operands) if SHAPES[program].dir_operands_tree else ()
    return Verdict("medium", "read-only command", parsed.tree, folders)


def _judge_find(args: list[str]) -> Verdict:
    i = 0
    while i < len(args) and args[i] in FIND_OPTIONS:
        i += 1
    while i < len(args) and not args[i].startswith("-") and args[i] != "!":
        i += 1   # the starting points
    while i < len(args):
        takes = FIND_PREDICATES.get(args[i])
        if takes is None:
            return Verdict("high", f"`find` with `{visible(args[i])[:60]}` is not a shape "
                                   "known to be read-only")
        i += 1 + takes
    return Verdict("medium", "read-only command")


def _judge_git(args: list[str]) -> Verdict:
    if not args or args[0] not in GIT_SHAPES:
        return Verdict("high", "only git status, log and diff summaries are read-only; this "
                       + HISTORY_REASON)
    parsed = parse(f"git {args[0]}", GIT_SHAPES[args[0]], args[1:])
    if parsed.problem:
        return Verdict("high", f"{visible(parsed.problem)}; it may read the repository's "
                               "history or objects")
    if args[0] == "diff" and not GIT_SUMMARY & {o.split("=", 1)[0] for o in parsed.options}:
        if "--no-index" not in parsed.options or len(parsed.operands) != 2:
            return Verdict("high", "git diff prints file contents from the repository; only "
                                   "--stat, --name-only and the like are read-only")
        return Verdict("medium", "read-only command", folders=tuple(parsed.operands))
    return Verdict("medium", "read-only command")


def programs_of(command: str) -> list[str] | None:
    """The programs a command line runs (the first word of each `;`/`&&`/`|` segment), or None
    when it uses shell features that could run something else (substitutions, variables)."""
    if _special_character(command):
        return None
    words = _words(command)
    if not words:
        return None
    programs, starting = [], True
    for word in words:
        if set(word) <= _PUNCTUATION:
            starting = True
        elif starting:
            if "=" in word:
                return None   # VAR=x cmd: the environment changes what runs
            programs.append(word)
            starting = False
    return sorted(set(programs)) or None
