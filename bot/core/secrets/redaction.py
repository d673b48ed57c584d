"""Defence in depth: secret values never leave a tool call, whatever read them.

The values are the bot's own secrets (its environment: API keys, tokens, the database password,
and any variable whose name or URL says it holds one: "the environment", below),
the passwords in the URLs of a workspace repository's remotes (`.git/config`), and the values
found in the workspace's secret files (bot/core/secrets/files.py): each
assignment's value (`KEY=value`, `"key": "value"`, `password hunter2` as in .netrc) whose
name says it is a secret, and every value or line that looks random enough to be a key (a PEM
body line, an API token). Every string of a tool result is scrubbed of them before the result
reaches the model, a chat, the logs or the store.

Cheap per call: one combined pattern per workspace, rebuilt only when a secret file's mtime or
size changed (a file that did not change is never read again); the workspace check is the
folder-mtime walk of secret_files.inventory, done off the event loop for a large tree.
"""

from __future__ import annotations

import asyncio
import functools
import os
import re
from collections.abc import Iterable
from dataclasses import replace
from typing import Any
from urllib.parse import quote, urlsplit

from bot.core.secrets.files import DEFAULT, Inventory, SecretFiles, inventory
from bot.core.tool import ToolError

REDACTED = "[REDACTED]"
READ_LIMIT = 256 * 1024   # bytes of one secret file looked at for values
MIN_NAMED = 4             # a value under a secret-sounding name, this long or longer
MIN_RANDOM = 12           # a value that looks random, this long or longer
INLINE_FOLDERS = 256      # workspaces with fewer folders are checked without a thread
GIT_CONFIG = os.path.join(".git", "config")
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASS", "PWD", "CREDENTIAL", "AUTH", "PRIVATE", "DSN",
                "SALT", "COOKIE", "SESSION", "SIGNATURE", "CERT")
_ASSIGNMENT = re.compile(r"""^\s*(?:export\s+)?["']?([A-Za-z_][\w.\-]*)["']?\s*[:=]\s*(.*?)\s*,?\s*$""")
# A quoted value under a name anywhere in a line: JSON, YAML or TOML written on one line.
_QUOTED_PAIR = re.compile(r"""["']?([A-Za-z_][\w.\-]*)["']?\s*[:=]\s*"((?:[^"\\\n]|\\.)*)\"""")
_QUOTES = "\"'`"


def values_in(text: str) -> set[str]:
    """The secret values one secret file holds, by the rules in the module docstring."""
    found: set[str] = set()
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "-----", "//", ";")):
            continue
        pairs = _QUOTED_PAIR.findall(line)
        for name, value in pairs:
            _add_value(found, name, value)
        if pairs:
            continue
        match = _ASSIGNMENT.match(line)
        if match:
            _add_value(found, match.group(1), match.group(2).strip().strip(_QUOTES))
            continue
        words = line.split()
        for before, word in zip(["", *words], words, strict=False):
            word = word.strip(_QUOTES)
            if (_named_secret(before) and len(word) >= MIN_NAMED) or _looks_random(word):
                found.add(word)
        if _looks_random(line):
            found.add(line)
    return found


def _add_value(found: set[str], name: str, value: str) -> None:
    if not value:
        return
    if (_named_secret(name) and len(value) >= MIN_NAMED) or _looks_random(value):
        found.add(value)
    password = _url_password(value)
    if password and len(password) >= MIN_NAMED:
        found.add(password)
    for part in value.split("\\n"):   # a key written as one JSON string with \n escapes
        if _looks_random(part.strip()):
            found.add(part.strip())


def _named_secret(name: str) -> bool:
    upper = name.upper()
    return any(word in upper for word in SECRET_WORDS)


def _looks_random(value: str) -> bool:
    """Long, and mixing at least three kinds of character (as keys, tokens and base64 do)."""
    if len(value) < MIN_RANDOM or " " in value:
        return False
    kinds = (any(c.islower() for c in value) + any(c.isupper() for c in value)
             + any(c.isdigit() for c in value) + any(not c.isalnum() for c in value))
    return kinds >= 3


def _url_password(value: str) -> str:
    if "://" not in value:
        return ""
    try:
        return urlsplit(value).password or ""
    except ValueError:
        return ""


def _pattern(values: Iterable[str]) -> re.Pattern[str] | None:
    given = {v for v in values if v and len(v) >= MIN_NAMED}
    spelled = given | {quote(v, safe="") for v in given}
    if not spelled:
        return None
    # Longest first, so a value that contains another is replaced whole.
    return re.compile("|".join(re.escape(v) for v in sorted(spelled, key=len, reverse=True)))


class SecretRedaction:
    """Scrubs tool results (any JSON-like value) of the bot's secrets and the workspace's."""

    def __init__(self, own_secrets: Iterable[str] = (), files: SecretFiles = DEFAULT):
        self.own = frozenset(v for v in own_secrets if v and len(v) >= MIN_NAMED)
        self.files = files
        self._own_pattern = _pattern(self.own)
        # root -> (the inventory's stamp, the pattern built from it); path -> (mtime, size, values)
        self._patterns: dict[str, tuple[tuple[Any, ...], re.Pattern[str] | None]] = {}
        self._file_values: dict[str, tuple[int, int, frozenset[str]]] = {}
        self._folders: dict[str, int] = {}

    async def scrub(self, roots: Iterable[os.PathLike[str] | str], value: Any) -> Any:
        """`value` with every secret replaced (the same object when there are no secrets).

        A result's revert-only keys (`undo`, `_...`: bot.core.tool.model_view) are kept as
        they are: they never reach the model or a chat, and an undo must put a file back
        exactly as it was; they stay in the store's undo log beside the file they restore."""
        pattern = await self.pattern_for(roots)
        if pattern is None:
            return value
        if isinstance(value, dict):
            return {k if _revert_only(k) else _scrub(pattern, k): v if _revert_only(k)
                    else _scrub(pattern, v) for k, v in value.items()}
        return _scrub(pattern, value)

    async def scrub_error(self, roots: Iterable[os.PathLike[str] | str], error: ToolError) -> ToolError:
        pattern = await self.pattern_for(roots)
        if pattern is None:
            return error
        return replace(error, message=_scrub(pattern, error.message),
                       details=_scrub(pattern, error.details))

    async def pattern_for(self, roots: Iterable[os.PathLike[str] | str]) -> re.Pattern[str] | None:
        paths = sorted({os.fspath(root) for root in roots})
        if all(self._folders.get(p, 0) < INLINE_FOLDERS for p in paths):
            return self._pattern_now(paths)
        return await asyncio.to_thread(self._pattern_now, paths)

    def _pattern_now(self, roots: list[str]) -> re.Pattern[str] | None:
        found = [self._inventory(root) for root in roots]
        stamp = tuple(s for inv in found for s in inv.stamp) + _git_configs(roots)
        key = "\0".join(roots)
        cached = self._patterns.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        values = set(self.own)
        for path, mtime, size in stamp:
            values |= self._values_of(path, mtime, size)
        pattern = _pattern(values) if values != self.own else self._own_pattern
        self._patterns[key] = (stamp, pattern)
        return pattern

    def _inventory(self, root: str) -> Inventory:
        found = inventory(root, self.files)
        self._folders[root] = len(found.stamp) + found.folders
        return found

    def _values_of(self, path: str, mtime: int, size: int) -> frozenset[str]:
        known = self._file_values.get(path)
        if known is not None and known[:2] == (mtime, size):
            return known[2]
        try:
            with open(path, "rb") as handle:
                text = handle.read(READ_LIMIT).decode("utf-8", errors="replace")
        except OSError:
            return frozenset()
        values = frozenset(_url_passwords(text) if path.endswith(GIT_CONFIG) else values_in(text))
        self._file_values[path] = (mtime, size, values)
        return values


def _git_configs(roots: list[str]) -> tuple[tuple[str, int, int], ...]:
    """A repository's config may keep a token in a remote's URL (https://user:token@host)."""
    stamps = []
    for root in roots:
        path = os.path.join(root, GIT_CONFIG)
        try:
            st = os.stat(path)
        except OSError:
            continue
        stamps.append((path, st.st_mtime_ns, st.st_size))
    return tuple(stamps)


def _url_passwords(text: str) -> set[str]:
    return {p for word in text.split() if len(p := _url_password(word)) >= MIN_NAMED}


def _revert_only(key: Any) -> bool:
    return isinstance(key, str) and (key == "undo" or key.startswith("_"))


def _scrub(pattern: re.Pattern[str], value: Any) -> Any:
    if isinstance(value, str):
        # A text with no secret stays the very object it was: a Phrase keeps its words for
        # each reader (`sub` would hand back its English alone, as a plain str).
        return pattern.sub(REDACTED, value) if pattern.search(value) else value
    if isinstance(value, dict):
        return {_scrub(pattern, k) if isinstance(k, str) else k: _scrub(pattern, v)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(pattern, v) for v in value]
    return value


# --- the environment ---------------------------------------------------------------------
# Which environment variables hold secrets, beyond the bot's own (SECRET_ENV_VARS).
#
# A variable holds a secret when its NAME says so — one of its words (split at `_`, `-`, `.`) is
# one of the secret-file assignments' words (SECRET_WORDS, above), or ends
# with one (APIKEY, GHTOKEN, DBPASS, MYSQLPWD), or is a password's spelling (PASSWORD, PASSWD,
# PASSPHRASE), or is a personal access token (PAT) or a password's short form (PW): GITHUB_TOKEN,
# SENTRY_DSN, MYSQL_PWD, GH_PAT, AWS_SECRET_ACCESS_KEY — and, whatever its name, the password (or
# a lone token as the user: https://TOKEN@host) of a URL it holds: DATABASE_URL=postgres://app:
# pw@db, HTTPS_PROXY=http://user:pw@proxy, REDIS_URL=redis://:pw@cache.
#
# Not secrets: the shell's own PWD and OLDPWD (folders), a desktop's SESSION and a CERT file
# (XDG_SESSION_TYPE, SSL_CERT_FILE are not secret-named here), and values that cannot be one: an
# existing absolute path (SSH_AUTH_SOCK, GOOGLE_APPLICATION_CREDENTIALS name files, they are not
# their content), a yes/no word, a small number, anything under four characters.
#
# Each (name, value) is judged once per process (cached): the redaction's list is built at start
# (Config.secret_values) and the shell's child environment only looks the verdicts up.

# Words that name a desktop session or a certificate file far more often than a secret.
_NOT_IN_NAMES = frozenset({"SESSION", "CERT"})
NAME_WORDS = (*(w for w in SECRET_WORDS if w not in _NOT_IN_NAMES),
              "PASSWORD", "PASSWD", "PASSPHRASE", "PASSCODE")
WHOLE_WORDS = frozenset({"PAT", "PW"})   # too short to look for at a word's end (SPAT, PPW)
NOT_SECRET_NAMES = frozenset({"PWD", "OLDPWD"})   # the shell's current and previous folder
PLAIN_VALUES = frozenset({"true", "false", "yes", "no", "on", "off", "none", "null", "0", "1"})
SMALL_NUMBER_DIGITS = 5   # TOKEN_TTL=3600, AUTH_PORT=8080: a number this short is a setting
_NAME_SPLIT = re.compile(r"[^A-Z0-9]+")


@functools.lru_cache(maxsize=4096)
def secret_name(name: str) -> bool:
    """Does this variable's name say it holds a secret?"""
    upper = name.upper()
    if upper in NOT_SECRET_NAMES:
        return False
    return any(_secret_word(word) for word in _NAME_SPLIT.split(upper) if word)


def _secret_word(word: str) -> bool:
    if word in WHOLE_WORDS:
        return True
    stem = word[:-1] if word.endswith("S") else word   # KEYS, CREDENTIALS
    return any(word.endswith(w) or stem.endswith(w) for w in NAME_WORDS)


@functools.lru_cache(maxsize=4096)
def secrets_of(name: str, value: str) -> tuple[str, ...]:
    """The secret values one environment variable holds (for redaction): its whole value when
    its name says so, and the password (or lone token) of a URL in it."""
    value = value.strip()
    found: list[str] = []
    named = secret_name(name)
    if named and _could_be_secret(value):
        found.append(value)
    for url in (w for w in value.split() if "://" in w):
        user, password = _userinfo(url)
        if password and len(password) >= MIN_NAMED:
            found.append(password)
        if user and not password and len(user) >= MIN_NAMED and (named or _token_like(user)):
            found.append(user)
    return tuple(dict.fromkeys(found))


@functools.lru_cache(maxsize=4096)
def hidden_from_tools(name: str, value: str) -> bool:
    """Must a tool's process not get this variable? When it holds a secret by `secrets_of`, or
    is secret-named with a value too short to redact safely (a short password is one still)."""
    if secrets_of(name, value):
        return True
    stripped = value.strip()
    return secret_name(name) and bool(stripped) and stripped.lower() not in PLAIN_VALUES \
        and not _is_path(stripped)


def environment_secrets(env: dict[str, str]) -> list[str]:
    """Every secret value `env` holds by its variables' names and URLs."""
    return list(dict.fromkeys(v for name, value in env.items() for v in secrets_of(name, value)))


def _could_be_secret(value: str) -> bool:
    if len(value) < MIN_NAMED or value.lower() in PLAIN_VALUES or _is_path(value):
        return False
    return not (value.isdigit() and len(value) <= SMALL_NUMBER_DIGITS)


def _is_path(value: str) -> bool:
    return value.startswith("/") and " " not in value and os.path.exists(value)


def _token_like(user: str) -> bool:
    """A URL's user that is a token, not a login name (https://ghp_x1y2...@github.com)."""
    return _looks_random(user) or (len(user) >= 8 and any(c.isdigit() for c in user))


def _userinfo(url: str) -> tuple[str, str]:
    try:
        parts = urlsplit(url)
        return parts.username or "", parts.password or ""
    except ValueError:
        return "", ""
