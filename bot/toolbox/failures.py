"""What a failed tool call says: any exception a tool raised, as the `ToolError` the model reads
— never a traceback.

A tool's own `ToolException` says what it means; an error from the operating system or a bug
gets a fixed message here. Each message is a `Phrase`: the model and the logs read its English,
a person reads it in their own language on the call's status line.
"""

from __future__ import annotations

import logging

from bot.core.tool import (
    PortUnavailableError,
    ToolError,
    ToolException,
    ToolNetworkError,
    ToolNotFoundError,
    ToolPermissionError,
)
from bot.language.phrase import Phrase

log = logging.getLogger(__name__)

UNEXPECTED_HINT = ("This looks like a bug in the tool, not in your arguments. Do not retry the "
                   "same call; try another approach or tell the user what failed.")


UNWIRED_PORTS = {
    "memory": Phrase("Long-term memory is not available here."),
    "model": Phrase("The stronger model is not available here."),
    "quota": Phrase("The daily quota is not available here."),
    "jobs": Phrase("Scheduling is not available here."),
}


def to_tool_error(exc: BaseException, tool_name: str = "") -> ToolError:
    """Translate any exception raised by a tool into a ToolError."""
    if isinstance(exc, PortUnavailableError):
        return ToolError(exc.kind, UNWIRED_PORTS[exc.port], exc.llm_hint)
    if isinstance(exc, ToolException):
        return exc.to_error()
    if isinstance(exc, FileNotFoundError):
        return ToolError("not_found", Phrase("Not found: {what}", what=str(exc.filename or exc)),
                         ToolNotFoundError.default_hint)
    if isinstance(exc, PermissionError):
        return ToolError("permission_denied", Phrase("Permission denied by the operating system."),
                         ToolPermissionError.default_hint)
    if isinstance(exc, TimeoutError):
        return ToolError("network_error", Phrase("The operation timed out."),
                         ToolNetworkError.default_hint)
    # Unexpected: keep the traceback in the log for the operator, give the model a clean error.
    log.error("tool %s raised an unexpected error", tool_name or "?", exc_info=exc)
    return ToolError("unknown", Phrase("The tool failed unexpectedly ({error}).",
                                       error=type(exc).__name__), UNEXPECTED_HINT)
