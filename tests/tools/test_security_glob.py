"""glob_list (low risk: any paired sender, or text the model read, can pick the pattern) must
not let a pattern cost more than linear work per file name.

The old translation to a regex with one `[^/]*` per star backtracked polynomially in the name
length with the number of stars, inside `re`, which holds the GIL: the whole bot (every chat,
the Discord heartbeat) froze until the match ended, and /stop could not interrupt it.
"""

from __future__ import annotations

import time

import pytest

from tools import glob_list

# Before the fix each of these took about 2 s (and each extra `*?` multiplies that by ~2.5).
PATHOLOGICAL = [
    ("*?" * 12 + "x", "a" * 30),
    ("**/" * 12 + "x", "/".join(["d"] * 14) + "/y"),
]


@pytest.mark.parametrize(("pattern", "path"), PATHOLOGICAL)
async def test_a_pathological_pattern_is_matched_in_linear_time(ctx, pattern, path):
    target = ctx.workspace / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("x")
    started = time.perf_counter()
    result = await glob_list.build().execute(ctx, pattern=pattern)
    assert time.perf_counter() - started < 0.5
    assert result["matches"] == []


@pytest.mark.parametrize(("pattern", "path", "expected"), [
    ("*?" * 12 + "x", "a" * 30 + "x", True),
    ("**/x", "x", True),
    ("**/x", "a/b/x", True),
    ("a/**", "a", False),        # a final ** needs at least one name below
    ("a/**", "a/b/c", True),
    ("[!a]*.md", "a.md", False),
    ("[!a]*.md", "b.md", True),
    ("?.txt", "ab.txt", False),
])
def test_the_linear_matcher_keeps_the_glob_semantics(ctx, pattern, path, expected):
    assert glob_list.compile_pattern(ctx, pattern).matches(path) is expected
