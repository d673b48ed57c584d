"""The exception hierarchy of myclaw's core (tool errors live in `bot.core.tool`).

    MyclawError
    ├── ConfigError      the configuration file is missing a piece or is wrong (exit 2)
    ├── StoreError       the SQLite store cannot be opened or migrated
    ├── LLMError         the model API failed after retries (message is user-facing)
    └── ChannelError     a channel could not start (bad token, unreachable API)
    ShuttingDown         the process is shutting down; the work was not started (not an error:
                         a channel leaves the message's inbox row for the restart)

Foreign exceptions are translated at the boundary with `raise ... from exc`.
"""

from __future__ import annotations


class MyclawError(Exception):
    """Base of every error myclaw raises on purpose. `str(exc)` is one clear line."""


class ConfigError(MyclawError):
    pass


class StoreError(MyclawError):
    pass


class LLMError(MyclawError):
    """The model could not answer. `user_message` is safe to show on a chat channel."""

    def __init__(self, message: str, user_message: str | None = None, retryable: bool = False):
        super().__init__(message)
        self.user_message = user_message or message
        self.retryable = retryable


class ChannelError(MyclawError):
    pass


class ShuttingDown(Exception):
    """The process is shutting down; the work was not started."""


def reason_of(exc: BaseException) -> str:
    """An error's message as it was raised: a Phrase keeps its words for each reader
    (`str(exc)` would be its English alone)."""
    first = exc.args[0] if len(exc.args) == 1 else None
    return first if isinstance(first, str) else str(exc)
