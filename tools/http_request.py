"""http_request: call an HTTP API (GET/POST/PUT/PATCH/DELETE) through the network guard.

Risk is decided per call: a GET to a domain the operator listed in `[tools.net] allow_domains`
is low, any other GET medium (a query string can carry data out), anything that writes high.
Only GETs follow redirects: a body approved for one URL is never re-sent to another.
"""

from __future__ import annotations

import json as jsonlib
import re
from dataclasses import replace
from typing import Any, ClassVar

from bot.core.tool import BaseTool, CallContext, Risk, ToolException, ToolInvalidArgsError, ToolMeta
from bot.language.phrase import Phrase, plural_phrase
from tools import _netguard
from tools._urlrisk import carries_data
from tools.web_fetch import decode

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
TOKEN = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$"
# Headers the HTTP layer owns: letting the model set them would smuggle requests or retarget them.
RESERVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection", "upgrade",
                              "te", "trailer", "keep-alive", "expect", "proxy-authorization",
                              "proxy-connection"})
SHOWN_RESPONSE_HEADERS = frozenset({
    "content-type", "content-length", "content-language", "content-encoding", "location", "date",
    "last-modified", "etag", "cache-control", "expires", "retry-after", "link", "allow",
    "www-authenticate", "x-request-id",
})
_UNSAFE_VALUE = re.compile(r"[\r\n\x00]")
DEFAULT_MAX_CHARS = 50_000


def shown_headers(headers: Any) -> dict[str, str]:
    """Response headers worth showing the model; cookies and the rest are left out."""
    return {name.lower(): value for name, value in headers.items()
            if name.lower() in SHOWN_RESPONSE_HEADERS or "ratelimit" in name.lower()}


def request_body(method: str, body: str | None, payload: Any, has_json: bool) -> bytes | None:
    if body is not None and has_json:
        raise ToolInvalidArgsError(Phrase("Give either `body` or `json`, not both."),
                                   "Use `json` for a JSON payload, `body` for any other text.")
    if method == "GET" and (body is not None or has_json):
        raise ToolInvalidArgsError(Phrase("A GET request cannot carry a body."),
                                   "Put parameters in the URL's query string, or use POST.")
    if has_json:
        return jsonlib.dumps(payload, ensure_ascii=False).encode("utf-8")
    return None if body is None else body.encode("utf-8")


def checked_headers(headers: dict[str, str] | None, has_json: bool) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in (headers or {}).items():
        if name.lower() in RESERVED_HEADERS or name.lower().startswith("proxy-"):
            raise ToolInvalidArgsError(Phrase("The header {name} cannot be set by the caller.",
                                              name=repr(name)),
                                       "Leave out transport headers such as Host and Content-Length.")
        if _UNSAFE_VALUE.search(value) or not value.isascii():
            raise ToolInvalidArgsError(
                Phrase("The value of header {name} contains a line break, NUL or non-ASCII "
                       "character.", name=repr(name)),
                "Header values must be one line of ASCII text; percent-encode anything else.")
        out[name] = value
    if has_json and not any(n.lower() == "content-type" for n in out):
        out["Content-Type"] = "application/json"
    return out


class HttpRequest(BaseTool):
    meta = ToolMeta(
        name="http_request",
        description=(
            "Send an HTTP request to a public API: method GET/POST/PUT/PATCH/DELETE, url, optional "
            "headers, and a text `body` or a `json` payload. Returns status, selected headers and "
            "the response body as text. Requests that change something need the user's approval. "
            "To simply read a web page, prefer web_fetch."
        ),
        schema={
            "type": "object",
            "properties": {
                "method": {"enum": list(METHODS)},
                "url": {"type": "string", "minLength": 1, "maxLength": 8192},
                "headers": {"type": "object", "maxProperties": 50,
                            "patternProperties": {TOKEN: {"type": "string", "maxLength": 8192}},
                            "additionalProperties": False},
                "body": {"type": "string", "maxLength": 1_000_000, "description": "Request body text"},
                "json": {"description": "A JSON value sent as the body (Content-Type: application/json)"},
                "max_chars": {"type": "integer", "minimum": 100, "maximum": 500_000,
                              "default": DEFAULT_MAX_CHARS},
            },
            "required": ["method", "url"],
            "additionalProperties": False,
        },
        has_side_effects=True,
        risk="low",
        returns_untrusted=True,
        idempotent=False,
        supports_dry_run=True,
        capability_required="net:http",
        egress=True,
    )
    examples: ClassVar[list[dict[str, Any]]] = [
        {"method": "POST", "url": "https://api.example.com/v1/notes", "json": {"text": "hello"}},
    ]

    def __init__(self, allow_domains: tuple[str, ...] = ()):
        self.allow_domains = allow_domains
        if not allow_domains:
            # Without an allow-list no request can be low risk: say so in the tool's floor, so
            # the catalog never offers it to a sender who could never run it (read_only).
            self.meta = replace(HttpRequest.meta, risk="medium")

    def approval_scope(self, args: dict[str, Any]) -> tuple[str, str] | None:
        """An "Always" covers the same method to the same host."""
        target = _netguard.parse_target(args.get("url", ""))
        method = str(args.get("method", "GET"))
        return f"{method} {target.host}", Phrase("{method} requests to {host}", method=method,
                                                  host=target.host)

    def risk_for(self, args: dict[str, Any]) -> Risk:
        if args.get("method") != "GET":
            return "high"
        try:
            target = _netguard.parse_target(args.get("url", ""))
        except ToolException:
            return "high"
        if carries_data(target):
            return "medium"
        return "low" if _netguard.domain_matches(target.host, self.allow_domains) else "medium"

    async def dry_run(self, ctx: CallContext, method: str, url: str, headers: dict[str, str] | None = None,
                      body: str | None = None, **args: Any) -> dict[str, Any]:
        content = request_body(method, body, args.get("json"), "json" in args)
        names = sorted(checked_headers(headers, "json" in args))
        target = _netguard.parse_target(url)
        _netguard.Guard.from_context(ctx).check_literal(target)
        size = len(content or b"")
        summary = plural_phrase("{method} {url} ({n} byte)", "{method} {url} ({n} bytes)", size,
                                method=method, url=target.url)
        if names:
            summary = plural_phrase("{request} with header {names}",
                                    "{request} with headers {names}", len(names),
                                    request=summary, names=", ".join(names))
        return {"summary": summary, "method": method, "url": target.url, "body_bytes": size,
                "headers": names, "risk": self.risk_for({"method": method, "url": url})}

    async def execute(self, ctx: CallContext, method: str, url: str, headers: dict[str, str] | None = None,
                      body: str | None = None, max_chars: int = DEFAULT_MAX_CHARS,
                      **args: Any) -> dict[str, Any]:
        content = request_body(method, body, args.get("json"), "json" in args)
        fetched = await _netguard.fetch(ctx, method, url, headers=checked_headers(headers, "json" in args),
                                        content=content, follow_redirects=method == "GET")
        _netguard.raise_for_status(fetched)
        text = decode(fetched.body, fetched.charset, fetched.content_type)
        return {
            "url": fetched.url,
            "status": fetched.status,
            "headers": shown_headers(fetched.headers),
            "body": text[:max_chars],
            "truncated": fetched.truncated or len(text) > max_chars,
        }


def build(config: Any = None) -> HttpRequest:
    domains = tuple(config["tools"]["net"].get("allow_domains", ())) if config is not None else ()
    return HttpRequest(domains)
