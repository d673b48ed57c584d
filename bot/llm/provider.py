"""The seam between the bot and a model API: one `Provider` per kind of endpoint.

A provider takes a request in the runtime's own shape (the Messages API's: `system` blocks,
`messages` of content blocks, `tools` with `input_schema`, `cache_control` markers) and returns
an `LLMResponse` whose content blocks are in that same shape (`text`, `tool_use`), so the
turn loop, validation, policy, previews and approvals never know which API answered. Budget
admission, fair slots, failover and degradation live in one place above it (bot/llm/client.py).

Implementations: bot/llm/anthropic_provider.py (the reference) and
bot/llm/compat/provider.py (any OpenAI-compatible `base_url`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

TextCallback = Callable[[str], Awaitable[None]]
# The usage numbers every provider reports, under these names (bot.config.prices reads them).
USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


@dataclass
class LLMResponse:
    content: list[dict[str, Any]]
    stop_reason: str | None
    model: str
    usage: dict[str, int] = field(default_factory=dict)
    # Sentences for the person in the chat about this call (which model answered, what the
    # model could not see); the runtime says each once per turn.
    notices: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return "".join(b.get("text", "") for b in self.content if b.get("type") == "text")

    @property
    def tool_uses(self) -> list[dict[str, Any]]:
        return [b for b in self.content if b.get("type") == "tool_use"]


@dataclass
class Answer:
    text: str
    usage: dict[str, int]
    model: str = ""


class Provider(Protocol):
    """One configured endpoint. `complete` streams when `on_text` is given; errors leave it as
    `LLMError` (bot.llm.errors.translate), with `retryable` set when another model may try."""

    async def complete(self, params: dict[str, Any],
                       on_text: TextCallback | None) -> LLMResponse: ...

    async def close(self) -> None: ...
