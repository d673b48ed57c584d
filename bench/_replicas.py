"""The replica figures of bench/replicas.py: real `myclaw run` processes in webhook mode on one
PostgreSQL schema (tests/support/replica_support.py starts them), a fake Telegram in this process and
the fake Anthropic in its own. Updates are posted straight to the replicas' webhook ports,
alternately, as a load balancer would; an answer is the bot's message reading "ok: <text>" (the
fake model echoes).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import fake_anthropic, percentile

from tests.fakes.telegram_server import FakeTelegram
from tests.support.pg_support import PgTestSchema
from tests.support.replica_support import (
    Poster,
    cpu_seconds,
    private_text,
    start_replicas,
    stop_replicas,
)

FIRST_CHAT = 10_000
IN_FLIGHT = 64           # webhook posts at once (Telegram itself keeps up to 40 per bot)
NO_RATE_LIMIT = "[rate_limits]\nmessages_per_minute = 0\n"


class AnswerClock:
    """When each expected answer first appeared in a bot message (sent or edited)."""

    def __init__(self, tg: FakeTelegram, expected: dict[str, int]):
        self.tg = tg
        self.expected = dict(expected)          # answer text -> index of its message
        self.at: dict[int, float] = {}
        self._seen = 0

    def _scan(self) -> bool:
        calls = self.tg.calls
        for call in calls[self._seen:]:
            if call.method in ("sendMessage", "editMessageText") and call.error is None:
                index = self.expected.pop(str(call.params.get("text", "")), None)
                if index is not None:
                    self.at[index] = time.perf_counter()
        self._seen = len(calls)
        return not self.expected

    async def all_answered(self, timeout: float) -> None:
        await self.tg.wait_until(self._scan, timeout=timeout)


@dataclass(frozen=True)
class Run:
    tg: FakeTelegram
    replicas: list[Any]
    poster: Poster
    tmp: Path


@dataclass(frozen=True)
class Throughput:
    per_second: float
    replica_cpu_ms: float      # CPU the replica processes used, per message
    fakes_cpu_ms: float        # CPU of this process (fake Telegram, posting), per message
    cpu_busy: float            # replicas' CPU seconds per wall second (2 = both cores)
    db: dict[str, float]       # what the replicas' connections were doing, share of samples


class DbSampler:
    """Samples pg_stat_activity for the replicas' connections (application_name myclaw-*):
    running a statement, waiting for the write lock (an advisory lock), inside a transaction
    while the client works or waits for its next round trip, or idle."""

    def __init__(self, url: str, every: float = 0.02):
        self.url = url
        self.every = every
        self.counts: dict[str, int] = {}
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> DbSampler:
        import asyncpg

        self._conn = await asyncpg.connect(self.url)
        self._task = asyncio.create_task(self._sample())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        await self._conn.close()

    async def _sample(self) -> None:
        while True:
            rows = await self._conn.fetch(
                "SELECT state, wait_event_type, wait_event FROM pg_stat_activity "
                "WHERE application_name LIKE 'myclaw-replica-%'")
            for row in rows:
                kind = ("waiting for the write lock" if row["wait_event"] == "advisory"
                        else "running a statement" if row["state"] == "active"
                        else "in a transaction, client's turn" if row["state"] and
                        row["state"].startswith("idle in transaction") else "idle")
                self.counts[kind] = self.counts.get(kind, 0) + 1
            await asyncio.sleep(self.every)   # sampling period, not synchronisation

    def shares(self) -> dict[str, float]:
        busy = {k: v for k, v in self.counts.items() if k != "idle"}
        total = sum(busy.values()) or 1
        return {kind: count / total for kind, count in sorted(busy.items())}


@contextlib.asynccontextmanager
async def replicas_running(url: str, count: int, chats: list[int], model_delay: float,
                           profile: bool = False) -> AsyncIterator[Run]:
    schema = PgTestSchema(url)
    await schema.create()
    tmp = Path(tempfile.mkdtemp(prefix="myclaw-bench-replicas-"))
    try:
        with fake_anthropic(delay=model_delay) as anthropic_url:
            async with FakeTelegram() as tg:
                replicas = await start_replicas(
                    tmp, count=count, tg=tg, anthropic_url=anthropic_url,
                    store_url=schema.store_url, extra=NO_RATE_LIMIT, profile=profile,
                    senders={f"telegram:{chat}": "full" for chat in chats})
                try:
                    async with Poster() as poster:   # one update id sequence per run
                        yield Run(tg, replicas, poster, tmp)
                finally:
                    await stop_replicas(replicas)
    finally:
        await schema.drop()


async def drive(run: Run, messages: list[tuple[int, str]],
                timeout: float) -> tuple[float, dict[int, float], dict[int, float]]:
    """Post `messages` (chat, text) alternately to the replicas; (seconds until the last answer,
    post times, answer times) by message index."""
    clock = AnswerClock(run.tg, {f"ok: {text}": i for i, (_, text) in enumerate(messages)})
    posted: dict[int, float] = {}
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def post(index: int, chat: int, text: str) -> None:
        async with gate:
            posted[index] = time.perf_counter()
            update = run.poster.update(private_text(run.tg, chat, text))
            status = await run.poster.post(run.replicas[index % len(run.replicas)], update)
            if status != 200:
                raise RuntimeError(f"a replica answered {status} to a webhook post")

    started = time.perf_counter()
    await asyncio.gather(*(post(i, chat, text) for i, (chat, text) in enumerate(messages)))
    await clock.all_answered(timeout)
    return max(clock.at.values()) - started, posted, clock.at


async def messages_per_second(url: str, count: int, messages: int, chats: int,
                              profile: bool = False) -> Throughput:
    ids = [FIRST_CHAT + i for i in range(chats)]
    async with replicas_running(url, count, ids, 0.0, profile) as run:
        await drive(run, [(chat, f"warm {chat}") for chat in ids], timeout=120)
        load = [(ids[i % chats], f"m{i}") for i in range(messages)]
        cpu_before = sum(map(cpu_seconds, run.replicas))
        own_before = time.process_time()
        async with DbSampler(url) as sampler:
            elapsed, _, _ = await drive(run, load, timeout=600)
        replica_cpu = sum(map(cpu_seconds, run.replicas)) - cpu_before
        own_cpu = time.process_time() - own_before
    if profile:
        print_profile(run.tmp, count)
    return Throughput(messages / elapsed, replica_cpu * 1000 / messages,
                      own_cpu * 1000 / messages, replica_cpu / elapsed, sampler.shares())


def print_profile(tmp: Path, count: int, top: int = 15) -> None:
    import pstats

    stats = pstats.Stats(*(str(tmp / f"replica-{i + 1}.prof") for i in range(count)))
    print(f"  profile of the {count} replica(s), whole run, top {top} by own time:")
    stats.sort_stats("tottime").print_stats(top)


async def throughput_figures(url: str, messages: int, chats: int, profile: bool = False) -> None:
    one = await messages_per_second(url, 1, messages, chats)
    two = await messages_per_second(url, 2, messages, chats, profile)
    ratio = two.per_second / one.per_second
    print(f"replicas (throughput): {messages} messages over {chats} chats, zero-delay model, "
          f"posted alternately to each replica's webhook; load average now "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for label, figure in (("one replica ", one), ("two replicas", two)):
        print(f"  {label}: {figure.per_second:7.1f} messages/s   replica CPU "
              f"{figure.replica_cpu_ms:5.1f} ms/message (busy {figure.cpu_busy:.2f} cores)   "
              f"fakes CPU {figure.fakes_cpu_ms:5.1f} ms/message")
        print("      database connections not idle: " + ", ".join(
            f"{share:.0%} {kind}" for kind, share in figure.db.items()))
    print(f"  ratio {ratio:.2f}   target ≥ 1.5   {'OK' if ratio >= 1.5 else 'UNDER TARGET'}")


async def wide_figures(url: str, chats: int, model_seconds: float) -> None:
    ids = [FIRST_CHAT + i for i in range(chats)]
    async with replicas_running(url, 2, ids, model_delay=model_seconds) as run:
        await drive(run, [(chat, f"warm {chat}") for chat in ids[:20]], timeout=120)
        load = [(chat, f"hello {chat}") for chat in ids]
        cpu_before = sum(map(cpu_seconds, run.replicas))
        async with DbSampler(url) as sampler:
            elapsed, posted, answered = await drive(run, load, timeout=600)
        replica_cpu = sum(map(cpu_seconds, run.replicas)) - cpu_before
    beyond = [answered[i] - posted[i] - model_seconds for i in range(len(load))]
    worst = max(beyond)
    print(f"replicas (1,000 chats): {chats} chats, one message each, a {model_seconds:.0f} s "
          f"model, two replicas")
    print(f"  beyond the model time: p50 {percentile(beyond, 50):.2f} s   p99 "
          f"{percentile(beyond, 99):.2f} s   max {worst:.2f} s   target ≤ 1.5 s   "
          f"{'OK' if worst <= 1.5 else 'OVER TARGET'}")
    print(f"  {chats / elapsed:.1f} messages/s; replica CPU {replica_cpu * 1000 / chats:.1f} "
          f"ms/message (busy {replica_cpu / elapsed:.2f} cores); load average now "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("      database connections not idle: " + ", ".join(
        f"{share:.0%} {kind}" for kind, share in sampler.shares().items()))
