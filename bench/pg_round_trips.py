"""Round trips to PostgreSQL per turn: a text turn (one model call) and a turn with one tool
call (two model calls), through the whole runtime on a PostgreSQL store, against the fake
Anthropic (separate process, zero delay).

Counted at asyncpg's Connection (the store's only way to the server): a statement without
parameters (simple protocol), a statement with parameters, an executemany (one pipelined round
trip) each count one; a statement asyncpg has not prepared on that connection yet costs one more
(its Parse/Describe). Also printed: the store's transactions (BEGIN … COMMIT) per turn.

    .venv/bin/python bench/pg_round_trips.py [--turns 20] [--statements]

`--statements` also lists, for the last turn of each kind, every round trip in order: its
kind, the store function that sent it and its SQL (shortened).

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
        self.log: list[str] = []   # this turn's round trips, in order

    def count(self, kind: str, sql: str) -> None:
        self.kinds[kind] += 1
        self.log.append(f"{kind:<16} {_caller():<44} {' '.join(sql.split())[:150]}")

    def install(self) -> None:
        import asyncpg

        conn = asyncpg.connection.Connection
        counter = self

        def wrap(name: str, kind: Any) -> None:
            original = getattr(conn, name)

            async def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
                if counter.on and kind(args):
                    counter.count(kind(args), _sql(args[0]))
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
                counter.count("prepare", query)
            return await original_prepare(self, query, *args, **kwargs)
        conn._get_statement = prepared

    def take(self) -> collections.Counter[str]:
        taken, self.kinds, self.log = self.kinds, collections.Counter(), []
        return taken


def _sql(first: Any) -> str:
    """The SQL of a counted call (a prepared statement's query, or the text itself)."""
    return first if isinstance(first, str) else getattr(first, "query", repr(first))


def _caller() -> str:
    """The innermost frame in bot/ outside bot/store/: who asked for this round trip."""
    import sys

    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if "/bot/" in name and "/bot/store/" not in name:
            module = name.rsplit("/bot/", 1)[1].removesuffix(".py").replace("/", ".")
            return f"{module}.{frame.f_code.co_name}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


async def measure(base_url: str, schema: PgTestSchema, turns: int, responder: str,
                  counter: Counter) -> tuple[list[collections.Counter[str]], list[str]]:
    from bot.app import App
    from bot.core.events import IncomingMessage

    config = make_config(base_url, env={"MYCLAW_DATABASE_URL": schema.store_url})
    app = await App.open(config)
    per_turn, log = [], []
    try:
        for i in range(turns + WARMUP):   # warm-up: each pooled connection prepares its own
            counter.take()
            counter.on = i >= WARMUP
            await app.agent.handle(IncomingMessage("cli:local", f"chat{i % 5}", f"hi ({i})"),
                                   NullSink())
            counter.on = False
            if i >= WARMUP:
                log = counter.log
                per_turn.append(counter.take())
    finally:
        await app.close()
    return per_turn, log


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


async def run(turns: int, statements: bool) -> bool:
    counter = Counter()
    counter.install()
    schema = PgTestSchema(database_url_for_tests())
    await schema.create()
    try:
        with fake_anthropic(responder="echo") as url:
            text_turns, text_log = await measure(url, schema, turns, "echo", counter)
        await schema.empty()
        with fake_anthropic(responder="tool-then-text") as url:
            tool_turns, tool_log = await measure(url, schema, turns, "tool-then-text", counter)
    finally:
        await schema.drop()
    print(f"PostgreSQL round trips per turn ({turns} turns each, after {WARMUP} warm-up turns)")
    one_call = report("text turn (one model call)", text_turns)
    report("tool turn (two calls, one tool)", tool_turns)
    if statements:
        for label, log in (("text turn", text_log), ("tool turn", tool_log)):
            print(f"  {label}, round trip by round trip:")
            for number, line in enumerate(log, 1):
                print(f"    {number:>2} {line}")
    met = one_call <= TARGET
    print(f"  one-call turn: {one_call} round trips, target ≤ {TARGET}  {'OK' if met else 'NOT MET'}")
    return met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--statements", action="store_true",
                        help="list the last turn's round trips, with who sent them")
    args = parser.parse_args()
    return 0 if asyncio.run(run(args.turns, args.statements)) else 1


if __name__ == "__main__":
    raise SystemExit(main())
