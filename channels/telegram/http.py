"""The HTTP transport python-telegram-bot sends Bot API requests through: aiohttp, not httpx.

PTB's default `HTTPXRequest` keeps a pool of up to 256 connections, and httpcore scans every
pooled connection on each request, so one request costs more the more connections the pool
holds. With a hundred chats answered at once that scanning alone took about a fifth of the
bot's CPU time (bench/telegram.py, measured with py-spy), and httpx is also the costlier client
per request. aiohttp hands out idle connections in O(1); the model client already uses it for
the same reason (bot/llm/client.py).

Kept from `HTTPXRequest`: PTB's default timeouts (connect 5 s plus up to 1 s waiting for a free
connection, read 5 s; PTB adds the long-poll time to getUpdates' read timeout itself), form
encoding (multipart when files are attached), HTTP(S)_PROXY / NO_PROXY from the environment,
`TimedOut` for a timeout and `NetworkError` for any other transport failure. aiohttp has no
write timeout: a request that cannot be written in time ends at the read timeout instead.

The proxy is looked up once per host, not with aiohttp's `trust_env`, which reads the proxy
variables and ~/.netrc in a worker thread on every request.
"""

from __future__ import annotations

import urllib.request
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, RequestData

DEFAULT_POOL_SIZE = 256   # PTB's own default for the bot's requests (getUpdates uses 1)
_DefaultValue = type(BaseRequest.DEFAULT_NONE)


def _value(given: Any, default: float | None) -> float | None:
    """A timeout PTB passed, or ours when it passed one of its DefaultValue placeholders."""
    return default if isinstance(given, _DefaultValue) else given


class AiohttpRequest(BaseRequest):
    def __init__(self, *, connection_pool_size: int = DEFAULT_POOL_SIZE,
                 read_timeout: float | None = 5.0, connect_timeout: float | None = 5.0,
                 pool_timeout: float | None = 1.0):
        self._pool_size = connection_pool_size
        self._read_timeout = read_timeout
        self._connect_timeout = connect_timeout
        self._pool_timeout = pool_timeout
        self._session: aiohttp.ClientSession | None = None
        self._proxies: dict[tuple[str, str], str | None] = {}

    @property
    def read_timeout(self) -> float | None:
        return self._read_timeout

    async def initialize(self) -> None:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._pool_size),
                headers={"User-Agent": self.USER_AGENT})

    async def shutdown(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()

    async def do_request(self, url: str, method: str, request_data: RequestData | None = None,
                         read_timeout: Any = BaseRequest.DEFAULT_NONE,
                         write_timeout: Any = BaseRequest.DEFAULT_NONE,
                         connect_timeout: Any = BaseRequest.DEFAULT_NONE,
                         pool_timeout: Any = BaseRequest.DEFAULT_NONE) -> tuple[int, bytes]:
        if self._session is None or self._session.closed:
            raise RuntimeError("This AiohttpRequest is not initialized!")
        connect = _value(connect_timeout, self._connect_timeout)
        pool = _value(pool_timeout, self._pool_timeout)
        timeout = aiohttp.ClientTimeout(
            total=None, sock_read=_value(read_timeout, self._read_timeout), sock_connect=connect,
            # aiohttp's `connect` covers waiting for a free pooled connection and connecting.
            connect=None if connect is None or pool is None else connect + pool)
        try:
            async with self._session.request(method, url, data=_body(request_data),
                                             proxy=self._proxy_for(url),
                                             timeout=timeout) as response:
                return response.status, await response.read()
        except TimeoutError as exc:   # aiohttp's timeout errors are TimeoutErrors too
            raise TimedOut from exc
        except aiohttp.ClientError as exc:
            raise NetworkError(f"aiohttp.{type(exc).__name__}: {exc}") from exc


    def _proxy_for(self, url: str) -> str | None:
        parts = urlsplit(url)
        key = (parts.scheme, parts.hostname or "")
        if key not in self._proxies:
            proxies = urllib.request.getproxies_environment()
            proxy = proxies.get(parts.scheme) or proxies.get("all")
            if proxy and urllib.request.proxy_bypass_environment(key[1], proxies):
                proxy = None
            self._proxies[key] = proxy
        return self._proxies[key]


def _body(request_data: RequestData | None) -> dict[str, str] | aiohttp.FormData | None:
    """Form-encoded parameters, or multipart with the files when there are any."""
    if request_data is None:
        return None
    parameters = request_data.json_parameters
    files = request_data.multipart_data
    if not files:
        return parameters
    form = aiohttp.FormData()
    for name, value in parameters.items():
        form.add_field(name, value)
    for name, (filename, content, mimetype) in files.items():
        form.add_field(name, content, filename=filename, content_type=mimetype)
    return form
