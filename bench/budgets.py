"""What spend caps and rate limits cost a message.

    .venv/bin/python bench/budgets.py [--senders 10000] [--rows 200000] [--turns 1000]
                                      [--postgres postgresql://postgres@127.0.0.1:5432/test]

1. The budget check before a model call, once the sender's totals are known (kept in memory
   and updated as rows are written): p50/p99 (target: under 20 µs).
2. The first look at a sender in a day, one SUM over their usage rows, with `--rows` usage
   rows of `--senders` senders in the store: p50/p99 (target: under 5 ms).
3. The rate-limit check of a message: in memory (one process on SQLite) and in the store (as
   replicas sharing PostgreSQL keep it; SQLite too, for comparison): p50/p99 (target: under
   2 ms on PostgreSQL).
4. Whole turns through the real App against the fake Anthropic (own process, zero delay) with
   budgets and the rate limit on and with both off: ratio of the p50s (target: ≤ 1.05).

PostgreSQL parts run in a schema created for the run and dropped after it, at `--postgres`
(default: the local test server); they are skipped, saying why, when no server answers.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import secrets
import time
from typing import Any

from _common import NullSink, fake_anthropic, make_config, percentile

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
USAGE_SQL = ("INSERT INTO usage(ts, session_id, sender, model, input_tokens, output_tokens,"
             " cache_read_tokens, cache_write_tokens, cost) VALUES (?, 's', ?, 'm', 0, 0, 0, 0, ?)")


def line(name: str, values: list[float], unit: str, target: str) -> None:
    scale = 1000.0 if unit == "µs" else 1.0
    print(f"  {name:<40}: p50 {percentile(values, 50) * scale:8.2f} {unit}  "
          f"p99 {percentile(values, 99) * scale:8.2f} {unit}   {target}")


async def fill(store: Any, senders: int, rows: int) -> None:
    now, rng = time.time(), random.Random(7)
    batch = [(now - rng.uniform(0, 20 * 86400), f"telegram:{rng.randrange(senders)}",
              rng.uniform(0.0001, 0.01)) for _ in range(rows)]
    async with store.transaction() as tx:
        await tx.executemany(USAGE_SQL, batch)


async def budget_checks(store: Any, config: Any, senders: int) -> tuple[list[float], list[float]]:
    """(first look per sender, later checks), in ms."""
    from bot.config.prices import PriceTable
    from bot.money.budgets import Budgets
    from bot.money.spend import SpendLedger

    budgets = Budgets(config, SpendLedger(store, PriceTable.from_config(config)))
    first, later = [], []
    for n in random.Random(3).sample(range(senders), 300):
        sender = f"telegram:{n}"
        for times in (first, later, later, later):
            began = time.perf_counter()
            await budgets.check(sender, "full")
            times.append((time.perf_counter() - began) * 1000)
    return first, later


async def rate_checks(limiter: Any, count: int = 2000) -> list[float]:
    times = []
    for n in range(count):
        began = time.perf_counter()
        await limiter.admit(f"telegram:{n % 50}")
        times.append((time.perf_counter() - began) * 1000)
    return times


async def store_parts(label: str, store: Any, config: Any, args: argparse.Namespace) -> None:
    from bot.access.ratelimit import StoredRateLimiter

    began = time.perf_counter()
    await fill(store, args.senders, args.rows)
    print(f"{label}: {args.rows:,} usage rows of {args.senders:,} senders "
          f"(filled in {time.perf_counter() - began:.1f} s)")
    first, later = await budget_checks(store, config, args.senders)
    line("budget check, totals known", later, "µs", "target < 20 µs")
    line("budget check, first look of the day", first, "ms", "target < 5 ms")
    per_minute = 1_000_000   # never refuses: every check writes the bucket
    line("rate limit, kept in the store", await rate_checks(StoredRateLimiter(store, per_minute)),
         "ms", "target < 2 ms on PostgreSQL")


async def sqlite_parts(args: argparse.Namespace) -> None:
    from bot.access.ratelimit import MessageRateLimiter
    from bot.store.sqlite import Store

    config = make_config("http://127.0.0.1:9")
    async with Store(config.store_path) as store:
        await store_parts("SQLite", store, config, args)
    line("rate limit, in memory", await rate_checks(MessageRateLimiter(1_000_000)), "µs",
         "(one process)")


async def postgres_parts(args: argparse.Namespace) -> None:
    try:
        import asyncpg

        from bot.store.postgres import PostgresStore
        conn = await asyncpg.connect(args.postgres, timeout=3)
    except Exception as exc:   # any failure to connect means: skip, and say why
        print(f"PostgreSQL: skipped ({type(exc).__name__}: no server at --postgres)")
        return
    schema = f"myclaw_bench_{secrets.token_hex(4)}"
    await conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        async with PostgresStore(args.postgres, schema=schema) as store:
            await store_parts("PostgreSQL", store, make_config("http://127.0.0.1:9"), args)
    finally:
        await conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        await conn.close()


async def turns(args: argparse.Namespace) -> None:
    """Both apps open at once, taking turns message by message: drift of the machine's speed
    falls on both alike."""
    from bot.app import App
    from bot.core.events import IncomingMessage
    from bot.ops.process import long_lived_heap

    settings = {
        "on": {"budgets": {"sender_daily": 1000.0, "sender_monthly": 10000.0,
                           "global_daily": 100000.0},
               "rate_limits": {"messages_per_minute": 1_000_000}},
        "off": {"budgets": {"sender_daily": 0, "sender_monthly": 0, "global_daily": 0,
                            "levels": {}},
                "rate_limits": {"messages_per_minute": 0}}}
    with fake_anthropic() as base_url:
        apps = {}
        with long_lived_heap():
            for name, overrides in settings.items():
                config = make_config(base_url, {**overrides, "senders": {"telegram:1": "full"}})
                apps[name] = await App.open(config)
        times: dict[str, list[float]] = {name: [] for name in apps}
        for i in range(args.turns + 20):
            for name, app in apps.items():
                message = IncomingMessage("telegram:1", f"chat{i % 10}", f"hello {i}")
                began = time.perf_counter()
                await app.agent.handle(message, NullSink())
                if i >= 20:
                    times[name].append((time.perf_counter() - began) * 1000)
        for app in apps.values():
            await app.close()
    on, off = percentile(times["on"], 50), percentile(times["off"], 50)
    print(f"Whole turns ({args.turns} each, one model call, alternating): p50 with budgets and "
          f"rate limit {on:.2f} ms, without {off:.2f} ms: ratio {on / off:.3f}   target ≤ 1.05")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--senders", type=int, default=10_000)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--postgres", default=DEFAULT_PG)
    args = parser.parse_args()
    await sqlite_parts(args)
    await postgres_parts(args)
    await turns(args)


if __name__ == "__main__":
    asyncio.run(main())
