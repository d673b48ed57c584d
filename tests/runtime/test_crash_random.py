"""A randomized crash run: five chats, ten turns each (answers, approved and denied shell calls,
calls blocked until the kill, reminders and jobs — runs that are turns of their own — coming due
a few seconds later), `myclaw run` killed with SIGKILL at random moments — mid-conversation,
right after a reminder was delivered or a job's run began (its run not yet recorded), while
they come due, and during start-up (a fifth of the restarts, after 0–4 Bot API calls of the
new process: from its imports to about its first poll) — and restarted on the same store: the
invariants of tests/support/crash_checks.py hold at the end (no reminder or job run lost among
them), on both backends.
The two-replica run is in tests/runtime/test_crash_replicas.py.

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
pytestmark = pytest.mark.timeout(600)   # about a minute when idle; a loaded machine starts slower

CHATS = 5
TURNS_PER_CHAT = 10
MIN_KILLS = 5
VERBS = ("say", "do", "hang", "remind", "job")
WEIGHTS = (4, 5, 1, 2, 1)
# Restarts killed again during start-up. A turn's deadline counts only the time a ready bot ran
# (Kit.settled): on a loaded machine a restart spends tens of seconds importing, which is not
# time the bot had to answer in.
START_KILL_SHARE = float(os.environ.get("CRASH_START_KILLS", "0.2"))
START_KILL_CALLS = (0, 4)         # ...after this many Bot API calls of the new process
DELIVERY_KILL_SHARE = 0.5         # reminders whose delivery is followed by a kill at once
DENY_SHARE = 0.2
EVENTS_BETWEEN_KILLS = (25, 70)   # Bot API and model calls seen between two random kills


@pytest.fixture
async def backend(_pg_schema_if_needed) -> Backend:
    return await backend_of(_pg_schema_if_needed)


def crash_seed() -> int:
    return int(os.environ.get("CRASH_SEED") or random.randrange(1 << 32))


def plans(rng: random.Random, chats: int) -> list[list[str]]:
    """What each user will ask, in order: random, but with a reminder and a job in every run."""
    plan = [rng.choices(VERBS, WEIGHTS, k=TURNS_PER_CHAT) for _ in range(chats)]
    for verb in ("remind", "job"):
        if not any(verb in verbs for verbs in plan):
            plan[rng.randrange(chats)][rng.randrange(TURNS_PER_CHAT)] = verb
    return plan


async def drive(kit: Kit, chat: int, verbs: list[str], rng: random.Random) -> None:
    """One user: a message, then the next once it is answered or reported (approving most
    requests, denying some)."""
    for verb in verbs:
        token = kit.send(chat, verb)
        await kit.settled(token, "d" if rng.random() < DENY_SHARE else "a", timeout=90)


async def kill_at_random(kit: Kit, rng: random.Random, users: asyncio.Future) -> None:
    """SIGKILL when enough calls went by since the last start, whenever a command hangs, and
    right after some reminders are delivered; some restarts are killed again while starting."""
    def events() -> int:
        return len(kit.tg.calls) + len(kit.fake.requests)

    def hanging() -> set[str]:
        return {t for t, (_, _, verb) in kit.sent.items() if verb == "hang"} & set(kit.effects())

    def reminders() -> set[str]:
        """The reminders and job runs posted so far, by their text (a re-sent one is the same
        reminder; a job's run begins with its "⏰ name" line)."""
        return {str(m.get("text", "")) for m in kit.tg.messages.values()
                if str(m.get("text", "")).startswith("⏰")}

    killed_for: set[str] = set()
    delivered = reminders()   # each reminder triggers at most one kill, on its first delivery
    while True:
        threshold = events() + rng.randint(*EVENTS_BETWEEN_KILLS)

        def moment(threshold: int = threshold) -> bool:
            fresh = reminders() - delivered
            delivered.update(fresh)
            return (users.done() or events() >= threshold or bool(hanging() - killed_for)
                    or (bool(fresh) and rng.random() < DELIVERY_KILL_SHARE))
        await eventually(moment, "a moment to kill", timeout=600)
        if users.done():
            return
        killed_for.update(hanging())
        await kit.kill()
        if rng.random() < START_KILL_SHARE:
            await kill_while_starting(kit, rng.randint(*START_KILL_CALLS))
        await kit.start()


async def kill_while_starting(kit: Kit, calls: int) -> None:
    """Start a new process and kill it once it made `calls` Bot API calls (0: at once, while
    it imports), or when it exits on its own."""
    seen = len(kit.tg.calls)
    await kit.start(wait=False)
    proc = kit.bot.proc
    assert proc is not None
    await eventually(lambda: len(kit.tg.calls) >= seen + calls or proc.returncode is not None,
                     "a moment to kill during start-up", timeout=120)
    await kit.kill()


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
                *(drive(kit, chat, verbs, random.Random(rng.random()))
                  for chat, verbs in zip(kit.chats, plans(rng, CHATS), strict=True))))
            killer = asyncio.ensure_future(kill_at_random(kit, random.Random(rng.random()), users))
            await first_failure(users, killer)
            assert kit.bot.kills >= MIN_KILLS, f"only {kit.bot.kills} kills"
            assert len(kit.sent) >= CHATS * TURNS_PER_CHAT
            await kit.all_reminded()
            await kit.finish()
    except Exception as exc:
        raise AssertionError(f"crash run failed with CRASH_SEED={seed}: {exc}") from exc
