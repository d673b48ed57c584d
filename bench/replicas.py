"""Replicas on PostgreSQL, against the fake Anthropic (its own process) and a fake Telegram:

1. per-message overhead of the store: the whole runtime in this process on PostgreSQL versus
   SQLite (zero delay, one tool call per turn: two model calls, history, audit, receipt and
   usage writes). Target: PostgreSQL p50 within 2x of SQLite's.
2. messages per second through one and through two real `myclaw run` processes in webhook mode
   on one schema, updates posted alternately to each (zero-delay model; 20 chats). Target: two
   replicas at least 1.5x one.
3. 1,000 chats, one message each, under a model that takes 1 s, through two replicas. Target:
   every answer within 1.5 s of the model time.

    .venv/bin/python bench/replicas.py [--turns 300] [--messages 400] [--chats 1000]
                                       [--only overhead|throughput|wide] [--profile]
                                       [--url postgresql://...]

PostgreSQL runs in throw-away schemas of the server at --url (default: the test server, or
MYCLAW_TEST_DATABASE_URL), dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import time

from _common import NullSink, fake_anthropic, make_config, percentile, summary
from _replicas import throughput_figures, wide_figures

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"


async def turns_ms(config, turns: int, warmup: int) -> list[float]:
    from bot.app import App
    from bot.core.events import IncomingMessage

    app = await App.open(config)
    samples: list[float] = []
    try:
        for i in range(warmup + turns):
            # Ten ongoing conversations, round robin: histories grow as in real use.
            message = IncomingMessage("cli:local", f"chat{i % 10}", f"what time is it? ({i})")
            started = time.perf_counter()
            await app.agent.handle(message, NullSink())
            if i >= warmup:
                samples.append((time.perf_counter() - started) * 1000)
    finally:
        await app.close()
    return samples


async def overhead(url: str, turns: int, warmup: int) -> None:
    import asyncpg

    schema = f"bench_{secrets.token_hex(4)}"
    conn = await asyncpg.connect(url)
    await conn.execute(f'CREATE SCHEMA "{schema}"')
    await conn.close()
    separator = "&" if "?" in url else "?"
    try:
        with fake_anthropic(responder="tool-then-text") as base_url:
            sqlite = await turns_ms(make_config(base_url), turns, warmup)
            pg_config = make_config(base_url, env={
                "MYCLAW_DATABASE_URL": f"{url}{separator}search_path={schema}"})
            postgres = await turns_ms(pg_config, turns, warmup)
    finally:
        conn = await asyncpg.connect(url)
        await conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        await conn.close()
    ratio = percentile(postgres, 50) / percentile(sqlite, 50)
    print(f"replicas (store overhead): {turns} turns on one process, each 2 model calls + 1 tool "
          f"call, fake model with zero delay")
    print(f"  SQLite     : {summary(sqlite)}")
    print(f"  PostgreSQL : {summary(postgres)}")
    print(f"  ratio (p50): {ratio:.2f}   target ≤ 2   {'OK' if ratio <= 2 else 'OVER TARGET'}")
    print(f"  PostgreSQL costs {percentile(postgres, 50) - percentile(sqlite, 50):.2f} ms more "
          f"per message (p50)")


async def run(args: argparse.Namespace) -> None:
    if args.only in (None, "overhead"):
        await overhead(args.url, args.turns, args.warmup)
    if args.only in (None, "throughput"):
        await throughput_figures(args.url, args.messages, chats=20, profile=args.profile)
    if args.only in (None, "wide"):
        await wide_figures(args.url, args.chats, model_seconds=1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--messages", type=int, default=400)
    parser.add_argument("--chats", type=int, default=1000)
    parser.add_argument("--only", choices=("overhead", "throughput", "wide"))
    parser.add_argument("--profile", action="store_true",
                        help="run the two replicas under cProfile and print where time goes")
    parser.add_argument("--url", default=os.environ.get("MYCLAW_TEST_DATABASE_URL", DEFAULT_URL))
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
