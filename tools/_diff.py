"""Unified diffs of two texts in bounded time, off the event loop, never cut.

difflib's matcher is worse than quadratic on repetitive input: one fs_write preview of a 40 KB
file of near-identical lines ran for days on the event loop. Here the common head and tail of the
two texts are trimmed first (linear: most edits touch one region), and only the changed region
goes to difflib — in a worker process, within a time budget. When the budget runs out the region
is shown as one block (every old line removed, every new line added): a coarser diff, but still
a complete and correct one, so an approval always shows everything that will change.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from bot.toolbox.offload import OverBudget, run_off_loop

BUDGET_SECONDS = 2.0
CONTEXT_LINES = 3
INLINE_PAIRS = 1024  # a changed region this small (lines × lines) is compared on the loop

Opcode = tuple[str, int, int, int, int]


@dataclass(frozen=True)
class Diff:
    text: str       # the unified diff, whole ("" when nothing changed)
    added: int      # lines
    removed: int
    exact: bool     # False: the changed region is shown as one block (a finer diff took too long)


def _common_edges(a: list[str], b: list[str]) -> tuple[int, int]:
    """(lines equal at the start, lines equal at the end), never overlapping."""
    limit = min(len(a), len(b))
    head = 0
    while head < limit and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < limit - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    return head, tail


def region_opcodes(a: list[str], b: list[str]) -> list[Opcode]:
    """difflib's opcodes for one changed region (runs in a worker for large regions)."""
    import difflib  # with the first preview of an edit, not at start-up

    return difflib.SequenceMatcher(None, a, b).get_opcodes()


async def unified_diff(old: str, new: str, fromfile: str, tofile: str,
                       budget: float = BUDGET_SECONDS) -> Diff:
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    head, tail = _common_edges(a, b)
    a_mid, b_mid = a[head:len(a) - tail], b[head:len(b) - tail]
    exact = True
    if not a_mid or not b_mid or len(a_mid) * len(b_mid) <= INLINE_PAIRS:
        middle = region_opcodes(a_mid, b_mid) if a_mid or b_mid else []
    else:
        try:
            middle = await run_off_loop(region_opcodes, a_mid, b_mid, budget=budget)
        except OverBudget:
            middle, exact = [("replace", 0, len(a_mid), 0, len(b_mid))], False
    codes: list[Opcode] = [("equal", 0, head, 0, head)] if head else []
    codes += [(tag, i1 + head, i2 + head, j1 + head, j2 + head) for tag, i1, i2, j1, j2 in middle]
    if tail:
        codes.append(("equal", len(a) - tail, len(a), len(b) - tail, len(b)))
    added = sum(j2 - j1 for tag, _, _, j1, j2 in codes if tag in ("replace", "insert"))
    removed = sum(i2 - i1 for tag, i1, i2, _, _ in codes if tag in ("replace", "delete"))
    text = "".join(_format(a, b, codes, fromfile, tofile)) if added or removed else ""
    return Diff(text, added, removed, exact)


def _range(start: int, stop: int) -> str:
    """A hunk range as `diff -u` writes it (1-based; an empty range names the line before)."""
    length = stop - start
    if length == 1:
        return f"{start + 1}"
    return f"{start if length == 0 else start + 1},{length}"


def _line(prefix: str, line: str) -> str:
    return f"{prefix}{line}" if line.endswith("\n") else f"{prefix}{line}\n\\ No newline at end of file\n"


def _format(a: list[str], b: list[str], codes: list[Opcode], fromfile: str,
            tofile: str) -> Iterator[str]:
    yield f"--- {fromfile}\n+++ {tofile}\n"
    for group in _grouped(codes, CONTEXT_LINES):
        first, last = group[0], group[-1]
        yield f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@\n"
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                yield from (_line(" ", line) for line in a[i1:i2])
                continue
            if tag in ("replace", "delete"):
                yield from (_line("-", line) for line in a[i1:i2])
            if tag in ("replace", "insert"):
                yield from (_line("+", line) for line in b[j1:j2])


def _grouped(codes: list[Opcode], context: int) -> Iterator[list[Opcode]]:
    """Hunks: the changes with `context` equal lines around them (difflib's grouping)."""
    codes = list(codes)
    if codes and codes[0][0] == "equal":
        tag, i1, i2, j1, j2 = codes[0]
        codes[0] = tag, max(i1, i2 - context), i2, max(j1, j2 - context), j2
    if codes and codes[-1][0] == "equal":
        tag, i1, i2, j1, j2 = codes[-1]
        codes[-1] = tag, i1, min(i2, i1 + context), j1, min(j2, j1 + context)
    group: list[Opcode] = []
    for tag, i1, i2, j1, j2 in codes:
        if tag == "equal" and i2 - i1 > 2 * context:
            group.append((tag, i1, min(i2, i1 + context), j1, min(j2, j1 + context)))
            yield group
            group = []
            i1, j1 = max(i1, i2 - context), max(j1, j2 - context)
        group.append((tag, i1, i2, j1, j2))
    if group and not (len(group) == 1 and group[0][0] == "equal"):
        yield group
