"""The network guard: every outgoing HTTP request of the web tools goes through here.

Threat model: the model (or text it read) picks URLs. The guard must keep it away from the
machine itself, the LAN and the cloud metadata service, whatever the spelling of the address
and whatever DNS answers. So:

- only http/https, no userinfo, no control characters; numeric hosts are parsed the way
  `inet_aton` and browsers parse them (2130706433, 0177.0.0.1, 0x7f.1, 127.1) before checking;
- the host is resolved once (through `ctx.network.resolver` when present, else
  `loop.getaddrinfo`) and EVERY address must be globally routable unicast (an allow-list:
  tools/_globaladdr.py), so loopback, private, link-local, multicast, site-local, documentation,
  benchmarking, CGNAT and every other special-purpose range are refused, as are IPv6 forms
  carrying such an IPv4 address (mapped, NAT64, 6to4, Teredo);
- the request is sent to the address that was checked, with the original Host header and SNI
  name, so a second DNS answer (rebinding) cannot switch it;
- redirects are followed here, hop by hop, each one checked again (max 5);
- `[tools.net] allow_hosts` names hosts, IPs or networks the operator wants reachable anyway.

The pure parsing and address rules live in tools/_netaddr.py; this module does the I/O.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import re
import socket
import ssl
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import urljoin

import certifi
import httpx

from bot.core.tool import (
    CallContext,
    ToolExternalError,
    ToolInvalidArgsError,
    ToolNetworkError,
    ToolPermissionError,
)
from bot.language.phrase import Phrase
from tools._netaddr import (  # noqa: F401  (re-exported: callers import these from tools._netguard)
    DEFAULT_PORTS,
    AllowList,
    IPAddress,
    Target,
    allow_list,
    blocked_reason,
    domain_matches,
    embedded_ipv4,
    is_localhost_name,
    parse_ipv4_loose,
    parse_target,
)

Resolver = Callable[[str], Awaitable[list[str]]]

MAX_REDIRECTS = 5
REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})

# Headers that carry credentials: never forwarded when a redirect leaves the original origin.
CREDENTIAL_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})

PRIVATE_HINT = ("This address is private/internal, so the guard refused it. Use a public http(s) "
                "URL instead; if the user really wants this host reachable, the operator can add "
                "it to [tools.net] allow_hosts in the config.")


# --- policy ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Guard:
    """Per-call view of the network settings; built from the call context, never shared."""

    allow: AllowList
    resolver: Resolver
    timeout: float
    max_bytes: int
    transport: httpx.AsyncBaseTransport | None = None

    @classmethod
    def from_context(cls, ctx: CallContext) -> Guard:
        net = ctx.settings["tools"]["net"]
        return cls(
            allow=allow_list(tuple(net.get("allow_hosts", ()))),
            resolver=ctx.network.resolver or system_resolver,
            timeout=float(net["timeout_seconds"]),
            max_bytes=int(net["max_bytes"]),
            transport=ctx.network.http_transport,
        )

    def check_ip(self, host: str, ip: IPAddress) -> None:
        """Raise ToolPermissionError unless this address may be contacted for `host`."""
        if self.allow.allows_host(host) or self.allow.allows_ip(ip):
            return
        reason = blocked_reason(ip)
        if reason:
            raise ToolPermissionError(
                Phrase("Refused to contact {host}: {address} is {reason}.", host=host,
                       address=str(ip), reason=reason), PRIVATE_HINT,
                {"host": host, "address": str(ip), "reason": str(reason)})

    def check_literal(self, target: Target) -> None:
        """The checks that need no DNS: address literals and localhost names."""
        if target.ip is not None:
            self.check_ip(target.host, target.ip)
        elif is_localhost_name(target.host) and not self.allow.allows_host(target.host):
            raise ToolPermissionError(Phrase("Refused to contact {host}: it names this machine.",
                                             host=target.host),
                                      PRIVATE_HINT, {"host": target.host})

    async def resolve(self, target: Target) -> IPAddress:
        """The one address this request will use, after every answer for the host was checked."""
        self.check_literal(target)
        if target.ip is not None:
            return target.ip
        try:
            answers = await self.resolver(target.host)
            addresses = [ipaddress.ip_address(a) for a in answers]
        except (OSError, ValueError) as exc:
            raise ToolNetworkError(Phrase("Could not resolve {host}: {problem}.", host=target.host,
                                          problem=str(exc)),
                                   "Check the spelling of the host, or retry later.",
                                   {"host": target.host}) from exc
        if not addresses:
            raise ToolNetworkError(Phrase("Could not resolve {host}: no addresses.", host=target.host),
                                   "Check the spelling of the host.", {"host": target.host})
        for address in addresses:
            self.check_ip(target.host, address)
        return addresses[0]



async def system_resolver(host: str) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """Built on first use (not at import), then shared: loading the CA bundle costs ~10 ms."""
    return ssl.create_default_context(cafile=certifi.where())


# --- requests -------------------------------------------------------------------------------


@dataclass
class Fetched:
    url: str
    status: int
    headers: httpx.Headers
    body: bytes
    truncated: bool
    redirects: list[str] = field(default_factory=list)

    @property
    def shown_url(self) -> str:
        """The URL an error names: the one asked for. A redirect target is the remote side's
        text, and errors reach the model outside the untrusted wrapper."""
        if not self.redirects:
            return self.url
        count = len(self.redirects)
        return f"{self.redirects[0]} (after {count} redirect{'s' if count > 1 else ''})"

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    @property
    def charset(self) -> str | None:
        match = re.search(r"charset=[\"']?([\w.:-]+)", self.headers.get("content-type", ""), re.I)
        return match.group(1) if match else None


@dataclass
class Outgoing:
    method: str
    headers: dict[str, str]
    content: bytes | None = None


async def fetch(ctx: CallContext, method: str, url: str, *, headers: dict[str, str] | None = None,
                content: bytes | None = None, follow_redirects: bool = True,
                inspect: Callable[[httpx.Response], None] | None = None) -> Fetched:
    """Send one request through the guard and read at most `max_bytes` of the answer.

    `inspect` sees each final response before its body is read and may raise (e.g. to refuse a
    binary content type without downloading it).
    """
    guard = Guard.from_context(ctx)
    target = parse_target(url)
    outgoing = Outgoing(method.upper(), dict(headers or {}), content)
    try:
        async with asyncio.timeout(guard.timeout):
            return await _follow(guard, target, outgoing, follow_redirects, inspect)
    except (TimeoutError, httpx.TimeoutException) as exc:
        raise ToolNetworkError(Phrase("{host} did not answer within {seconds} s.", host=target.host,
                                      seconds=f"{guard.timeout:g}"),
                               "Retry once later, or try another source.",
                               {"url": target.url}) from exc
    except httpx.TransportError as exc:
        raise ToolNetworkError(Phrase("Could not talk to {host}: {problem}.", host=target.host,
                                      problem=_transport_problem(exc)),
                               "Check the URL, retry later, or tell the user the site is unreachable.",
                               {"url": target.url}) from exc


def _transport_problem(exc: httpx.TransportError) -> str:
    """What went wrong, without the remote side's words: errors reach the model unwrapped, and
    h11 quotes the offending status or header line ("illegal status line: b'...'") verbatim."""
    if isinstance(exc, httpx.ProtocolError | httpx.DecodingError):
        return Phrase("{error} (the server's answer is not valid HTTP)", error=type(exc).__name__)
    return f"{type(exc).__name__}: {str(exc)[:200]}"


def _client(guard: Guard) -> httpx.AsyncClient:
    # trust_env=False: no proxy variables, no .netrc — the request goes exactly where checked.
    return httpx.AsyncClient(transport=guard.transport, verify=_tls_context(), trust_env=False,
                             follow_redirects=False, timeout=guard.timeout)


async def _follow(guard: Guard, target: Target, outgoing: Outgoing, follow_redirects: bool,
                  inspect: Callable[[httpx.Response], None] | None) -> Fetched:
    hops: list[str] = []
    while True:
        address = await guard.resolve(target)
        # A fresh client (connection pool) per hop: pools are keyed by IP, and a TLS connection
        # verified for one host name must never carry a request for another.
        async with _client(guard) as client:
            request = _build_request(client, target, address, outgoing)
            response = await client.send(request, stream=True)
            async with contextlib.aclosing(response):
                location = response.headers.get("location")
                if not (follow_redirects and response.status_code in REDIRECT_CODES and location):
                    if inspect is not None:
                        inspect(response)
                    body, truncated = await _read_capped(response, guard.max_bytes)
                    return Fetched(target.url, response.status_code, response.headers, body, truncated,
                                   hops)
        if len(hops) >= MAX_REDIRECTS:
            raise ToolExternalError(Phrase("Too many redirects (more than {limit}).", limit=MAX_REDIRECTS),
                                    "The site redirects in a loop; try another URL.",
                                    {"url": target.url, "redirects": hops})
        hops.append(target.url)
        next_target = _redirect_target(target, location)
        outgoing = _redirected(outgoing, response.status_code, target, next_target)
        target = next_target


def _build_request(client: httpx.AsyncClient, target: Target, address: IPAddress,
                   outgoing: Outgoing) -> httpx.Request:
    """A request addressed to the checked IP, carrying the real host name in Host and SNI."""
    url = httpx.URL(target.url).copy_with(host=str(address))
    headers = {**outgoing.headers, "Host": target.netloc}
    extensions: dict[str, Any] = {}
    if target.scheme == "https" and target.ip is None:
        extensions["sni_hostname"] = target.host
    request = client.build_request(outgoing.method, url, headers=headers, content=outgoing.content)
    request.extensions.update(extensions)
    return request


def _redirect_target(target: Target, location: str) -> Target:
    """The next hop, judged like any other URL. The Location header is the remote side's text
    and an error reaches the model unwrapped, so a refusal names the reason, never the URL."""
    try:
        return parse_target(urljoin(target.url, location.strip()))
    except ValueError as exc:
        raise ToolExternalError(Phrase("{host} redirected to an invalid URL.", host=target.host),
                                "Try another URL.", {"url": target.url}) from exc
    except (ToolInvalidArgsError, ToolPermissionError) as exc:
        reason = (Phrase("a non-http(s) or credential-carrying URL")
                  if isinstance(exc, ToolPermissionError) else Phrase("a malformed URL"))
        raise type(exc)(Phrase("{host} redirected to {reason}, which is not followed.",
                               host=target.host, reason=reason),
                        "Try another URL or source.", {"url": target.url}) from exc


def _redirected(outgoing: Outgoing, status: int, old: Target, new: Target) -> Outgoing:
    method, content = outgoing.method, outgoing.content
    if (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST"):
        method, content = "GET", None
    headers = dict(outgoing.headers)
    if content is None:
        headers = {k: v for k, v in headers.items() if k.lower() not in ("content-type", "content-length")}
    if old.origin != new.origin:
        headers = {k: v for k, v in headers.items() if k.lower() not in CREDENTIAL_HEADERS}
    return Outgoing(method, headers, content)


class _Inflater:
    """A gzip/deflate decoder that never produces more than it is asked for.

    httpx's own decoders inflate each network chunk whole, and chain stacked encodings: 30 KB of
    `Content-Encoding: gzip, gzip` inflate to gigabytes in one call, before any cap could
    apply. Here every call is bounded by the room left under `max_bytes`.
    """

    def __init__(self, encoding: str):
        self.raw_fallback = encoding == "deflate"  # some servers send raw deflate, no zlib header
        self.started = False
        wbits = zlib.MAX_WBITS if encoding == "deflate" else 16 + zlib.MAX_WBITS
        self.decompressor = zlib.decompressobj(wbits)

    def decompress(self, data: bytes, room: int) -> tuple[bytes, bytes]:
        """(up to `room` bytes of output, the input not consumed yet)."""
        try:
            out = self.decompressor.decompress(data, room)
        except zlib.error:
            if not (self.raw_fallback and not self.started):
                raise
            self.decompressor = zlib.decompressobj(-zlib.MAX_WBITS)
            out = self.decompressor.decompress(data, room)
        self.started = True
        return out, self.decompressor.unconsumed_tail


def _inflater(response: httpx.Response) -> _Inflater | None:
    encodings = [value.strip().lower() for value in
                 response.headers.get_list("content-encoding", split_commas=True)]
    known = [e for e in encodings if e in ("gzip", "x-gzip", "deflate")]
    if len(known) > 1:
        raise ToolExternalError(Phrase("The server compressed its answer more than once, which is "
                                       "refused."),
                                "Try another URL or source.")
    return _Inflater("deflate" if known == ["deflate"] else "gzip") if known else None


async def _read_capped(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    """Read the (decoded) body until `max_bytes`, then stop: a huge or endless body, or a
    compression bomb, costs at most `max_bytes` of memory."""
    if response.is_stream_consumed:  # a transport that handed over a body it had already read
        body = response.content
        return body[:max_bytes], len(body) > max_bytes
    inflater = _inflater(response)
    body = bytearray()
    async for chunk in response.aiter_raw():
        if inflater is None:
            body += chunk
        else:
            pending = chunk
            try:
                while pending and len(body) <= max_bytes:
                    out, pending = inflater.decompress(pending, max_bytes + 1 - len(body))
                    body += out
            except zlib.error as exc:
                raise ToolExternalError(Phrase("The server sent a corrupt compressed answer."),
                                        "Retry once later, or try another source.") from exc
        if len(body) > max_bytes:
            return bytes(body[:max_bytes]), True
    return bytes(body), False


def raise_for_status(fetched: Fetched) -> None:
    """4xx → external_error, 5xx → network_error. The remote body and reason phrase are not
    repeated in the error: errors are not wrapped as untrusted, so remote text stays out."""
    status = fetched.status
    if status < 400:
        return
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "error"
    details = {"url": fetched.url, "status": status}
    if status < 500:
        raise ToolExternalError(Phrase("{url} answered HTTP {status} {reason}.",
                                       url=fetched.shown_url, status=status, reason=phrase),
                                _hint_for(status), details)
    raise ToolNetworkError(Phrase("{url} answered HTTP {status} {reason} (a server-side failure).",
                                  url=fetched.shown_url, status=status, reason=phrase),
                           "Retry once later, or use another source.", details)


def _hint_for(status: int) -> str:
    if status in (401, 403):
        return "The site refuses access without credentials; try another source or ask the user."
    if status == 404:
        return "The page does not exist; check the URL, search for the right one, or ask the user."
    if status == 429:
        return "The site is rate limiting; wait before retrying, or use another source."
    return "The site refused the request; check the URL and arguments, then adjust."
