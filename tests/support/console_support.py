"""What the console tests share: a real App with the console on 127.0.0.1 (port 0), and a small
HTTP client that keeps the session cookie and the page's CSRF token like a browser would."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import aiohttp

CONSOLE = {"console": {"enabled": True, "port": 0}}
CSRF_FIELD = re.compile(r'name="csrf" value="([0-9a-f]{64})"')


@dataclass
class Page:
    status: int
    text: str
    headers: Any


class ConsoleClient:
    """HTTP against the console with aiohttp; redirects are not followed unless asked."""

    def __init__(self, base: str, http: aiohttp.ClientSession):
        self.base = base
        self.http = http
        self.cookie: str | None = None

    @property
    def _headers(self) -> dict[str, str]:
        return {"Cookie": f"myclaw_console={self.cookie}"} if self.cookie else {}

    async def get(self, path: str, **params: str) -> Page:
        async with self.http.get(self.base + path, params=params, headers=self._headers,
                                 allow_redirects=False) as response:
            return Page(response.status, await response.text(), response.headers)

    async def post(self, path: str, data: dict[str, str], headers: dict[str, str] | None = None) -> Page:
        async with self.http.post(self.base + path, data=data, allow_redirects=False,
                                  headers={**self._headers, **(headers or {})}) as response:
            return Page(response.status, await response.text(), response.headers)

    async def login(self, token: str) -> Page:
        async with self.http.get(f"{self.base}/login/{token}", allow_redirects=False) as response:
            page = Page(response.status, await response.text(), response.headers)
            morsel = response.cookies.get("myclaw_console")
            if morsel is not None and morsel.value:
                self.cookie = morsel.value
            return page

    async def csrf(self, path: str = "/") -> str:
        page = await self.get(path)
        match = CSRF_FIELD.search(page.text)
        assert match, f"no CSRF token on {path} ({page.status})"
        return match.group(1)

    async def act(self, path: str, data: dict[str, str], page: str = "/") -> Page:
        """A form sent from `page` (with its CSRF token); returns the page it redirects to."""
        sent = await self.post(path, {"csrf": await self.csrf(page), **data})
        assert sent.status == 303, (sent.status, sent.text)
        return await self.get(sent.headers["Location"])


async def open_console(app: Any, http: aiohttp.ClientSession) -> ConsoleClient:
    await app.start_services()
    console = app.console
    return ConsoleClient(f"http://127.0.0.1:{console.port}", http)


async def logged_in(app: Any, http: aiohttp.ClientSession) -> ConsoleClient:
    client = await open_console(app, http)
    token = await app.console.context.auth.issue_login()
    assert (await client.login(token)).status == 303
    return client
