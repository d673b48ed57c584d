"""Two replicas on one PostgreSQL store, each a real App: a sender whose messages land on both
is held to one rate and told once (the buckets are in the store)."""

from __future__ import annotations

import pytest

from bot.access.ratelimit import StoredRateLimiter
from bot.core.events import Done, Notice
from tests.runtime.test_runtime import say


@pytest.fixture
def backend_name() -> str:
    return "postgresql"   # what replicas share; an SQLite store serves one process


async def test_a_sender_writing_to_two_replicas_is_held_to_one_rate_with_one_notice(
        app_factory, fake_anthropic):
    settings = {"senders": {"telegram:1": "supervised"}, "rate_limits": {"messages_per_minute": 3}}
    replicas = [await app_factory(settings), await app_factory(settings)]
    assert all(isinstance(r.services.rate_limits, StoredRateLimiter) for r in replicas)
    answered, told = 0, []
    for i in range(8):     # well within a minute: a bucket of 3 refills 0.05 a second
        sink = await say(replicas[i % 2], f"message {i}", sender="telegram:1", chat="1")
        answered += bool(sink.of(Done))
        told += [n.text for n in sink.of(Notice)]
    assert answered == 3 and len(fake_anthropic.requests) == 3
    (notice,) = told
    assert "at most 3 a minute" in notice
