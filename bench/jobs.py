"""Scheduled jobs at scale: 10,000 jobs in the store.

    .venv/bin/python bench/jobs.py [--jobs 10000] [--rounds 200]

Prints the time of one scheduler lookup of due jobs (target: under 5 ms per tick) and the
start-up time of the whole app (App.open + services, the scheduler's first tick included) with
those jobs against an empty store (target: within 10%).
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import time

from _common import make_config, percentile

START = 1_796_126_400.0


async def fill(path_config, count: int, due: int) -> None:
    from bot.store.sqlite import Store

    async with Store(path_config.store_path) as store:
        async with store.transaction() as tx:
            rows = []
            for n in range(count):
                next_run = START - 60 if n < due else START + 3600 + n
                rows.append((secrets.token_hex(5), f"telegram:{n % 500}", "telegram", str(n),
                             f"job {n}", "", "hi", "cron", "0 * * * *", "UTC", "full", "[]",
                             next_run, START))
            await tx.executemany(
                "INSERT INTO jobs(id, owner, channel, chat, name, prompt, message, kind, spec,"
                " timezone, level, tools, status, next_run, failures, last_outcome, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'active', ?, 0, '', ?)", rows)


async def lookup(config, rounds: int) -> list[float]:
    from bot.jobs.jobs import Jobs
    from bot.store.sqlite import Store

    times = []
    async with Store(config.store_path) as store:
        jobs = Jobs(store, clock=lambda: START)
        for _ in range(rounds):
            began = time.perf_counter()
            await jobs.due(START)
            await jobs.next_due_at()
            times.append((time.perf_counter() - began) * 1000)
    return times


async def startup(config) -> float:
    from bot.app import App

    began = time.perf_counter()
    app = await App.open(config, clock=lambda: START - 7200)  # nothing due yet: no model calls
    await app.start_services()
    elapsed = time.perf_counter() - began
    await app.close()
    return elapsed * 1000


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    base = "http://127.0.0.1:9"  # never called: nothing is due during start-up
    empty, full = make_config(base), make_config(base)
    await fill(full, args.jobs, due=20)
    lookups = await lookup(full, args.rounds)
    empty_times = [await startup(empty) for _ in range(5)]
    full_times = [await startup(full) for _ in range(5)]
    print(f"{args.jobs:,} jobs in the store, 20 due")
    print(f"  due-job lookup per tick : p50 {percentile(lookups, 50):.2f} ms  "
          f"p99 {percentile(lookups, 99):.2f} ms   target < 5 ms")
    e, f = percentile(empty_times, 50), percentile(full_times, 50)
    print(f"  start-up (median of 5)  : empty {e:.1f} ms, with jobs {f:.1f} ms, "
          f"ratio {f / e:.2f}   target ≤ 1.10")


if __name__ == "__main__":
    asyncio.run(main())
