"""How risky one shell command line is: the classification behind shell_run's `risk_for`.

Medium only for a plain, known read-only command with plain arguments that stay inside the
workspace; anything else — shell operators, substitutions, redirections, wrappers, unknown
programs, options that write or run programs, paths outside the workspace, .env files, a
recursive search through a tree that holds .env files — is high. When in doubt: high.
"""

from __future__ import annotations

import os
import shlex
import time
import unicodedata

from bot.core.tool import Risk
from tools._sandbox import is_env_name


def visible(text: str) -> str:
    """Show control, format and separator characters escaped, so an approval shows all of it."""
    return "".join(
        ch.encode("unicode_escape").decode("ascii") if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp")
        else ch for ch in text)


# --- risk -----------------------------------------------------------------------------------

READ_ONLY_PROGRAMS = frozenset({"ls", "cat", "head", "tail", "wc", "grep", "rg", "find", "pwd", "echo",
                                "date", "whoami", "uname", "df", "du", "stat", "file", "sort", "uniq",
                                "diff", "git"})
GIT_READ_ONLY = frozenset({"status", "log", "diff", "show"})
# Options that turn a reader into a writer or a launcher: (exact or --long[=..] forms, short letters).
WRITING_OPTIONS: dict[str, tuple[tuple[str, ...], str]] = {
    "find": (("-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf",
              "-fls"), ""),
    "rg": (("--pre", "--pre-glob", "--hostname-bin"), ""),
    "sort": (("--output", "--compress-program"), "o"),
    "date": (("--set",), "s"),
    "file": (("--compile",), "C"),
    "git": (("--output", "--ext-diff", "--textconv", "--exec-path", "--upload-pack"), ""),
}
UNQUOTED_SPECIAL = {
    "|": "a pipe", "&": "a background or && operator", ";": "a command separator",
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


def _names_env_file(word: str) -> bool:
    """A `.env` file (secrets; fs_read refuses it) named by a word or an option value."""
    return any(is_env_name(part) for v in (word, *_values(word)) for part in v.split("/"))


def _writing_option(program: str, args: list[str]) -> str | None:
    long_forms, short_letters = WRITING_OPTIONS.get(program, ((), ""))
    for arg in args:
        name = arg.split("=", 1)[0]
        if name in long_forms:
            return arg
        # GNU getopt accepts any unambiguous prefix of a long option (`sort --out=x`).
        if name.startswith("--") and len(name) > 2 and any(opt.startswith(name) for opt in long_forms):
            return arg
        if short_letters and arg.startswith("-") and not arg.startswith("--"):
            if any(letter in arg[1:] for letter in short_letters):
                return arg
    return None


def classify(command: str) -> tuple[Risk, str]:
    """(risk, why) of one command line. Medium only for a plain read-only command."""
    feature = _special_character(command)
    if feature:
        return "high", f"uses {feature}"
    words = _words(command)
    if not words:
        return "high", "cannot be parsed as plain words"
    if any(set(word) <= _PUNCTUATION for word in words):
        return "high", "uses shell operators"
    program, args = words[0], words[1:]
    if "=" in program:
        return "high", "sets environment variables"
    if program not in READ_ONLY_PROGRAMS:
        return "high", f"`{visible(program)[:60]}` is not a known read-only command"
    if program == "git" and (not args or args[0] not in GIT_READ_ONLY):
        return "high", "only git status/log/diff/show are read-only"
    if program == "uniq" and len([a for a in args if not a.startswith("-")]) > 1:
        return "high", "`uniq` with an output file writes it"
    option = _writing_option(program, args)
    if option:
        return "high", f"`{program}` with `{visible(option)[:60]}` can write files or run programs"
    if any(_leaves_workspace(arg) for arg in args):
        return "high", "reads outside the workspace"
    if any(_names_env_file(arg) for arg in args):
        return "high", "reads a .env file (secrets)"
    return "medium", "read-only command"


RECURSIVE_READERS = {"rg": None, "grep": ("-r", "-R", "--recursive", "--dereference-recursive",
                                          "--directories=recurse")}
SECRET_SCAN_LIMIT = 20_000   # entries looked at when checking a workspace for .env files
SECRET_SCAN_TTL = 10.0       # seconds a scan result is reused
_SKIPPED_DIRS = frozenset({".git", "node_modules", ".venv", "__pycache__"})
_secret_scans: dict[str, tuple[float, bool]] = {}


def reads_recursively(command: str) -> bool:
    """Does this (plain, read-only) command read the contents of a whole folder tree?"""
    words = _words(command)
    if not words or words[0] not in RECURSIVE_READERS:
        return False
    flags = RECURSIVE_READERS[words[0]]
    if flags is None:  # rg searches the working directory tree by default
        return True
    return any(arg in flags or (arg.startswith("-") and not arg.startswith("--")
                                and ("r" in arg[1:] or "R" in arg[1:])) for arg in words[1:])


def holds_secrets(workspace: str) -> bool:
    """Is there a .env file anywhere in the workspace? (bounded scan, cached a few seconds)"""
    now = time.monotonic()
    cached = _secret_scans.get(workspace)
    if cached is not None and now - cached[0] < SECRET_SCAN_TTL:
        return cached[1]
    found, seen = False, 0
    for _dirpath, dirnames, filenames in os.walk(workspace):
        dirnames[:] = [d for d in dirnames if d not in _SKIPPED_DIRS]
        seen += len(dirnames) + len(filenames)
        if any(is_env_name(name) for name in (*filenames, *dirnames)):
            found = True
            break
        if seen > SECRET_SCAN_LIMIT:
            found = True  # too big to be sure: assume the worst
            break
    _secret_scans[workspace] = (now, found)
    return found


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
