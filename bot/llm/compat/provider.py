"""Any OpenAI-compatible chat-completions endpoint through the official `openai` SDK:
OpenAI, OpenRouter, Ollama, vLLM, LM Studio, llama.cpp's server, DeepSeek, Groq, Mistral…

The SDK is imported here only, and this module only when a configured model names
`provider = "openai"`. Requests are converted by bot/llm/compat/request.py and answers read by
bot/llm/compat/stream.py, so what the runtime sees is the same as from Anthropic. Usage comes
from the final chunk (`stream_options.include_usage`); a server that sends none (Ollama's
older versions, some proxies) gets an estimate of about four characters a token, so budgets
still count its calls, and the operator's log says so once per model.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any
from urllib.parse import urlsplit

import openai

from bot.core.errors import LLMError
from bot.llm.capabilities import Capabilities
from bot.llm.compat.request import chat_request
from bot.llm.compat.stream import ChunkAccumulator
from bot.llm.errors import Account, translate
from bot.llm.provider import LLMResponse, TextCallback

log = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4
NO_KEY = "The bot has no key for the model API at {url}. The operator must set {env} and restart."
# Local servers take any key; the SDK insists on one.
LOCAL_KEY = "not-needed"


class OpenAIProvider:
    def __init__(self, *, base_url: str, key: str | None, key_env: str, key_required: bool,
                 caps: Capabilities, timeout: float, max_retries: int):
        self.base_url, self.caps = base_url, caps
        self._key = key or (None if key_required else LOCAL_KEY)
        self._timeout, self._max_retries = timeout, max_retries
        self._client: Any = None
        host = urlsplit(base_url).hostname or "" if base_url else "api.openai.com"
        # OpenAI's own newer models refuse `max_tokens`; other servers only know it.
        self._tokens_key = "max_completion_tokens" if host == "api.openai.com" else "max_tokens"
        self.account = Account(key_env=key_env, console=f"the provider's dashboard ({host})",
                               billing=f"the provider's billing page ({host})")
        self._estimated_logged: set[str] = set()

    @property
    def client(self) -> Any:
        if self._client is None:
            if not self._key:
                raise LLMError(f"{self.account.key_env} is not set",
                               NO_KEY.format(url=self.base_url or "api.openai.com", env=self.account.key_env))
            self._client = openai.AsyncOpenAI(api_key=self._key, base_url=self.base_url or None,
                                              max_retries=self._max_retries,
                                              timeout=self._timeout)
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()

    async def complete(self, params: dict[str, Any],
                       on_text: TextCallback | None) -> LLMResponse:
        request = chat_request(params, self.caps, completion_tokens_key=self._tokens_key)
        accumulator = ChunkAccumulator(on_text, params.get("tools") if self.caps.tools else None)
        try:
            if on_text is not None:
                stream = await self.client.chat.completions.create(
                    stream=True, stream_options={"include_usage": True}, **request)
                async with stream:
                    async for chunk in stream:
                        await accumulator.feed(chunk)
            else:
                accumulator.whole(await self.client.chat.completions.create(**request))
        except openai.APIError as exc:
            raise translate(exc, params["model"], self.account) from exc
        blocks, stop = await accumulator.blocks()
        # Recorded as the id the config names: what servers echo back varies (a file name, a
        # dated id, an alias of their own), and the price is configured under that id.
        return LLMResponse(blocks, stop, params["model"],
                           self._usage(accumulator.usage, request, blocks))

    def _usage(self, usage: Any, request: dict[str, Any],
               blocks: list[dict[str, Any]]) -> dict[str, int]:
        if usage is None:
            return self._estimate(request, blocks)
        prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
        details = getattr(usage, "prompt_tokens_details", None)
        cached = int(getattr(details, "cached_tokens", 0) or 0) if details is not None else 0
        # Routes that charge for cache writes (Anthropic models through OpenRouter) say so here.
        written = int(getattr(details, "cache_write_tokens", 0) or 0) if details is not None else 0
        return {"input_tokens": max(0, prompt - cached - written),
                "output_tokens": int(getattr(usage, "completion_tokens", 0) or 0),
                "cache_read_tokens": cached, "cache_write_tokens": written}

    def _estimate(self, request: dict[str, Any], blocks: list[dict[str, Any]]) -> dict[str, int]:
        model = request["model"]
        if model not in self._estimated_logged and len(self._estimated_logged) < 100:
            self._estimated_logged.add(model)
            log.warning("model %r reported no token usage: its calls are counted from an "
                        "estimate (about %d characters a token)", model, CHARS_PER_TOKEN)
        sent = len(json.dumps(request["messages"], ensure_ascii=False)) + len(
            json.dumps(request.get("tools", []), ensure_ascii=False))
        answered = len(json.dumps(blocks, ensure_ascii=False))
        return {"input_tokens": math.ceil(sent / CHARS_PER_TOKEN),
                "output_tokens": math.ceil(answered / CHARS_PER_TOKEN),
                "cache_read_tokens": 0, "cache_write_tokens": 0}
