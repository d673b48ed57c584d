"""Rate limits kept in the store, as replicas sharing a PostgreSQL store keep them: a sender's
messages landing on different processes are held to one rate, and the burst is told once."""

from __future__ import annotations

import asyncio

from bot.access.ratelimit import MessageRateLimiter, StoredRateLimiter, rate_limiter
from tests.jobs.test_jobs import Clock
from tests.support.pg_support import on_both_backends

backend_name = on_both_backends()



async def test_messages_spread_over_two_processes_are_held_to_one_rate_with_one_notice(
        store, store_backend):
    clock = Clock()
    async with store_backend.open() as other_store:
        replicas = [StoredRateLimiter(store, 5, clock), StoredRateLimiter(other_store, 5, clock)]
        decisions = [await replicas[i % 2].admit("telegram:1") for i in range(12)]
    assert sum(d.allowed for d in decisions) == 5
    notices = [d.notice for d in decisions if d.notice]
    assert len(notices) == 1 and "at most 5 a minute" in notices[0]


async def test_two_processes_taking_from_one_bucket_at_the_same_moment_never_overdraw_it(
        store, store_backend):
    clock = Clock()
    async with store_backend.open() as other_store:
        replicas = [StoredRateLimiter(store, 5, clock), StoredRateLimiter(other_store, 5, clock)]
        decisions = await asyncio.gather(*(replicas[i % 2].admit("telegram:1") for i in range(16)))
    assert sum(d.allowed for d in decisions) == 5
    assert sum(bool(d.notice) for d in decisions) == 1


async def test_a_shared_bucket_refills_and_a_new_burst_is_told_again(store):
    clock = Clock()
    limiter = StoredRateLimiter(store, 2, clock)
    burst = [await limiter.admit("telegram:1") for _ in range(4)]
    assert [d.allowed for d in burst] == [True, True, False, False]
    clock.now += 60
    assert (await limiter.admit("telegram:1")).allowed
    again = [await limiter.admit("telegram:1") for _ in range(3)]
    assert [d.allowed for d in again] == [True, False, False]
    assert sum(bool(d.notice) for d in again) == 1


async def test_one_senders_shared_bucket_does_not_limit_another(store):
    limiter = StoredRateLimiter(store, 1, Clock())
    assert (await limiter.admit("telegram:1")).allowed
    assert not (await limiter.admit("telegram:1")).allowed
    assert (await limiter.admit("discord:2")).allowed


async def test_a_bucket_written_by_a_clock_running_ahead_refills_from_now(store):
    ahead, behind = Clock(), Clock()
    ahead.now += 3600
    await StoredRateLimiter(store, 1, ahead).admit("telegram:1")
    late = StoredRateLimiter(store, 1, behind)
    assert not (await late.admit("telegram:1")).allowed
    behind.now += 61
    assert (await late.admit("telegram:1")).allowed


async def test_the_terminal_operator_is_not_limited_in_the_store_either(store):
    limiter = StoredRateLimiter(store, 1, Clock())
    assert all([(await limiter.admit("cli:local")).allowed for _ in range(5)])
    assert await store.fetchall("SELECT * FROM rate_buckets") == []


async def test_buckets_are_kept_in_the_store_only_when_other_processes_share_it(store, config):
    limiter = rate_limiter(config, store)
    expected = MessageRateLimiter if store.dialect == "sqlite" else StoredRateLimiter
    assert type(limiter) is expected
    assert limiter.rates.default == config["rate_limits"]["messages_per_minute"]
    assert limiter.rates.per_minute("telegram:1", "full") == 0     # the default levels
