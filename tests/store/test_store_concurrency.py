"""Which write transactions run together: on PostgreSQL, those that opt out of running alone
(`serial=False`) run beside each other across processes, a serial one still runs alone, and
`tx.lock(key)` queues those that name one key. On SQLite every transaction runs alone."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from bot.store import postgres as store_pg
from tests.support.pg_support import on_both_backends

backend_name = on_both_backends()
# Two processes sharing a store exist only on PostgreSQL (SQLite is served by one process).
POSTGRESQL_ONLY = pytest.mark.parametrize("backend_name", ["postgresql"])
BOUND_S = 20.0   # a failure bound only: nothing waits for it to pass

INSERT = ("INSERT INTO granted_senders(sender, level, granted_at, granted_by)"
          " VALUES (?, 'full', 1.0, 'cli:local')")


async def granted(store: Any) -> set[str]:
    return {r["sender"] for r in await store.fetchall("SELECT sender FROM granted_senders")}


async def test_a_transaction_that_runs_concurrently_writes_and_commits_on_both(store):
    committed: list[str] = []
    async with store.transaction(serial=False) as tx:
        await tx.lock("telegram:1", "telegram:2")
        await tx.execute(INSERT, ("telegram:1",))
        tx.on_commit(lambda: committed.append("yes"))
    assert committed == ["yes"] and await granted(store) == {"telegram:1"}


class Holder:
    """A transaction of one store kept open until released; `pid` is its server process."""

    def __init__(self, store: Any, serial: bool, key: str | None = None):
        self.store, self.serial, self.key = store, serial, key
        self.entered, self.release = asyncio.Event(), asyncio.Event()
        self.pid = 0
        self.task = asyncio.ensure_future(self._hold())

    async def _hold(self) -> None:
        async with self.store.transaction(serial=self.serial) as tx:
            if self.key is not None:
                await tx.lock(self.key)
            self.pid = (await tx.fetchone("SELECT pg_backend_pid() AS pid"))["pid"]
            await tx.execute(INSERT, (f"holder:{secrets.token_hex(4)}",))
            self.entered.set()
            await self.release.wait()

    async def __aenter__(self) -> Holder:
        await asyncio.wait_for(self.entered.wait(), BOUND_S)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release.set()
        await asyncio.wait_for(self.task, BOUND_S)


async def blocked_by(store: Any, pid: int) -> None:
    """Return once some session waits for a lock that `pid` holds (polled: the server says
    nothing when a session starts waiting)."""
    while True:
        if await store.fetchone("SELECT 1 FROM pg_locks WHERE NOT granted"
                                " AND ? = ANY(pg_blocking_pids(pid))", (pid,)):
            return
        await asyncio.sleep(0.01)


async def write(store: Any, sender: str, *, serial: bool, key: str | None = None) -> None:
    async with store.transaction(serial=serial) as tx:
        if key is not None:
            await tx.lock(key)
        await tx.execute(INSERT, (sender,))


async def waits_for(holder: Holder, other: Any, work: Callable[[], Awaitable[None]]) -> None:
    """`work` (on another store: another process) does not finish while `holder` holds on,
    and finishes once it lets go."""
    async with holder:
        task = asyncio.ensure_future(work())
        await asyncio.wait_for(blocked_by(other, holder.pid), BOUND_S)
        assert not task.done()
    await asyncio.wait_for(task, BOUND_S)


@pytest.fixture
async def two_processes(store_backend, monkeypatch):
    # A write lock of their own: every store on this database shares the usual one, and another
    # test process's serial transaction queued between two concurrent ones would hold up the
    # second until the first ends, which these tests keep open on purpose.
    monkeypatch.setattr(store_pg, "WRITE_LOCK", secrets.randbits(62))
    async with store_backend.open() as first, store_backend.open() as second:
        yield first, second


@POSTGRESQL_ONLY
async def test_concurrent_transactions_of_two_processes_do_not_wait_for_each_other(two_processes):
    first, second = two_processes
    async with Holder(first, serial=False):
        await asyncio.wait_for(write(second, "telegram:2", serial=False), BOUND_S)
        await asyncio.wait_for(write(first, "telegram:3", serial=False), BOUND_S)
    assert {"telegram:2", "telegram:3"} <= await granted(first)


@POSTGRESQL_ONLY
async def test_a_serial_transaction_waits_for_concurrent_ones_and_they_wait_for_it(two_processes):
    first, second = two_processes
    await waits_for(Holder(first, serial=False), second,
                    lambda: write(second, "serial", serial=True))
    await waits_for(Holder(first, serial=True), second,
                    lambda: write(second, "concurrent", serial=False))
    await waits_for(Holder(first, serial=True), second,
                    lambda: write(second, "serial again", serial=True))
    assert {"serial", "concurrent", "serial again"} <= await granted(first)


@POSTGRESQL_ONLY
async def test_concurrent_transactions_locking_one_key_run_one_after_the_other(two_processes):
    first, second = two_processes
    async with Holder(first, serial=False, key="telegram:chat"):
        await asyncio.wait_for(write(second, "other key", serial=False, key="telegram:other"),
                               BOUND_S)
    await waits_for(Holder(first, serial=False, key="telegram:chat"), second,
                    lambda: write(second, "same key", serial=False, key="telegram:chat"))
    assert {"other key", "same key"} <= await granted(first)
