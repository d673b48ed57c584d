"""Round trips to PostgreSQL per turn: a text turn (one model call) and a turn with one tool
call (two model calls), through the whole runtime on a PostgreSQL store, against the fake
Anthropic (separate process, zero delay).

Counted at asyncpg's Connection (the store's only way to the server): a statement without
parameters (simple protocol), a statement with parameters, an executemany (one pipelined round
trip) each count one; a statement asyncpg has not prepared on that connection yet costs one more
(its Parse/Describe). Also printed: the store's transactions (BEGIN … COMMIT) per turn.

    .venv/bin/python bench/pg_round_trips.py [--turns 20]

Target: ≤ 12 round trips for a one-call turn. Needs the server of the tests
(MYCLAW_TEST_DATABASE_URL, default postgresql://postgres@127.0.0.1:5432/test); works in a
schema of its own, dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import statistics
from typing import Any

from _common import NullSink, fake_anthropic, make_config

from tests.support.pg_support import PgTestSchema, database_url_for_tests

TARGET = 12
WARMUP = 30


class Counter:
    """Counts what asyncpg's connections send, by kind, while `on`."""

    def __init__(self) -> None:
        self.on = False
        self.kinds: collections.Counter[str] = collections.Counter()

    def install(self) -> None:
        import asyncpg

        conn = asyncpg.connection.Connection
        counter = self

        def wrap(name: str, kind: Any) -> None:
            original = getattr(conn, name)

            async def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
                if counter.on and kind(args):
                    counter.kinds[kind(args)] += 1
                return await original(self, *args, **kwargs)
            setattr(conn, name, counted)

        # execute() with parameters goes on to _execute (counted there), like fetch*().
        wrap("execute", lambda a: "simple statement" if len(a) == 1 else None)
        wrap("_execute", lambda a: "statement")
        wrap("_executemany", lambda a: "executemany")
        original_prepare = conn._get_statement

        async def prepared(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
            record_class = kwargs.get("record_class") or self._protocol.get_record_class()
            key = (query, record_class, kwargs.get("ignore_custom_codec", False))
            if counter.on and (not kwargs.get("use_cache", True) or self._stmt_cache.get(key) is None):
                counter.kinds["prepare"] += 1
            return await original_prepare(self, query, *args, **kwargs)
        conn._get_statement = prepared

    def take(self) -> collections.Counter[str]:
        taken, self.kinds = self.kinds, collections.Counter()
        return taken


async def measure(base_url: str, schema: PgTestSchema, turns: int, responder: str,
                  counter: Counter) -> list[collections.Counter[str]]:
    from bot.app import App
    from bot.core.events import IncomingMessage

    config = make_config(base_url, env={"MYCLAW_DATABASE_URL": schema.store_url})
    app = await App.open(config)
    per_turn = []
    try:
        for i in range(turns + WARMUP):   # warm-up: each pooled connection prepares its own
            counter.take()
            counter.on = i >= WARMUP
            await app.agent.handle(IncomingMessage("cli:local", f"chat{i % 5}", f"hi ({i})"),
                                   NullSink())
            counter.on = False
            if i >= WARMUP:
                per_turn.append(counter.take())
    finally:
        await app.close()
    return per_turn


def _statements(kinds: collections.Counter[str]) -> int:
    return kinds["simple statement"] + kinds["statement"] + kinds["executemany"] + kinds["prepare"]


def report(label: str, per_turn: list[collections.Counter[str]]) -> int:
    trips = [_statements(k) for k in per_turn]
    begins = [k["simple statement"] for k in per_turn]
    median = statistics.median(trips)
    kinds = collections.Counter()
    for k in per_turn:
        kinds.update(k)
    detail = ", ".join(f"{name} {count / len(per_turn):.1f}" for name, count in sorted(kinds.items()))
    print(f"  {label:<34} round trips p50 {median:5.1f} (min {min(trips)}, max {max(trips)});"
          f" simple statements (BEGIN/COMMIT/locks) {statistics.median(begins):.0f}; {detail}")
    return int(median)


async def run(turns: int) -> bool:
    counter = Counter()
    counter.install()
    schema = PgTestSchema(database_url_for_tests())
    await schema.create()
    try:
        with fake_anthropic(responder="echo") as url:
            text_turns = await measure(url, schema, turns, "echo", counter)
        await schema.empty()
        with fake_anthropic(responder="tool-then-text") as url:
            tool_turns = await measure(url, schema, turns, "tool-then-text", counter)
    finally:
        await schema.drop()
    print(f"PostgreSQL round trips per turn ({turns} turns each, after {WARMUP} warm-up turns)")
    one_call = report("text turn (one model call)", text_turns)
    report("tool turn (two calls, one tool)", tool_turns)
    met = one_call <= TARGET
    print(f"  one-call turn: {one_call} round trips, target ≤ {TARGET}  {'OK' if met else 'NOT MET'}")
    return met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    return 0 if asyncio.run(run(args.turns)) else 1


if __name__ == "__main__":
    raise SystemExit(main())
