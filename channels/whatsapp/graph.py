"""The WhatsApp Cloud API (Meta's Graph API) over aiohttp: messages, media, the phone number.

    graph = Graph(base_url, "v23.0", phone_number_id, token); await graph.open()
    wamid = await graph.send({"to": "39347…", "type": "text", "text": {"body": "hi"}})

aiohttp rather than httpx or pywa: the webhook must be a route on our own aiohttp listener (pywa
serves its webhook through Flask or FastAPI and acknowledges before our inbox has stored the
delivery), and aiohttp's connection pool hands out idle connections in O(1), where httpx's cost
per request grows with the pool (measured for Telegram: channels/telegram/http.py).

Errors come back as `{"error": {"code", "message", "error_data": {"details"}}}`: a `GraphError`
carries the code, so callers can tell 131047 (outside the 24-hour window: only a template may be
sent) from the rest. Rate limits (130429, 131056, 80007, 4, or HTTP 429) and transient failures
(5xx, network) are retried a few times with backoff here; what still fails is raised.

The token is never logged, and a media URL gets it only where Meta's API would send us: the
configured API's own origin, https on Meta's hosts (lookaside.fbsbx.com and the like), or, when
the configured API is itself on this machine (a test fake, a local proxy), any loopback address
(127.0.0.1, ::1, localhost, on any port). A redirect elsewhere drops it (aiohttp).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from typing import Any
from urllib.parse import urlsplit

import aiohttp

log = logging.getLogger(__name__)

OUTSIDE_WINDOW = 131047
RATE_LIMITS = frozenset({4, 80007, 130429, 131056})
ATTEMPTS = 4
BACKOFF_SECONDS = 0.5
TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=5.0, sock_read=30.0)
UPLOAD_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=5.0, sock_read=120.0)
POOL_SIZE = 256
DEFAULT_PORTS = {"http": 80, "https": 443}
META_DOMAINS = ("fbsbx.com", "facebook.com", "fbcdn.net", "whatsapp.net", "whatsapp.com")


class GraphError(Exception):
    """The Graph API refused a request (or could not be reached: code 0)."""

    def __init__(self, code: int, message: str, status: int = 0):
        super().__init__(f"{message} (code {code})" if code else message)
        self.code = code
        self.status = status
        self.message = message

    @property
    def outside_window(self) -> bool:
        return self.code == OUTSIDE_WINDOW


def _error_of(status: int, body: Any) -> GraphError:
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return GraphError(429 if status == 429 else 0, f"HTTP {status}", status)
    details = (error.get("error_data") or {}).get("details") if isinstance(
        error.get("error_data"), dict) else ""
    message = str(error.get("message") or f"HTTP {status}")
    if details:
        message = f"{message}: {details}"
    code = error.get("code")
    return GraphError(int(code) if isinstance(code, int) else 0, message, status)


def _retryable(exc: GraphError) -> bool:
    return exc.code in RATE_LIMITS or exc.status == 429 or exc.status >= 500 or exc.code == 0


class Graph:
    def __init__(self, base_url: str, version: str, phone_number_id: str, token: str, *,
                 backoff: float | None = None):
        self.base = base_url.rstrip("/")
        self.version = version
        self.phone_number_id = str(phone_number_id)
        self._token = token
        self._backoff = BACKOFF_SECONDS if backoff is None else backoff
        self._session: aiohttp.ClientSession | None = None

    async def open(self) -> None:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=POOL_SIZE),
                headers={"Authorization": f"Bearer {self._token}"}, timeout=TIMEOUT)

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()

    def url(self, *parts: str) -> str:
        return "/".join((self.base, self.version, *parts))

    # --- requests -------------------------------------------------------------------------

    async def _once(self, method: str, url: str, **kwargs: Any) -> Any:
        assert self._session is not None, "Graph.open() first"
        try:
            async with self._session.request(method, url, **kwargs) as response:
                try:
                    body = await response.json(content_type=None)
                except ValueError:
                    body = None
                if response.status >= 400:
                    raise _error_of(response.status, body)
                return body
        except (aiohttp.ClientError, TimeoutError) as exc:
            # The class only: an aiohttp message may quote the URL.
            raise GraphError(0, f"cannot reach the Graph API ({type(exc).__name__})") from exc

    async def request(self, method: str, url: str, **kwargs: Any) -> Any:
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self._once(method, url, **kwargs)
            except GraphError as exc:
                if not _retryable(exc) or attempt >= ATTEMPTS:
                    raise
                log.info("whatsapp: %s; retrying (attempt %d)", exc, attempt + 1)
                await asyncio.sleep(self._backoff * 2 ** (attempt - 1))   # backoff, as Meta asks

    async def send(self, message: dict[str, Any]) -> str:
        """POST /{phone}/messages; the new message's id (wamid)."""
        body = {"messaging_product": "whatsapp", "recipient_type": "individual", **message}
        answer = await self.request("POST", self.url(self.phone_number_id, "messages"), json=body)
        messages = answer.get("messages") if isinstance(answer, dict) else None
        if not messages or not isinstance(messages[0], dict):
            raise GraphError(0, "the Graph API answered without a message id")
        return str(messages[0].get("id", ""))

    async def mark_read(self, message_id: str, *, typing: bool) -> None:
        """A read receipt for `message_id`, with the typing indicator when asked (best effort)."""
        body: dict[str, Any] = {"messaging_product": "whatsapp", "status": "read",
                                "message_id": message_id}
        if typing:
            body["typing_indicator"] = {"type": "text"}
        try:
            await self._once("POST", self.url(self.phone_number_id, "messages"), json=body)
        except GraphError as exc:
            log.debug("whatsapp: read receipt for a message not sent: %s", exc)

    async def upload(self, name: str, data: bytes, media_type: str) -> str:
        """POST /{phone}/media (multipart); the media id."""
        form = aiohttp.FormData()
        form.add_field("messaging_product", "whatsapp")
        form.add_field("type", media_type)
        form.add_field("file", data, filename=name, content_type=media_type)
        answer = await self.request("POST", self.url(self.phone_number_id, "media"), data=form,
                                    timeout=UPLOAD_TIMEOUT)
        if not isinstance(answer, dict) or not answer.get("id"):
            raise GraphError(0, "the Graph API answered an upload without a media id")
        return str(answer["id"])

    async def media_info(self, media_id: str) -> dict[str, Any]:
        """GET /{media-id}: url, mime_type, sha256, file_size."""
        answer = await self.request("GET", self.url(media_id))
        if not isinstance(answer, dict) or not isinstance(answer.get("url"), str):
            raise GraphError(0, "the Graph API answered a media lookup without a URL")
        return answer

    async def download(self, url: str, limit: int) -> bytes | None:
        """The bytes at a media URL the API gave (None when larger than `limit`)."""
        assert self._session is not None
        if not may_carry_token(url, self.base):
            host = urlsplit(url).hostname or "?"
            raise GraphError(0, f"the media URL's host ({host}) is not one the access token may "
                                "be sent to (the API's own, Meta's over https, or loopback for a "
                                "local API)")
        try:
            async with self._session.get(url, timeout=UPLOAD_TIMEOUT) as response:
                if response.status >= 400:
                    raise GraphError(0, f"media download answered HTTP {response.status}",
                                     response.status)
                data = bytearray()
                async for chunk in response.content.iter_chunked(1 << 16):
                    data += chunk
                    if len(data) > limit:
                        return None
                return bytes(data)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise GraphError(0, f"media download failed ({type(exc).__name__})") from exc

    async def phone_number(self) -> dict[str, Any]:
        """GET /{phone-number-id}: proves the token and the id (doctor, start-up)."""
        answer = await self.request("GET", self.url(self.phone_number_id), params={
            "fields": "display_phone_number,verified_name"})
        return answer if isinstance(answer, dict) else {}

    async def subscribed_apps(self, business_account_id: str) -> list[dict[str, Any]]:
        answer = await self.request("GET", self.url(business_account_id, "subscribed_apps"))
        data = answer.get("data") if isinstance(answer, dict) else None
        return data if isinstance(data, list) else []


def _loopback(host: str | None) -> bool:
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _meta_host(host: str | None) -> bool:
    host = (host or "").lower().rstrip(".")
    return any(host == domain or host.endswith("." + domain) for domain in META_DOMAINS)


def may_carry_token(url: str, base: str) -> bool:
    """Whether a media URL the API answered may be fetched with the access token."""
    try:
        parts, api = urlsplit(url), urlsplit(base)
        if parts.scheme not in DEFAULT_PORTS:
            return False
        if (parts.scheme, parts.hostname, parts.port or DEFAULT_PORTS[parts.scheme]) == (
                api.scheme, api.hostname, api.port or DEFAULT_PORTS.get(api.scheme)):
            return True
        if parts.scheme == "https" and _meta_host(parts.hostname):
            return True
        return _loopback(api.hostname) and _loopback(parts.hostname)
    except ValueError:   # a port out of range, a malformed address
        return False
