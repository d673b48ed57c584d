"""A randomized crash run: five chats, ten turns each (answers, approved and denied shell calls,
calls blocked until the kill), `myclaw run` killed with SIGKILL at random moments and restarted
on the same store — the invariants of tests/support/crash_checks.py hold at the end, on both backends.

The seed is random unless CRASH_SEED is set; a failure prints it:
    CRASH_SEED=<seed> .venv/bin/pytest -q tests/runtime/test_crash_random.py
"""

from __future__ import annotations

import asyncio
import os
import random

import pytest

from tests.support.crashkit import Backend, Kit, backend_of, crash_kit
from tests.support.pg_support import on_both_backends
from tests.support.waiting import eventually

backend_name = on_both_backends()
pytestmark = pytest.mark.timeout(300)   # under a minute when idle; a loaded machine starts slower

CHATS = 5
TURNS_PER_CHAT = 10
MIN_KILLS = 5
VERBS = ("say", "do", "hang")
WEIGHTS = (4, 5, 1)
DENY_SHARE = 0.2
EVENTS_BETWEEN_KILLS = (25, 70)   # Bot API and model calls seen between two random kills


@pytest.fixture
async def backend(_pg_schema_if_needed) -> Backend:
    return await backend_of(_pg_schema_if_needed)


def crash_seed() -> int:
    return int(os.environ.get("CRASH_SEED") or random.randrange(1 << 32))


async def drive(kit: Kit, chat: int, rng: random.Random) -> None:
    """One user: a message, then the next once it is answered or reported (approving most
    requests, denying some)."""
    for verb in rng.choices(VERBS, WEIGHTS, k=TURNS_PER_CHAT):
        token = kit.send(chat, verb)
        await kit.settled(token, "d" if rng.random() < DENY_SHARE else "a", timeout=90)


async def kill_at_random(kit: Kit, rng: random.Random, users: asyncio.Future) -> None:
    """SIGKILL when enough calls went by since the last start, and whenever a command hangs."""
    def events() -> int:
        return len(kit.tg.calls) + len(kit.fake.requests)

    def hanging() -> set[str]:
        return {t for t, (_, _, verb) in kit.sent.items() if verb == "hang"} & set(kit.effects())

    killed_for: set[str] = set()
    while True:
        threshold = events() + rng.randint(*EVENTS_BETWEEN_KILLS)

        def moment(threshold: int = threshold) -> bool:
            return users.done() or events() >= threshold or bool(hanging() - killed_for)
        await eventually(moment, "a moment to kill", timeout=600)
        if users.done():
            return
        killed_for.update(hanging())
        await kit.kill()
        await kit.start()


async def first_failure(*tasks: asyncio.Future) -> None:
    """Wait for all, but stop at the first that fails (the others are cancelled)."""
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()


async def test_a_randomized_run_with_kills_loses_nothing_and_runs_nothing_twice(tmp_path, backend):
    seed = crash_seed()
    rng = random.Random(seed)
    try:
        async with crash_kit(tmp_path, backend, chats=CHATS) as kit:
            await kit.start()
            users = asyncio.ensure_future(asyncio.gather(
                *(drive(kit, chat, random.Random(rng.random())) for chat in kit.chats)))
            killer = asyncio.ensure_future(kill_at_random(kit, random.Random(rng.random()), users))
            await first_failure(users, killer)
            assert kit.bot.kills >= MIN_KILLS, f"only {kit.bot.kills} kills"
            assert len(kit.sent) >= CHATS * TURNS_PER_CHAT
            await kit.finish()
    except Exception as exc:
        raise AssertionError(f"crash run failed with CRASH_SEED={seed}: {exc}") from exc
