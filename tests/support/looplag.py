"""Test helpers for "nothing whose cost depends on untrusted input blocks the event loop".

`loop_not_blocked(bound)`: an async context manager running a ticker task that wakes every few
milliseconds and records how late each wake-up was. Work done on the loop inside the block
(a synchronous renderer, a tool's dry_run) delays the next tick by exactly as long as it ran;
on exit the block waits for one more tick (an event, not a sleep) and fails the test when the
loop was ever blocked longer than `bound`.

`hostile_inputs(n)`: pathological texts of about `n` characters — long runs of one character,
deep nesting, many repeats, alternations of markup characters, unclosed constructs — the shapes
that make a backtracking regex or a quadratic algorithm blow up.

`growth(fn, family)`: how much longer `fn` takes on an input 8× as large, as a ratio. Linear is
~8, quadratic ~64, cubic ~512. Each size is timed a few times and the fastest run counts, in CPU
time of the calling thread (time.thread_time): the test machine is shared, and wall-clock time
would count the moments another process had the CPU.

`spin(seconds)`: burns CPU in pure Python (a job for the process-pool tests).
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

TICK_SECONDS = 0.002
SMALL, LARGE = 10_000, 80_000  # both past the point where one line needs cutting into messages
LINEAR_GROWTH_LIMIT = 32  # 8× the input may cost 4× more than linear would; quadratic is 64×


@dataclass
class LoopWatch:
    """What the ticker saw: the longest gap between two ticks beyond the tick interval."""

    max_lag: float = 0.0
    ticks: int = 0
    ticked: asyncio.Event = field(default_factory=asyncio.Event)


async def _tick(watch: LoopWatch) -> None:
    loop = asyncio.get_running_loop()
    while True:
        before = loop.time()
        await asyncio.sleep(TICK_SECONDS)  # measuring, not synchronising: lateness is the lag
        watch.max_lag = max(watch.max_lag, loop.time() - before - TICK_SECONDS)
        watch.ticks += 1
        watch.ticked.set()


@asynccontextmanager
async def loop_not_blocked(bound: float = 0.25, what: str = "the hostile input") -> AsyncIterator[LoopWatch]:
    watch = LoopWatch()
    # A full collection of the test process's heap can pause the loop for a while whatever the
    # input; it is not the cost being measured, so it is put off until after the block. Not run
    # first either: in a test worker's heap one collection costs ~0.2 s of CPU, for every test.
    gc.disable()
    ticker = asyncio.create_task(_tick(watch))
    try:
        await watch.ticked.wait()   # ticking before the work starts
        yield watch
        watch.ticked.clear()
        await watch.ticked.wait()   # one tick after the work: its lateness counts too
    finally:
        ticker.cancel()
        await asyncio.gather(ticker, return_exceptions=True)
        gc.enable()
    assert watch.max_lag <= bound, (
        f"the event loop was blocked for {watch.max_lag * 1000:.0f} ms while processing {what} "
        f"(bound {bound * 1000:.0f} ms)")


def hostile_inputs(n: int) -> dict[str, str]:
    """Pathological texts of about `n` characters, by family name."""
    half, quarter = n // 2, n // 4
    families = {
        # Long runs of one character.
        "spaces": " " * n,
        "stars": "*" * n,
        "underscores": "_" * n,
        "backticks": "`" * n,
        "tildes": "~" * n,
        "hashes": "#" * n,
        "open_brackets": "[" * n,
        "open_angles": "<" * n,
        "ampersands": "&" * n,
        "newlines": "\n" * n,
        "one_huge_line": "x" * n,
        "astral_line": "\U0001F600" * half,
        # The heading: a heading, thousands of spaces, text, spaces, text.
        "heading_spaces": "# x" + " " * half + "y" + " " * half + "!",
        "heading_hashes": "#" * 6 + " " * half + "#" * half + "x",
        "fence_spaces": "```" + " " * half + "x" + " " * half + "!",
        # Many repeats of an opener that never closes.
        "bold_openers": "**a " * quarter,
        "strike_openers": "~~a " * quarter,
        "italic_openers": "*a _b " * (n // 6),
        "link_openers": "[a](" * quarter,
        "link_texts": "[a" * half,
        "code_openers": "`a " * (n // 3),
        "tag_openers": "<a" * half,
        "cdata_openers": "<![CDATA[ >" * (n // 11),
        # Deep nesting.
        "nested_brackets": "[" * half + "]" * half,
        "nested_parens": "(" * half + ")" * half,
        "nested_tags": "<div><b><i>" * (n // 22) + "</i></b></div>" * (n // 22),
        "nested_emphasis": "**_~~`" * (n // 12) + "`~~_**" * (n // 12),
        "quote_nesting": ">" * n,
        # Alternations of markup characters and unclosed constructs.
        "star_underscore": "*_" * half,
        "star_space": "* " * half,
        "bracket_paren": "[](" * (n // 3),
        "bullets": "- " * half,
        "spaces_then_text": " " * (n - 1) + "x",
        "tabs_and_spaces": " \t" * half,
        "unclosed_fence": "```python\n" + "x = 1\n" * (n // 6),
        "many_fences": "```\n" * quarter,
        "repeated_lines": "same line\n" * (n // 10),
        "bearer_spaces": "Bearer" + " " * n,
        "token_shapes": "sk-ant-" * (n // 7),
        "digit_colons": "12345678:" * (n // 9),
    }
    return families


def _best_time(fn: Callable[[str], object], text: str, runs: int = 2) -> float:
    # As in loop_not_blocked: a collection of the whole test process's heap is not the cost being
    # measured, and one landing in a run of the small input would make the ratio a guess.
    best = float("inf")
    gc.disable()
    try:
        for _ in range(runs):
            started = time.thread_time()
            fn(text)
            best = min(best, time.thread_time() - started)
    finally:
        gc.enable()
    return best


def growth(fn: Callable[[str], object], family: str, small: int = SMALL, large: int = LARGE) -> float:
    """time(fn, family at `large`) / time(fn, family at `small`)."""
    small_time = _best_time(fn, hostile_inputs(small)[family])
    large_time = _best_time(fn, hostile_inputs(large)[family])
    return large_time / max(small_time, 1e-5)   # below 10 µs the clock is too coarse to divide


def spin(seconds: float) -> int:
    """Pure-Python work for about `seconds` of CPU time."""
    deadline, count = time.thread_time() + seconds, 0
    while time.thread_time() < deadline:
        count += 1
    return count
