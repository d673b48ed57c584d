"""CPU-bound work off the event loop: worker processes, and a time budget for every job.

A diff of two long, repetitive files or the parse of a hostile page is pure-Python work whose
cost the content decides. On the event loop it would freeze every chat (and SIGTERM); in a
thread it would still hold the GIL. So it runs in a small process pool, and each job carries a
budget: the worker interrupts the job with SIGALRM when it runs over (the job is pure Python,
so the interruption lands between two bytecodes), and the loop side gives up a little later
still, replacing the pool if a worker stopped answering. The caller gets `OverBudget` and
chooses its fallback.

The pool starts lazily, on the first job; nothing happens at import time.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import signal
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
GRACE_SECONDS = 2.0  # beyond the budget, before the loop side gives up on a worker
WORKERS = 2


class OverBudget(Exception):
    """The job did not finish within its budget; nothing of it is returned."""


def _alarm(signum: int, frame: Any) -> None:
    raise OverBudget


def _within_budget(fn: Callable[..., T], args: tuple[Any, ...], budget: float) -> T:
    """Runs in the worker process (its main thread, where signals are delivered)."""
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, budget)
    try:
        return fn(*args)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class CpuPool:
    """A process pool for CPU-bound jobs with a budget each. `fn` must be importable (a
    module-level function) and its arguments and result picklable."""

    def __init__(self, workers: int = WORKERS):
        self.workers = workers
        self._executor: concurrent.futures.ProcessPoolExecutor | None = None

    def _pool(self) -> concurrent.futures.ProcessPoolExecutor:
        if self._executor is None:
            # forkserver: a fork of this (threaded) process could inherit a held lock.
            import multiprocessing  # with the first offloaded job, not at start-up

            context = multiprocessing.get_context("forkserver")
            self._executor = concurrent.futures.ProcessPoolExecutor(self.workers, mp_context=context)
            atexit.register(self.close)  # before interpreter teardown, not during it
        return self._executor

    def _submit(self, fn: Callable[..., T], args: tuple[Any, ...],
                budget: float) -> concurrent.futures.Future[T]:
        # In a thread: submitting may start the fork server and the workers, and waiting for
        # them would block the loop for as long as that takes (a second on a busy machine).
        return self._pool().submit(_within_budget, fn, args, budget)

    async def run(self, fn: Callable[..., T], *args: Any, budget: float) -> T:
        """`fn(*args)` in a worker; raises OverBudget after `budget` seconds of it."""
        try:
            future = await asyncio.to_thread(self._submit, fn, args, budget)
        except concurrent.futures.BrokenExecutor:
            self.close()
            future = await asyncio.to_thread(self._submit, fn, args, budget)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), budget + GRACE_SECONDS)
        except TimeoutError as exc:  # the worker did not even answer its alarm: replace it
            self.close()
            raise OverBudget from exc
        except concurrent.futures.BrokenExecutor as exc:  # a worker died (killed, out of memory)
            self.close()
            raise OverBudget from exc

    def close(self) -> None:
        executor, self._executor = self._executor, None
        if executor is None:
            return
        atexit.unregister(self.close)
        processes = list((getattr(executor, "_processes", None) or {}).values())
        executor.shutdown(wait=False, cancel_futures=True)
        for process in processes:  # a stuck job must not keep burning a CPU after we gave up
            if process.is_alive():
                process.kill()


_shared = CpuPool()


async def run_off_loop(fn: Callable[..., T], *args: Any, budget: float) -> T:
    """Run `fn(*args)` in the shared CPU pool within `budget` seconds (see CpuPool.run)."""
    return await _shared.run(fn, *args, budget=budget)


def shutdown() -> None:
    """Stop the shared pool's workers (the bot calls this when it stops)."""
    _shared.close()
