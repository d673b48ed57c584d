"""The Anthropic Messages API client: one place that talks to the model.

Wraps the official SDK (`anthropic.AsyncAnthropic`). Every call names the sender it is made
for: their budget is checked before it starts (bot.money.budgets; refused calls raise BudgetExceeded)
and it waits for a model slot shared fairly between senders (bot.money.fairshare; excess calls queue
instead of failing). Relies on the SDK's own retries with backoff for 429/5xx/timeouts, and
translates its exceptions into `LLMError` with a user-facing line that says what to do (bot.
llm_errors).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anthropic

from bot.config.settings import Config
from bot.core.errors import LLMError
from bot.llm.errors import translate
from bot.llm.stream import StreamAccumulator
from bot.money.fairshare import FairSlots

log = logging.getLogger(__name__)

TextCallback = Callable[[str], Awaitable[None]]


@dataclass
class LLMResponse:
    content: list[dict[str, Any]]
    stop_reason: str | None
    model: str
    usage: dict[str, int] = field(default_factory=dict)

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


def _usage(usage: Any) -> dict[str, int]:
    if usage is None:
        return {}
    return {
        "input_tokens": int(getattr(usage, "input_tokens", 0) or 0),
        "output_tokens": int(getattr(usage, "output_tokens", 0) or 0),
        "cache_read_tokens": int(getattr(usage, "cache_read_input_tokens", 0) or 0),
        "cache_write_tokens": int(getattr(usage, "cache_creation_input_tokens", 0) or 0),
    }


def _block(block: Any) -> dict[str, Any]:
    kind = getattr(block, "type", None)
    if kind == "text":
        return {"type": "text", "text": block.text}
    if kind == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    return block.model_dump(mode="json", exclude_none=True)


class LLMClient:
    def __init__(self, config: Config, client: anthropic.AsyncAnthropic | None = None,
                 budgets: Any = None):
        agent = config["agent"]
        self._config = config
        self._client = client
        self._budgets = budgets  # bot.money.budgets.Budgets, or None: no spend limits
        self.slots = FairSlots(agent["max_concurrent_llm_calls"],
                               config["rate_limits"]["max_share_of_model_slots"])
        self.stream_enabled: bool = agent["stream"]

    @property
    def client(self) -> anthropic.AsyncAnthropic:
        if self._client is None:
            agent = self._config["agent"]
            key = self._config.secret("ANTHROPIC_API_KEY")
            if not key:
                raise LLMError("ANTHROPIC_API_KEY is not set",
                               "The bot has no model API key. The operator must set "
                               "ANTHROPIC_API_KEY and restart.")
            self._client = anthropic.AsyncAnthropic(
                api_key=key,
                base_url=self._config.anthropic_base_url,
                max_retries=agent["llm_max_retries"],
                timeout=agent["llm_timeout_seconds"],
                # The SDK's aiohttp transport: httpx's pool costs grow with the number of
                # connections in flight, which dominated CPU with hundreds of concurrent chats.
                http_client=anthropic.DefaultAioHttpClient(),
            )
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()

    async def create(self, *, sender: str, level: str | None = None,
                     on_text: TextCallback | None = None, **params: Any) -> LLMResponse:
        """One model call made for `sender` (at autonomy `level`, which picks a per-level
        budget). Streams when enabled and `on_text` is given."""
        model = params.get("model", "?")
        if self._budgets is not None:
            await self._budgets.admit(sender, level)
        async with self.slots.hold(sender):
            try:
                if self.stream_enabled and on_text is not None:
                    return await self._stream(params, on_text)
                message = await self.client.messages.create(**params)
            except anthropic.APIError as exc:
                raise translate(exc, model) from exc
        return LLMResponse([_block(b) for b in message.content], message.stop_reason,
                           message.model, _usage(message.usage))

    async def _stream(self, params: dict[str, Any], on_text: TextCallback) -> LLMResponse:
        accumulator = StreamAccumulator(on_text)
        stream = await self.client.messages.create(stream=True, **params)
        async with stream:
            async for event in stream:
                await accumulator.feed(event)
        usage = accumulator.usage
        return LLMResponse(accumulator.blocks, accumulator.stop_reason,
                           accumulator.model or params.get("model", ""), {
                               "input_tokens": int(usage.get("input_tokens") or 0),
                               "output_tokens": int(usage.get("output_tokens") or 0),
                               "cache_read_tokens": int(usage.get("cache_read_input_tokens") or 0),
                               "cache_write_tokens": int(
                                   usage.get("cache_creation_input_tokens") or 0)})

    async def ask(self, *, sender: str, model: str, prompt: str, system: str = "",
                  max_tokens: int = 1024, level: str | None = None) -> Answer:
        """A single question, no tools: for supra_llm, summaries and other side calls."""
        params: dict[str, Any] = {"model": model, "max_tokens": max_tokens,
                                  "messages": [{"role": "user", "content": prompt}]}
        if system:
            params["system"] = system
        response = await self.create(sender=sender, level=level, **params)
        return Answer(response.text, response.usage, response.model or model)
