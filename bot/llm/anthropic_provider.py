"""The Anthropic Messages API through its official SDK: the reference provider.

Requests go out exactly as the runtime builds them (prompt caching markers, documents, images,
thinking, `tool_use`); streamed answers are read as raw events (bot/llm/stream.py). Relies on
the SDK's own retries with backoff for 429/5xx/timeouts; what is left is translated by
bot/llm/errors.py.

A streamed call's body is encoded here, once, with the standard library's encoder, and handed
to the SDK's `post` as is: `messages.create` would copy every container of the request (the
whole history and catalog, a few milliseconds a call once a conversation is long) before
encoding it the same way. Params that are not plain JSON, or that carry SDK options, go through
`messages.create` as before.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
from anthropic.types import Message, RawMessageStreamEvent

from bot.core.errors import LLMError
from bot.llm.errors import Account, translate
from bot.llm.provider import LLMResponse, TextCallback
from bot.llm.stream import StreamAccumulator

NO_KEY = ("The bot has no model API key. The operator must set {env} and restart.")


def _usage(usage: Any) -> dict[str, int]:
    if usage is None:
        return {}
    return {
        "input_tokens": int(getattr(usage, "input_tokens", 0) or 0),
        "output_tokens": int(getattr(usage, "output_tokens", 0) or 0),
        "cache_read_tokens": int(getattr(usage, "cache_read_input_tokens", 0) or 0),
        "cache_write_tokens": int(getattr(usage, "cache_creation_input_tokens", 0) or 0),
    }


def verified_tls() -> Any:
    """The TLS context the model client's connections use: aiohttp's own verified one (the
    system's CA store, loaded when aiohttp is imported). The SDK would otherwise load the same
    store into a context of its own on the first model call: 3.5 MiB more, for the same trust.
    `True` (the SDK's default) if this aiohttp keeps it elsewhere."""
    from aiohttp import connector

    return getattr(connector, "_SSL_CONTEXT_VERIFIED", None) or True


def _block(block: Any) -> dict[str, Any]:
    kind = getattr(block, "type", None)
    if kind == "text":
        return {"type": "text", "text": block.text}
    if kind == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    return block.model_dump(mode="json", exclude_none=True)


# Keyword arguments of `messages.create` that are not fields of the request body.
SDK_OPTIONS = frozenset({"extra_headers", "extra_query", "extra_body", "timeout"})
# As the SDK encodes a body (compact, UTF-8, no NaN).
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


# The parts bot.llm.prompt.PromptBuilder hands out again and again, the same objects, never
# changed once built (the system prompt, a catalog): encoded once each.
REUSED_PARTS = ("system", "tools")
MAX_ENCODED_PARTS = 64


class EncodedParts:
    """The JSON text of the request parts seen before, by the object's identity (each kept
    alive by its entry, so its id cannot name another object meanwhile)."""

    def __init__(self) -> None:
        self._texts: dict[int, tuple[Any, str]] = {}

    def text(self, value: Any) -> str:
        known = self._texts.get(id(value))
        if known is not None and known[0] is value:
            return known[1]
        text = _ENCODER.encode(value)
        if len(self._texts) >= MAX_ENCODED_PARTS:
            self._texts.clear()
        self._texts[id(value)] = (value, text)
        return text


def streamed_body(params: dict[str, Any], parts: EncodedParts | None = None) -> bytes | None:
    """The JSON body of a streamed call with `params` (the same text as encoding them whole);
    None when only the SDK can build it. `parts`: where the reused parts' text is kept."""
    if not SDK_OPTIONS.isdisjoint(params):
        return None
    try:
        fields = [f"{_ENCODER.encode(key)}:"
                  f"{parts.text(value) if parts and key in REUSED_PARTS else _ENCODER.encode(value)}"
                  for key, value in {**params, "stream": True}.items()]
    except (TypeError, ValueError):   # a value plain JSON has no form for
        return None
    return ("{" + ",".join(fields) + "}").encode()


class AnthropicProvider:
    def __init__(self, *, key: str | None, key_env: str, base_url: str | None, timeout: float,
                 max_retries: int, client: anthropic.AsyncAnthropic | None = None):
        self._key, self._base_url = key, base_url
        self._timeout, self._max_retries = timeout, max_retries
        self._client = client
        self.account = Account(key_env=key_env)
        self._parts = EncodedParts()

    @property
    def client(self) -> anthropic.AsyncAnthropic:
        if self._client is None:
            if not self._key:
                env = self.account.key_env
                raise LLMError(f"{env} is not set", NO_KEY.format(env=env))
            self._client = anthropic.AsyncAnthropic(
                api_key=self._key, base_url=self._base_url, max_retries=self._max_retries,
                timeout=self._timeout,
                # The SDK's aiohttp transport: httpx's pool costs grow with the number of
                # connections in flight, which dominated CPU with hundreds of concurrent chats.
                http_client=anthropic.DefaultAioHttpClient(verify=verified_tls()),
            )
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()

    async def complete(self, params: dict[str, Any],
                       on_text: TextCallback | None) -> LLMResponse:
        try:
            if on_text is not None:
                return await self._stream(params, on_text)
            message = await self.client.messages.create(**params)
        except anthropic.APIError as exc:
            raise translate(exc, params.get("model", "?"), self.account) from exc
        return LLMResponse([_block(b) for b in message.content], message.stop_reason,
                           message.model, _usage(message.usage))

    async def _stream(self, params: dict[str, Any], on_text: TextCallback) -> LLMResponse:
        accumulator = StreamAccumulator(on_text)
        body = streamed_body(params, self._parts)
        if body is None:
            stream = await self.client.messages.create(stream=True, **params)
        else:
            stream = await self.client.post(
                "/v1/messages", cast_to=Message, content=body, stream=True,
                stream_cls=anthropic.AsyncStream[RawMessageStreamEvent])
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
