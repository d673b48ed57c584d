"""web_search: search the web through the Brave Search API or a SearXNG instance.

Registered only when configured: `BRAVE_API_KEY` in the environment (provider "brave", the
default), or `[tools.web_search] provider = "searxng"` with `searxng_url`. Requests go through
the network guard like every other web tool, so a SearXNG instance on a private address must
also be listed in `[tools.net] allow_hosts`.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import urlencode

from bot.core.tool import (
    BaseTool,
    CallContext,
    ToolExternalError,
    ToolInvalidArgsError,
    ToolMeta,
    ToolPermissionError,
    ToolQuotaError,
    ToolUnavailable,
)
from bot.language.phrase import Phrase
from tools import _netguard

UNCONFIGURED = "set BRAVE_API_KEY or configure [tools.web_search] searxng_url"
_TAGS = re.compile(r"<[^>]{0,200}>")


@dataclass(frozen=True)
class Provider:
    name: str            # "brave" | "searxng"
    endpoint: str
    api_key: str | None = field(default=None, repr=False)  # never in a repr, never in a log

    def request(self, query: str, count: int) -> tuple[str, dict[str, str]]:
        """The URL and headers of one search request."""
        if self.name == "brave":
            params = urlencode({"q": query, "count": count})
            headers = {"Accept": "application/json", "X-Subscription-Token": self.api_key or ""}
        else:
            params = urlencode({"q": query, "format": "json"})
            headers = {"Accept": "application/json"}
        separator = "&" if "?" in self.endpoint else "?"
        return f"{self.endpoint}{separator}{params}", headers

    def results(self, data: Any) -> list[dict[str, str]]:
        if not isinstance(data, dict):
            return []
        if self.name == "brave":
            web = data.get("web")
            items = web.get("results") if isinstance(web, dict) else None
            snippet_key = "description"
        else:
            items = data.get("results")
            snippet_key = "content"
        if not isinstance(items, list):
            return []
        return [
            {"title": _plain(item.get("title")), "url": item["url"],
             "snippet": _plain(item.get(snippet_key))}
            for item in items
            if isinstance(item, dict) and isinstance(item.get("url"), str)
            and item["url"].startswith(("http://", "https://"))
        ]


def _plain(value: Any) -> str:
    """Search APIs mark matches with <strong> and escape entities; the model wants plain text."""
    return html.unescape(_TAGS.sub("", value)).strip() if isinstance(value, str) else ""


def provider_from_config(config: Any) -> Provider:
    if config is None:
        raise ToolUnavailable(UNCONFIGURED)
    settings = config["tools"]["web_search"]
    searxng_url = (settings.get("searxng_url") or "").strip().rstrip("/")
    brave_key = config.secret("BRAVE_API_KEY")
    if settings.get("provider") != "searxng" and brave_key:
        return Provider("brave", settings["brave_url"], brave_key)
    if searxng_url:
        endpoint = searxng_url if searxng_url.endswith("/search") else f"{searxng_url}/search"
        return Provider("searxng", endpoint)
    raise ToolUnavailable(UNCONFIGURED)


class WebSearch(BaseTool):
    meta = ToolMeta(
        name="web_search",
        description=(
            "Search the web. Returns a list of results with title, url and snippet. Use it to "
            "find pages; then read one with web_fetch."
        ),
        schema={
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": 400},
                "count": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        has_side_effects=False,
        risk="low",
        returns_untrusted=True,
        idempotent=True,
        egress=True,
        supports_dry_run=True,
        capability_required="net:search",
    )
    # A blank query is refused before any request: the conformance suite must not reach the
    # real search provider.
    examples: ClassVar[list[dict[str, Any]]] = [{"query": "   "}]

    def __init__(self, provider: Provider):
        self.provider = provider

    async def execute(self, ctx: CallContext, query: str, count: int = 5, **_: Any) -> dict[str, Any]:
        query = " ".join(query.split())
        if not query:
            raise ToolInvalidArgsError(Phrase("The search query is empty."),
                                       "Give a few words to search for.")
        url, headers = self.provider.request(query, count)
        fetched = await self._fetch(ctx, url, headers)
        self._raise_for_status(fetched)
        try:
            data = json.loads(fetched.body)
        except ValueError as exc:
            raise ToolExternalError(
                Phrase("The {provider} search answered with something that is not JSON.",
                       provider=self.provider.name),
                "Retry once; if it fails again, answer without searching and say so.",
                {"truncated": fetched.truncated}) from exc
        results = self.provider.results(data)[:count]
        return {"query": query, "provider": self.provider.name, "results": results}

    async def _fetch(self, ctx: CallContext, url: str, headers: dict[str, str]) -> _netguard.Fetched:
        try:
            return await _netguard.fetch(ctx, "GET", url, headers=headers, follow_redirects=False)
        except ToolPermissionError as exc:
            if self.provider.name != "searxng":
                raise
            raise ToolPermissionError(
                exc.message,
                "The configured SearXNG instance is on a private/internal address. Tell the user "
                "the operator must add its host to [tools.net] allow_hosts in the config.",
                exc.details) from exc

    def _raise_for_status(self, fetched: _netguard.Fetched) -> None:
        if fetched.status in (401, 403):
            raise ToolExternalError(
                Phrase("The {provider} search refused the request (HTTP {status}).",
                       provider=self.provider.name, status=fetched.status),
                "The search API key or instance settings are wrong; tell the user the operator "
                "must check BRAVE_API_KEY / [tools.web_search]. Answer without searching.",
                {"status": fetched.status})
        if fetched.status == 429:
            raise ToolQuotaError(Phrase("The {provider} search quota or rate limit is used up.",
                                        provider=self.provider.name),
                                 "Answer without searching, or ask the user to try again later.",
                                 {"status": 429})
        _netguard.raise_for_status(fetched)


def build(config: Any = None) -> WebSearch:
    return WebSearch(provider_from_config(config))
