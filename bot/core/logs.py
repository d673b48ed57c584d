"""Logging: human-readable text by default, one JSON object per line with `--log-format json`,
and secrets never written.

`configure(fmt, level, secrets)` installs one handler on the root logger. Its `RedactingFilter`
rewrites each record before any formatter sees it: the message (with its args merged in), every
`extra` field, the formatted exception and stack text. It replaces the configured secret values
and anything shaped like a credential (Anthropic keys, Telegram bot tokens, Discord bot tokens,
`Bearer ...` and `x-api-key` values) with "[redacted]". The handler's formatter redacts its final
line once more, because a formatter may add text of its own (a traceback formatted lazily, an
object's `repr`).

httpx/httpcore log every request URL at INFO, and python-telegram-bot's URLs carry the bot token,
so those loggers are held at WARNING; the filter still catches the token if someone turns them up.

The runtime's per-turn line is `log.info("turn", extra={"sender": ..., "session": ..., "tools":
[...], "decisions": [...], "tokens": {...}, "latency_ms": ...})`: every non-standard record
attribute is rendered (JSON fields, or `key=value` pairs after the text message).
"""

from __future__ import annotations

import json
import logging
import re
import sys
import traceback
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import IO, Any
from urllib.parse import quote

from bot.core.events import valid_text

REDACTED = "[redacted]"

# Credential shapes caught even when nobody told us the value.
_PATTERNS = (
    r"sk-ant-[A-Za-z0-9_\-]{8,}",                               # Anthropic API keys
    r"(?<!\d)\d{8,10}:[A-Za-z0-9_\-]{30,}",                     # Telegram bot tokens (also in /bot<T>/)
    r"[MNO][A-Za-z\d_\-]{23,27}\.[A-Za-z\d_\-]{6}\.[A-Za-z\d_\-]{27,}",  # Discord bot tokens
)
# Credential-bearing headers: keep the header name, hide the value.
_HEADER_PATTERNS = (
    r"(?i)(\bBearer\s+)[A-Za-z0-9._~+/=\-]+",
    r"(?i)(\bBot\s+)[A-Za-z\d_\-]{20,}\.[A-Za-z\d_\-]+\.[A-Za-z\d_\-]+",
    r"(?i)(x-api-key['\"]?\s*[:=]\s*['\"]?)[^\s'\",}]+",
    r"(?i)(x-telegram-bot-api-secret-token['\"]?\s*[:=]\s*['\"]?)[^\s'\",}]+",
)

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message", "asctime", "taskName",
}
_NOISY_LOGGERS = ("httpx", "httpcore", "httpx2", "httpcore2", "hpack", "aiohttp.access")
_TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class Redactor:
    """Replaces secret values and credential-shaped strings. Compiled once per `configure`."""

    def __init__(self, secrets: Iterable[str] = ()):
        # Each secret also in its URL-encoded spelling (a token inside a logged URL or query);
        # longest first, so a secret that contains another is replaced whole.
        given = {s for s in secrets if s and len(s) >= 4}
        values = sorted(given | {quote(s, safe="") for s in given}, key=len, reverse=True)
        literal = "|".join(re.escape(v) for v in values)
        shapes = "|".join(_PATTERNS)
        self._plain = re.compile(f"{literal}|{shapes}" if literal else shapes)
        self._headers = tuple(re.compile(p) for p in _HEADER_PATTERNS)

    def text(self, value: str) -> str:
        value = self._plain.sub(REDACTED, value)
        for pattern in self._headers:
            value = pattern.sub(lambda m: m.group(1) + REDACTED, value)
        return value

    def value(self, value: Any) -> Any:
        """Redact a log field, keeping numbers, booleans and the shape of containers."""
        if value is None or isinstance(value, bool | int | float):
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple | set | frozenset):
            return [self.value(v) for v in value]
        return self.text(str(value))


class RedactingFilter(logging.Filter):
    """Rewrites a record in place so that no later formatter or handler can print a secret."""

    def __init__(self, redactor: Redactor):
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        redact = self.redactor
        try:
            message = record.getMessage()
        except (TypeError, ValueError) as exc:  # bad %-args: keep the line, say why
            message = f"{record.msg!r} (log arguments did not format: {exc})"
        record.msg, record.args = redact.text(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
        # The traceback lives on as redacted text only; the exception object (whose str or locals
        # may hold a secret) is dropped so no formatter renders it again.
        record.exc_info = None
        if record.exc_text:
            record.exc_text = redact.text(record.exc_text)
        if record.stack_info:
            record.stack_info = redact.text(record.stack_info)
        for key in extra_fields(record):
            setattr(record, key, redact.value(getattr(record, key)))
        return True


def extra_fields(record: logging.LogRecord) -> list[str]:
    return [k for k in vars(record) if k not in _STANDARD_ATTRS and not k.startswith("_")]


class TextFormatter(logging.Formatter):
    """`2026-05-01 12:00:00,123 INFO bot.runtime.agent: turn sender=telegram:1 latency_ms=840`."""

    def __init__(self, redactor: Redactor):
        super().__init__(_TEXT_FORMAT)
        self.redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = extra_fields(record)
        if fields:
            pairs = " ".join(f"{k}={_compact(getattr(record, k))}" for k in fields)
            head, sep, tail = line.partition("\n")
            line = f"{head} {pairs}{sep}{tail}"
        return valid_text(self.redactor.text(line))   # no log line can fail to encode


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, the extra fields, exc/stack if any."""

    def __init__(self, redactor: Redactor):
        super().__init__()
        self.redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key in extra_fields(record):
            entry.setdefault(key, getattr(record, key))
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exc"] = record.exc_text
        if record.stack_info:
            entry["stack"] = record.stack_info
        return valid_text(self.redactor.text(json.dumps(entry, ensure_ascii=False, default=str)))


class MyclawHandler(logging.StreamHandler):
    """Marks the handler `configure` installed, so a second call replaces it."""


def _compact(value: Any) -> str:
    if isinstance(value, str) and value and not any(c.isspace() for c in value):
        return value
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))


def configure(fmt: str = "text", level: str = "INFO", secrets: Iterable[str] = (),
              stream: IO[str] | None = None) -> logging.Handler:
    """Install the root handler (replacing one installed earlier) and return it."""
    if fmt not in ("text", "json"):
        raise ValueError(f"log format must be 'text' or 'json', not {fmt!r}")
    redactor = Redactor(secrets)
    handler = MyclawHandler(sys.stderr if stream is None else stream)
    handler.addFilter(RedactingFilter(redactor))
    handler.setFormatter(JsonFormatter(redactor) if fmt == "json" else TextFormatter(redactor))
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, MyclawHandler)]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in _NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    logging.captureWarnings(True)
    return handler
