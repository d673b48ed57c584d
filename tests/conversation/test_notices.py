"""Notices said once, claimed in the store (on both backends)."""

from __future__ import annotations

import asyncio

from bot.store.notices import KEEP_S, OnceNotices
from tests.jobs.test_jobs import Clock
from tests.support.pg_support import on_both_backends

backend_name = on_both_backends()



async def test_of_many_processes_claiming_a_notice_at_once_exactly_one_says_it(store, store_backend):
    async with store_backend.open() as other_store:
        processes = [OnceNotices(store), OnceNotices(other_store), OnceNotices(store)]
        claims = await asyncio.gather(*(p.first("warn\x1fday") for p in processes * 3))
    assert sum(claims) == 1


async def test_a_claim_that_rolled_back_was_not_made(store):
    notices = OnceNotices(store)
    try:
        async with store.transaction() as tx:
            assert await notices.claim(tx, "refusal\x1fday")
            raise RuntimeError("the audit row could not be written")
    except RuntimeError:
        pass
    assert await notices.first("refusal\x1fday")


async def test_claims_older_than_any_period_are_deleted_as_new_ones_are_made(store):
    clock = Clock()
    notices = OnceNotices(store, clock)
    assert await notices.first("warn\x1f2026-01")
    clock.now += KEEP_S + 1
    assert await notices.first("warn\x1f2026-03")
    rows = await store.fetchall("SELECT key FROM notices_sent")
    assert [r["key"] for r in rows] == ["warn\x1f2026-03"]
