"""web_fetch: GET one web page through the network guard and return it as readable text."""

from __future__ import annotations

import re
from typing import Any, ClassVar

import httpx

from bot.core.tool import BaseTool, CallContext, Risk, ToolException, ToolMeta, ToolUnsupportedError
from bot.language.phrase import Phrase
from bot.toolbox.offload import OverBudget, run_off_loop
from tools import _netguard
from tools._urlrisk import carries_data

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset({"application/json", "application/xml", "application/javascript",
                        "application/x-javascript", "application/ld+json", "application/rss+xml",
                        "application/atom+xml", "application/x-ndjson", "application/yaml"})
DEFAULT_MAX_CHARS = 50_000
ACCEPT = "text/html, text/*;q=0.9, */*;q=0.5"
_MIME_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,40}/[a-z0-9][a-z0-9!#$&^_.+-]{0,60}")


def is_textual(content_type: str) -> bool:
    return (not content_type or content_type.startswith("text/") or content_type in HTML_TYPES
            or content_type in TEXT_TYPES or content_type.endswith(("+json", "+xml")))


def refuse_binary(response: httpx.Response) -> None:
    """Called before the body is read: a binary answer is refused without downloading it."""
    content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if not is_textual(content_type):
        # The header is the remote side's text and errors reach the model unwrapped: show it only
        # when it is a plain MIME type.
        shown = content_type if _MIME_TYPE.fullmatch(content_type) else Phrase("a non-text type")
        raise ToolUnsupportedError(
            Phrase("{site} answered with {type}, which is not text.", type=shown,
                   site=response.request.headers.get("host") or Phrase("The site")),
            "web_fetch reads web pages and text only. Look for an HTML or text version of this "
            "resource, or tell the user it is a binary file.",
            {"content_type": content_type},
        )


def decode(body: bytes, charset: str | None, content_type: str) -> str:
    if charset is None and content_type in HTML_TYPES:
        from tools._html import sniff_charset  # the HTML parser: with the first page fetched

        charset = sniff_charset(body)
    try:
        return body.decode(charset or "utf-8", errors="replace")
    except (LookupError, UnicodeError):  # an unknown charset name from the remote side, or one
        return body.decode("utf-8", errors="replace")  # (idna) that cannot replace errors


class WebFetch(BaseTool):
    meta = ToolMeta(
        name="web_fetch",
        description=(
            "Fetch a public web page (HTTP GET) and return it as readable text: title, headings, "
            "paragraphs and links as [text](url). Private and internal addresses are refused. "
            "Use it to read a page whose URL you know; use web_search to find pages."
        ),
        schema={
            "type": "object",
            "properties": {
                "url": {"type": "string", "minLength": 1, "maxLength": 8192,
                        "description": "Absolute http(s) URL"},
                "max_chars": {"type": "integer", "minimum": 100, "maximum": 500_000,
                              "default": DEFAULT_MAX_CHARS,
                              "description": "Most characters of text to return"},
            },
            "required": ["url"],
            "additionalProperties": False,
        },
        has_side_effects=False,
        risk="low",
        returns_untrusted=True,
        idempotent=True,
        supports_dry_run=True,
        capability_required="net:http:get",
        egress=True,
    )
    # A loopback address: the guard refuses it before connecting, so the conformance suite
    # exercises the tool offline; even a broken guard could only reach this machine's port 9.
    examples: ClassVar[list[dict[str, Any]]] = [{"url": "http://127.0.0.1:9/"}]

    def risk_for(self, args: dict[str, Any]) -> Risk:
        try:
            target = _netguard.parse_target(args.get("url", ""))
        except ToolException:
            return "medium"  # refused when run; no reason to run it unasked
        return "medium" if carries_data(target) else "low"

    async def dry_run(self, ctx: CallContext, url: str, **_: Any) -> dict[str, Any]:
        # Never fetches: the approval shows the whole URL exactly as it would be sent.
        target = _netguard.parse_target(url)
        _netguard.Guard.from_context(ctx).check_literal(target)
        return {"summary": f"GET {target.url}", "url": target.url,
                "risk": self.risk_for({"url": url})}

    async def execute(self, ctx: CallContext, url: str, max_chars: int = DEFAULT_MAX_CHARS,
                      **_: Any) -> dict[str, Any]:
        fetched = await _netguard.fetch(ctx, "GET", url, headers={"Accept": ACCEPT}, inspect=refuse_binary)
        _netguard.raise_for_status(fetched)
        content_type = fetched.content_type
        if not content_type and b"\x00" in fetched.body[:1024]:
            raise ToolUnsupportedError(Phrase("{url} answered with binary data.", url=fetched.shown_url),
                                       "web_fetch reads web pages and text only.")
        text = decode(fetched.body, fetched.charset, content_type)
        title, complete = "", True
        if content_type in HTML_TYPES or (not content_type and "<html" in text[:1000].lower()):
            # In a worker process: a 2 MB page is CPU work that must not stall every other chat
            # (a thread would still hold the GIL). reduce_html keeps to its own budget and returns
            # what it read; the pool's budget only catches a parser stuck past it.
            from tools._html import DEFAULT_BUDGET_SECONDS as HTML_BUDGET_SECONDS
            from tools._html import Reduced, reduce_html

            try:
                reduced = await run_off_loop(reduce_html, text, fetched.url,
                                             budget=HTML_BUDGET_SECONDS + 1)
            except OverBudget:
                reduced = Reduced("", "", complete=False)
            title, text, complete = reduced.title, reduced.text, reduced.complete
        truncated = fetched.truncated or not complete or len(text) > max_chars
        return {
            "url": fetched.url,
            "status": fetched.status,
            "content_type": content_type,
            "title": title,
            "text": text[:max_chars],
            "truncated": truncated,
        }


def build() -> WebFetch:
    return WebFetch()
