"""Per-message overhead of the store: the whole runtime on PostgreSQL versus SQLite, against the
fake Anthropic (separate process, zero delay, one tool call per turn: two model calls, history,
audit, receipt and usage writes).

    .venv/bin/python bench/replicas.py [--turns 300] [--url postgresql://...]

Target: PostgreSQL p50 within 2× of SQLite's. PostgreSQL runs in a throw-away schema of the
server at --url (default: the test server, or MYCLAW_TEST_DATABASE_URL), dropped afterwards.

Only the single-process figure exists yet: the replica figures of the issue (messages per second
with one and two `myclaw run`, 1,000 chats under a 1 s model) need replica coordination, which
is not built (README, "Running more than one replica").
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import time

from _common import NullSink, fake_anthropic, make_config, percentile, summary

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"


async def turns_ms(config, turns: int, warmup: int) -> list[float]:
    from bot.app import App
    from bot.events import IncomingMessage

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


async def run(url: str, turns: int, warmup: int) -> None:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--url", default=os.environ.get("MYCLAW_TEST_DATABASE_URL", DEFAULT_URL))
    args = parser.parse_args()
    asyncio.run(run(args.url, args.turns, args.warmup))


if __name__ == "__main__":
    main()
