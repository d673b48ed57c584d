"""What a model can do, honestly: a table of defaults per well-known provider, which a
`[models.<alias>] capabilities` table overrides key by key.

The runtime degrades visibly from it (bot/llm/degrade.py): no vision → a photo becomes its
placeholder line; no PDFs → the text pypdf extracts, marked as file data; no tools → no catalog
is sent. `prompt_caching`: "explicit" (the route reads `cache_control` markers: Anthropic, and
Anthropic models through OpenRouter), "automatic" (the provider caches prefixes by itself:
OpenAI, DeepSeek), "none".
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any
from urllib.parse import urlsplit

CACHING_KINDS = ("explicit", "automatic", "none")
# Ports the usual local servers listen on: Ollama, LM Studio, vLLM / llama.cpp.
LOCAL_PORTS = (11434, 1234, 8000, 8080)
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1", "0.0.0.0")


@dataclass(frozen=True)
class Capabilities:
    tools: bool = True
    parallel_tool_calls: bool = True
    vision: bool = True
    pdfs: bool = True
    prompt_caching: str = "explicit"
    context_tokens: int = 200_000
    max_output_tokens: int = 64_000

    def overridden(self, table: dict[str, Any]) -> Capabilities:
        known = {f.name for f in fields(self)}
        return replace(self, **{k: v for k, v in table.items() if k in known})

    @property
    def full(self) -> bool:
        """Can it take every request the runtime builds as it is (nothing to degrade)?"""
        return self.tools and self.vision and self.pdfs and self.prompt_caching == "explicit"


ANTHROPIC = Capabilities()
OPENAI = Capabilities(pdfs=False, prompt_caching="automatic", context_tokens=128_000,
                      max_output_tokens=16_384)
OPENROUTER = Capabilities(pdfs=False, prompt_caching="automatic", context_tokens=128_000,
                          max_output_tokens=16_384)
# A local server (Ollama, LM Studio, vLLM, llama.cpp): tools mostly work, one call at a time;
# images only with a vision model, which the operator says in the config.
LOCAL = Capabilities(parallel_tool_calls=False, vision=False, pdfs=False, prompt_caching="none",
                     context_tokens=32_768, max_output_tokens=8_192)
OTHER = LOCAL

# Prices (per million tokens) a local model costs by default: nothing. Remote models without a
# price in the config are charged at the highest configured rate (bot.config.prices).
FREE = {"input": 0.0, "output": 0.0, "cache_write": 0.0, "cache_read": 0.0}


def is_local(base_url: str) -> bool:
    try:
        parts = urlsplit(base_url)
        return parts.hostname in LOCAL_HOSTS or parts.port in LOCAL_PORTS
    except ValueError:
        return False


def defaults(provider: str, base_url: str, model: str) -> Capabilities:
    """The table's row for a model before the config's overrides."""
    if provider == "anthropic":
        return ANTHROPIC
    host = (urlsplit(base_url).hostname or "") if base_url else "api.openai.com"
    if host == "api.openai.com":
        return OPENAI
    if host.endswith("openrouter.ai"):
        # Anthropic models through OpenRouter read cache_control markers.
        return replace(OPENROUTER, prompt_caching="explicit") if model.startswith(
            "anthropic/") else OPENROUTER
    return LOCAL if is_local(base_url) else OTHER
