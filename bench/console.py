"""How long the web console takes to answer its heaviest pages, with the event loop's worst
stall while it does.

A real App (store in a temporary directory; no model call is made) serves the console on
127.0.0.1; the store holds N pending approvals with 3,000-character previews (the longest a
request shows in one Telegram message) and 10,000 audit rows, of which the audit page shows the
newest 200. Each page is fetched --runs times over HTTP with a session cookie; the median and
the worst time are printed, and the longest gap a 1 ms ticker saw on the loop meanwhile (the
templates render on a worker thread, so a big page must not stall other sessions' turns).

    .venv/bin/python bench/console.py [--approvals 50] [--runs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot import config as config_mod  # noqa: E402
from bot.app import App  # noqa: E402
from bot.ops.surfaces import OPERATOR_SURFACES  # noqa: E402
from bot.store.audit import AuditEntry, write_audit  # noqa: E402

PAGES = ("/", "/audit", "/usage", "/health")


async def seed(app: App, approvals: int) -> None:
    preview = ("line of a shell command preview with <tags> & quotes \"x\"\n" * 60)[:3000]
    for n in range(approvals):
        await app.services.approvals.create(
            session_id=f"s{n}", sender=f"telegram:{n}", chat=str(n), channel="telegram",
            tool="shell_run", tool_use_id=f"t{n}", args={"command": f"echo {n}"}, risk="high",
            summary=preview)
    async with app.services.store.transaction() as tx:
        for n in range(10_000):
            await write_audit(tx, AuditEntry(sender=f"telegram:{n % 50}", decision="ask",
                                             outcome="approved", tool="fs_write",
                                             detail=f"wrote file {n} " + "x" * 200))


async def ticker(worst: list[float], stop: asyncio.Event) -> None:
    last = time.perf_counter()
    while not stop.is_set():
        await asyncio.sleep(0.001)
        now = time.perf_counter()
        worst[0] = max(worst[0], now - last)
        last = now


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = config_mod.from_dict(
            {"agent": {"workspace": f"{tmp}/ws"}, "store": {"path": f"{tmp}/myclaw.db"},
             "console": {"enabled": True, "port": 0}},
            env={"HOME": tmp, "ANTHROPIC_API_KEY": "unused", "PATH": "/usr/bin:/bin"})
        app = await App.open(config, surfaces=OPERATOR_SURFACES)
        try:
            await app.start_services()
            await seed(app, args.approvals)
            console = app.console
            base = f"http://127.0.0.1:{console.port}"
            token = await console.context.auth.issue_login()
            async with aiohttp.ClientSession() as http:
                async with http.get(f"{base}/login/{token}", allow_redirects=False) as response:
                    cookie = response.cookies["myclaw_console"].value
                headers = {"Cookie": f"myclaw_console={cookie}"}
                print(f"console pages, {args.approvals} pending approvals, 10,000 audit rows, "
                      f"{args.runs} runs each")
                for path in PAGES:
                    times, worst, stop = [], [0.0], asyncio.Event()
                    tick = asyncio.create_task(ticker(worst, stop))
                    for _ in range(args.runs):
                        started = time.perf_counter()
                        async with http.get(base + path, headers=headers) as response:
                            body = await response.read()
                            assert response.status == 200, (path, response.status)
                        times.append(time.perf_counter() - started)
                    stop.set()
                    await tick
                    median, slowest = statistics.median(times) * 1000, max(times) * 1000
                    print(f"  {path:<8} {len(body) / 1024:7.0f} KiB  median {median:6.1f} ms"
                          f"  worst {slowest:6.1f} ms  longest loop stall {worst[0] * 1000:5.1f} ms")
        finally:
            await app.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--approvals", type=int, default=50)
    parser.add_argument("--runs", type=int, default=20)
    asyncio.run(main(parser.parse_args()))
