"""Headless Chromium (Debian's package, never a downloaded build) driven by Playwright for Python.

Playwright's sync API runs on one thread of its own, so the tests' event loop keeps serving the
console while the browser works: `await browser.run(fn, *args)` runs `fn` on that thread.
Without chromium or the playwright package the tests skip with the reason — except under
CI=true, where a missing browser is a failure, not a skip.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "console"
NARROW, PHONE, DESKTOP = 320, 390, 1280   # the narrowest phone screens, a common one, a laptop
T = TypeVar("T")


def unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"browser tests cannot run under CI: {reason}")
    pytest.skip(f"browser tests skipped: {reason}")


class Browser:
    def __init__(self) -> None:
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="playwright")
        self._playwright: Any = None
        self.chromium: Any = None

    def start(self) -> None:
        def launch() -> None:
            from playwright.sync_api import sync_playwright

            self._playwright = sync_playwright().start()
            self.chromium = self._playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        self._thread.submit(launch).result(timeout=60)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn, *args)

    def close(self) -> None:
        def stop() -> None:
            if self.chromium is not None:
                self.chromium.close()
            if self._playwright is not None:
                self._playwright.stop()
        self._thread.submit(stop).result(timeout=60)
        self._thread.shutdown()


def open_browser() -> Browser:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        unavailable("the playwright package is not installed (pip install -e '.[dev]')")
    if not os.access(CHROMIUM, os.X_OK):
        unavailable(f"no {CHROMIUM} (`make test` installs Debian's chromium when run as root)")
    browser = Browser()
    try:
        browser.start()
    except Exception as exc:  # a browser that cannot start is reported like a missing one
        browser.close()
        unavailable(f"{CHROMIUM} did not start: {exc}")
    return browser


class Watched:
    """A page with everything that would show a script ran: dialogs, console errors, page errors."""

    def __init__(self, page: Any):
        self.page = page
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        page.on("dialog", self._on_dialog)
        page.on("console", lambda msg: self.errors.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))

    def _on_dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()


def new_page(browser: Browser, width: int, locale: str = "en-US",
             zone: str | None = None) -> Watched:
    """Call on the browser thread. A fresh context: no cookies shared between pages. `locale`
    is the browser's language (its Accept-Language), `zone` its time zone."""
    height = 900 if width == DESKTOP else 844
    context = browser.chromium.new_context(viewport={"width": width, "height": height},
                                           locale=locale, timezone_id=zone)
    context.set_default_timeout(10_000)
    return Watched(context.new_page())


def screenshot(watched: Watched, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    watched.page.screenshot(path=str(path), full_page=True)
    return path
