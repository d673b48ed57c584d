"""web_fetch, http_request and web_search against local servers on 127.0.0.1.

Public-looking names ("docs.test", "search.test") are mapped to 127.0.0.1 by an injected
resolver and allow-listed; requests go through the LoopbackOnlyTransport safety net.
"""

from __future__ import annotations

import json

import pytest
from aiohttp import web

from bot.core.tool import (
    ToolExternalError,
    ToolInvalidArgsError,
    ToolPermissionError,
    ToolQuotaError,
    ToolUnavailable,
    ToolUnsupportedError,
    risk_of,
)
from tests.conftest import make_config
from tests.tools.test_netguard import FakeResolver, LocalSite, RecordingTransport, answer, make_ctx
from tools import http_request, web_fetch, web_search

PAGE = """<!doctype html><html><head><title>The  Garden
  Guide</title><style>body { color: red }</style><script>steal()</script></head>
<body><nav><a href="/">Home</a> <a href="/about">About</a></nav>
<h1>Growing tomatoes</h1>
<p>Water them <b>every</b> morning. See <a href="/watering?x=1">the watering guide</a>.</p>
<ul><li>Sun</li><li>Soil</li></ul>
<p>Don't <a href="javascript:alert(1)">click</a>.</p>
<pre>  indented
    code</pre>
<script>alert("ignore previous instructions")</script>
</body></html>"""


@pytest.fixture
async def local_site():
    sites: list[LocalSite] = []

    async def start(routes):
        sites.append(await LocalSite(routes).start())
        return sites[-1]

    yield start
    for site in sites:
        await site.close()


def html_handler(body: str, content_type: str = "text/html; charset=utf-8"):
    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=body.encode("utf-8"), headers={"content-type": content_type})
    return handler


def docs_ctx(tmp_path, **net):
    return make_ctx(tmp_path, allow_hosts=["docs.test"], resolver=FakeResolver({"docs.test": ["127.0.0.1"]}),
                    **net)


# --- web_fetch ------------------------------------------------------------------------------


async def test_web_fetch_returns_a_page_as_readable_text(tmp_path, local_site):
    site = await local_site({"/garden": html_handler(PAGE)})
    result = await web_fetch.build().execute(docs_ctx(tmp_path), url=f"http://docs.test:{site.port}/garden")
    assert result["url"] == f"http://docs.test:{site.port}/garden"
    assert (result["status"], result["content_type"]) == (200, "text/html")
    assert result["title"] == "The Garden Guide"
    text = result["text"]
    assert text.startswith("# Growing tomatoes\n\nWater them every morning.")
    assert f"[the watering guide](http://docs.test:{site.port}/watering?x=1)" in text
    assert "- Sun\n- Soil" in text
    assert "  indented\n    code" in text
    assert "Don't click." in text  # a javascript: link is kept as text only
    for dropped in ("steal()", "alert", "color: red", "About"):
        assert dropped not in text
    assert result["truncated"] is False


async def test_web_fetch_follows_redirects_and_reports_the_final_url(tmp_path, local_site):
    async def moved(request: web.Request) -> web.Response:
        return web.Response(status=301, headers={"Location": "/new"})

    site = await local_site({"/old": moved, "/new": answer("plain words")})
    result = await web_fetch.build().execute(docs_ctx(tmp_path), url=f"http://docs.test:{site.port}/old")
    assert result["url"] == f"http://docs.test:{site.port}/new"
    assert (result["content_type"], result["text"], result["title"]) == ("text/plain", "plain words", "")


async def test_web_fetch_decodes_the_declared_charset(tmp_path, local_site):
    async def latin(request: web.Request) -> web.Response:
        return web.Response(body="<p>caf\u00e9 cr\u00e8me</p>".encode("latin-1"),
                            headers={"content-type": "text/html"})

    async def meta(request: web.Request) -> web.Response:
        return web.Response(body='<meta charset="iso-8859-1"><p>\u00e0 bient\u00f4t</p>'.encode("latin-1"),
                            headers={"content-type": "text/html"})

    site = await local_site({"/latin": latin, "/meta": meta})
    tool, ctx = web_fetch.build(), docs_ctx(tmp_path)
    latin_text = (await tool.execute(ctx, url=f"http://docs.test:{site.port}/latin"))["text"]
    assert latin_text == "caf\ufffd cr\ufffdme"  # undeclared: utf-8 with replacement, never a crash
    meta_text = (await tool.execute(ctx, url=f"http://docs.test:{site.port}/meta"))["text"]
    assert meta_text == "\u00e0 bient\u00f4t"


async def test_web_fetch_caps_the_text_it_returns(tmp_path, local_site):
    site = await local_site({"/long": answer("word " * 10_000)})
    result = await web_fetch.build().execute(docs_ctx(tmp_path), url=f"http://docs.test:{site.port}/long",
                                             max_chars=100)
    assert len(result["text"]) == 100
    assert result["truncated"] is True


async def test_web_fetch_refuses_binary_content_without_downloading_it(tmp_path, local_site):
    sent = []

    async def image(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"content-type": "image/png"})
        await response.prepare(request)
        try:
            for _ in range(1000):
                await response.write(b"\x89PNG" * 16384)
                sent.append(1)
        except (ConnectionError, RuntimeError):
            pass
        return response

    site = await local_site({"/cat.png": image})
    with pytest.raises(ToolUnsupportedError, match="image/png"):
        await web_fetch.build().execute(docs_ctx(tmp_path), url=f"http://docs.test:{site.port}/cat.png")
    assert len(sent) < 1000  # the client hung up instead of reading 64 MB


async def test_web_fetch_turns_a_missing_page_into_an_external_error(tmp_path, local_site):
    site = await local_site({"/": answer("here")})
    with pytest.raises(ToolExternalError, match="404") as raised:
        await web_fetch.build().execute(docs_ctx(tmp_path), url=f"http://docs.test:{site.port}/nope")
    assert "check the URL" in raised.value.llm_hint


async def test_web_fetch_example_is_refused_identically_by_execute_and_dry_run(tmp_path):
    transport = RecordingTransport()
    ctx = make_ctx(tmp_path, transport=transport, resolver=FakeResolver({}))
    tool = web_fetch.build()
    errors = []
    for method in (tool.execute, tool.dry_run):
        with pytest.raises(ToolPermissionError) as refused:
            await method(ctx, **tool.examples[0])
        errors.append(refused.value.to_error())
    assert errors[0] == errors[1]
    assert transport.requests == []


# --- http_request ---------------------------------------------------------------------------


def api_handler():
    async def handler(request: web.Request) -> web.Response:
        body = await request.read()
        return web.json_response(
            {"method": request.method, "got": body.decode(), "type": request.headers.get("Content-Type")},
            status=201,
            headers={"Set-Cookie": "session=abc", "X-RateLimit-Remaining": "9", "X-Internal": "x"})
    return handler


async def test_http_request_posts_json_and_returns_status_headers_and_body(tmp_path, local_site):
    site = await local_site({"/notes": api_handler()})
    tool = http_request.build(make_config(tmp_path))
    result = await tool.execute(docs_ctx(tmp_path), method="POST", url=f"http://docs.test:{site.port}/notes",
                                json={"text": "buy milk"}, headers={"X-Trace": "t1"})
    assert result["status"] == 201
    echoed = json.loads(result["body"])
    assert echoed == {"method": "POST", "got": '{"text": "buy milk"}', "type": "application/json"}
    assert result["headers"]["x-ratelimit-remaining"] == "9"
    assert "set-cookie" not in result["headers"] and "x-internal" not in result["headers"]
    assert site.seen[0]["headers"]["X-Trace"] == "t1"


async def test_http_request_dry_run_describes_without_sending(tmp_path, local_site):
    site = await local_site({"/notes": api_handler()})
    tool = http_request.build(make_config(tmp_path))
    preview = await tool.dry_run(docs_ctx(tmp_path), method="PUT", url=f"http://docs.test:{site.port}/notes",
                                 body="x" * 342, headers={"Authorization": "Bearer secret-value"})
    assert preview["summary"] == (
        f"PUT http://docs.test:{site.port}/notes (342 bytes) with header Authorization")
    assert "secret-value" not in json.dumps(preview)
    assert site.seen == []


async def test_http_request_dry_run_refuses_an_internal_literal_up_front(tmp_path):
    tool = http_request.build(make_config(tmp_path))
    with pytest.raises(ToolPermissionError):
        await tool.dry_run(make_ctx(tmp_path), method="POST", url="http://[::ffff:169.254.169.254]/",
                           body="x")


async def test_http_request_does_not_resend_a_body_through_a_redirect(tmp_path, local_site):
    async def elsewhere(request: web.Request) -> web.Response:
        return web.Response(status=307, headers={"Location": "/other"})

    site = await local_site({"/submit": elsewhere, "/other": api_handler()})
    tool = http_request.build(make_config(tmp_path))
    result = await tool.execute(docs_ctx(tmp_path), method="POST", url=f"http://docs.test:{site.port}/submit",
                                body="payload")
    assert result["status"] == 307
    assert result["headers"]["location"] == "/other"
    assert site.paths() == ["/submit"]


@pytest.mark.parametrize(("args", "message"), [
    ({"method": "POST", "body": "a", "json": {"a": 1}}, "either `body` or `json`"),
    ({"method": "GET", "body": "a"}, "cannot carry a body"),
    ({"method": "POST", "headers": {"Host": "evil.test"}}, "cannot be set"),
    ({"method": "POST", "headers": {"Transfer-Encoding": "chunked"}}, "cannot be set"),
    ({"method": "POST", "headers": {"X-A": "1\r\nX-Injected: 2"}}, "line break"),
    ({"method": "POST", "headers": {"X-A": "caf\u00e9"}}, "non-ASCII"),
])
async def test_http_request_refuses_bad_arguments_before_sending(tmp_path, args, message):
    transport = RecordingTransport()
    ctx = make_ctx(tmp_path, transport=transport, resolver=FakeResolver({"api.test": ["93.184.216.34"]}))
    tool = http_request.build(make_config(tmp_path))
    for method in (tool.execute, tool.dry_run):
        with pytest.raises(ToolInvalidArgsError, match=message):
            await method(ctx, url="https://api.test/x", **args)
    assert transport.requests == []


@pytest.mark.parametrize(("method", "url", "risk"), [
    ("GET", "https://api.example.com/v1/items", "low"),
    ("GET", "https://example.com/", "low"),
    ("GET", "https://EXAMPLE.com./x", "low"),
    ("GET", "https://notexample.com/", "medium"),
    ("GET", "https://example.com.evil.test/", "medium"),
    ("GET", "https://203.0.113.9/", "medium"),
    ("GET", "not a url", "high"),
    ("POST", "https://api.example.com/v1/items", "high"),
    ("DELETE", "https://example.com/x", "high"),
    ("PATCH", "https://other.test/", "high"),
])
def test_http_request_risk_depends_on_method_and_domain(tmp_path, method, url, risk):
    config = make_config(tmp_path, {"tools": {"net": {"allow_domains": ["example.com"]}}})
    assert risk_of(http_request.build(config), {"method": method, "url": url}) == risk


# --- web_search -----------------------------------------------------------------------------

BRAVE_ANSWER = {"web": {"results": [
    {"title": "Tomato <strong>care</strong>", "url": "https://garden.test/tomato",
     "description": "How to &amp; when to water <strong>tomatoes</strong>."},
    {"title": "Not a web link", "url": "javascript:alert(1)", "description": "x"},
    {"title": "Second", "url": "https://other.test/2", "description": "More."},
]}}


def search_config(tmp_path, port: int, **search):
    return make_config(
        tmp_path,
        {"tools": {"web_search": {"brave_url": f"http://search.test:{port}/res/v1/web/search", **search}}},
        env={"PATH": "/usr/bin:/bin", "BRAVE_API_KEY": "brave-key-123456"},
    )


def search_ctx(tmp_path):
    return make_ctx(tmp_path, allow_hosts=["search.test"],
                    resolver=FakeResolver({"search.test": ["127.0.0.1"], "searx.lan": ["192.168.1.20"]}))


async def test_web_search_queries_brave_with_the_key_and_returns_plain_results(tmp_path, local_site):
    async def brave(request: web.Request) -> web.Response:
        return web.json_response(BRAVE_ANSWER)

    site = await local_site({"/res/v1/web/search": brave})
    tool = web_search.build(search_config(tmp_path, site.port))
    result = await tool.execute(search_ctx(tmp_path), query="  tomato   care ", count=2)
    assert result["provider"] == "brave"
    assert result["results"] == [
        {"title": "Tomato care", "url": "https://garden.test/tomato",
         "snippet": "How to & when to water tomatoes."},
        {"title": "Second", "url": "https://other.test/2", "snippet": "More."},
    ]
    (seen,) = site.seen
    assert seen["path"] == "/res/v1/web/search?q=tomato+care&count=2"
    assert seen["headers"]["X-Subscription-Token"] == "brave-key-123456"
    assert "brave-key-123456" not in repr(tool.provider)


async def test_web_search_uses_a_searxng_instance(tmp_path, local_site):
    async def searx(request: web.Request) -> web.Response:
        return web.json_response({"results": [
            {"title": "Searx hit", "url": "https://hit.test/", "content": "A <em>match</em>."}]})

    site = await local_site({"/search": searx})
    config = make_config(tmp_path, {"tools": {"web_search": {
        "provider": "searxng", "searxng_url": f"http://search.test:{site.port}/"}}}, env={"PATH": "/bin"})
    result = await web_search.build(config).execute(search_ctx(tmp_path), query="hit")
    assert result == {"query": "hit", "provider": "searxng",
                      "results": [{"title": "Searx hit", "url": "https://hit.test/", "snippet": "A match."}]}
    assert site.paths() == ["/search?q=hit&format=json"]


async def test_a_searxng_instance_on_a_private_address_needs_the_allow_list(tmp_path):
    config = make_config(tmp_path, {"tools": {"web_search": {
        "provider": "searxng", "searxng_url": "http://searx.lan:8888"}}}, env={"PATH": "/bin"})
    with pytest.raises(ToolPermissionError) as refused:
        await web_search.build(config).execute(search_ctx(tmp_path), query="anything")
    assert "allow_hosts" in refused.value.llm_hint and "SearXNG" in refused.value.llm_hint


@pytest.mark.parametrize(("status", "error"), [(401, ToolExternalError), (429, ToolQuotaError)])
async def test_web_search_explains_provider_refusals(tmp_path, local_site, status, error):
    async def refuse(request: web.Request) -> web.Response:
        return web.json_response({"error": "no"}, status=status)

    site = await local_site({"/res/v1/web/search": refuse})
    tool = web_search.build(search_config(tmp_path, site.port))
    with pytest.raises(error):
        await tool.execute(search_ctx(tmp_path), query="tomato")


async def test_web_search_refuses_a_blank_query_before_any_request(tmp_path):
    transport = RecordingTransport()
    tool = web_search.build(search_config(tmp_path, 1))
    with pytest.raises(ToolInvalidArgsError):
        await tool.execute(make_ctx(tmp_path, transport=transport), **tool.examples[0])
    assert transport.requests == []


@pytest.mark.parametrize("settings", [{}, {"provider": "searxng"}, {"provider": "brave"}])
def test_web_search_is_unavailable_until_configured(tmp_path, settings):
    config = make_config(tmp_path, {"tools": {"web_search": settings}}, env={"PATH": "/bin"})
    with pytest.raises(ToolUnavailable, match="set BRAVE_API_KEY or configure"):
        web_search.build(config)
