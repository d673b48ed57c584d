"""No work whose cost an attacker chooses blocks the event loop.

Every renderer and every text pass over model or tool output (Telegram and Discord rendering,
HTML reduction, log redaction) goes through the pathological inputs of tests/support/looplag.py: each
must (a) leave the loop blocked for less than a bound while processing a 64 KB hostile input,
and (b) grow linearly — 8× the input, at most LINEAR_GROWTH_LIMIT× the time. Diffs (the
fs_write and fs_edit approval previews) run in a worker process within a budget: the loop keeps
ticking while they run, and the preview still shows every changed line.
"""

from __future__ import annotations

import re
import time

import httpx
import pytest

from bot.core.logs import Redactor
from bot.toolbox.offload import CpuPool, OverBudget
from channels.discord.rendering import split_message as discord_split
from channels.telegram.rendering import split_message as telegram_split
from tests.support.looplag import LARGE, LINEAR_GROWTH_LIMIT, growth, hostile_inputs, loop_not_blocked, spin
from tests.tools.test_netguard import FakeResolver, make_ctx
from tools import _diff, fs_edit, fs_write, web_fetch
from tools._html import reduce_html

FAMILIES = sorted(hostile_inputs(100))
LOOP_BOUND = 1.0   # seconds, on a shared test machine; the slow shapes took minutes to days
REDACTOR = Redactor(["a-configured-secret-value"])


def redact(text: str) -> str:
    return REDACTOR.text(text)


def reduce(text: str) -> str:
    return reduce_html(text, "https://example.org/").text


RENDERERS = {"telegram": telegram_split, "discord": discord_split, "html": reduce, "redaction": redact}


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("renderer", sorted(RENDERERS))
async def test_a_hostile_text_is_processed_in_linear_time_without_blocking_the_loop(renderer, family):
    process = RENDERERS[renderer]
    async with loop_not_blocked(LOOP_BOUND, f"{renderer} on {family}"):
        process(hostile_inputs(LARGE)[family])
    ratio = growth(process, family)
    assert ratio < LINEAR_GROWTH_LIMIT, f"{renderer} on {family}: 8× the input took {ratio:.0f}× the time"


async def test_a_heading_followed_by_thousands_of_spaces_renders_at_once():
    # The example: this line kept the Telegram renderer backtracking for minutes.
    line = "# Plan" + " " * 5000 + "now" + " " * 5000 + "!"
    async with loop_not_blocked(LOOP_BOUND, "a heading with 10,000 spaces"):
        parts = telegram_split(line)
    assert parts[0].html.startswith("<b>Plan") and parts[-1].plain.endswith("!")


async def test_markup_still_renders_after_the_rewrite():
    (part,) = telegram_split("## Title ##\n**bold** ~~gone~~ *it* `x<y` [site](https://e.org/a)")
    assert part.html == ('<b>Title</b>\n<b>bold</b> <s>gone</s> <i>it</i> <code>x&lt;y</code> '
                         '<a href="https://e.org/a">site</a>')


def test_a_huge_line_of_wide_characters_is_cut_into_messages_telegram_accepts():
    parts = telegram_split("\U0001F600" * 200_000)
    assert all(len(p.plain.encode("utf-16-le")) // 2 <= 4096 for p in parts)
    assert "".join(p.plain for p in parts) == "\U0001F600" * 200_000


# --- diffs: off the loop, within a budget, never cut -------------------------------------------


def apply_patch(old: str, diff: str) -> str:
    """Apply a unified diff (as _diff writes it) to `old`; the proof that nothing was left out."""
    source, out, index = old.splitlines(keepends=True), [], 0
    lines = diff.splitlines(keepends=True)
    for position, line in enumerate(lines):
        hunk = re.match(r"@@ -(\d+)(?:,(\d+))? \+", line)
        if hunk:
            start = int(hunk.group(1)) - (0 if hunk.group(2) == "0" else 1)
            out.extend(source[index:start])
            index = start
        elif line.startswith((" ", "-", "+")) and not line.startswith(("---", "+++")):
            text = line[1:]
            if position + 1 < len(lines) and lines[position + 1].startswith("\\ No newline"):
                text = text.rstrip("\n")
            if line[0] in " -":
                assert source[index] == text, f"context mismatch at line {index + 1}"
                index += 1
            if line[0] in " +":
                out.append(text)
    return "".join(out + source[index:])


def repetitive_pair(size: int) -> tuple[str, str]:
    """Two files of near-identical short lines, changed all over: difflib's worst shape."""
    old = "".join(f"{i % 101}\n" for i in range(size // 3))
    new = "".join(f"{i % 103}\n" for i in range(size // 3))
    return old, new


@pytest.mark.parametrize("shape", ["repetitive", "swapped_pairs", "one_line_changed", "appended",
                                   "no_final_newline", "emptied"])
async def test_a_diff_always_reproduces_the_new_text(shape):
    base = "".join(f"line {i}\n" for i in range(300))
    old, new = {
        "repetitive": repetitive_pair(30_000),
        "swapped_pairs": ("a\nb\n" * 2000, "b\na\n" * 2000),
        "one_line_changed": (base, base.replace("line 150\n", "LINE 150\n")),
        "appended": (base, base + "tail\n"),
        "no_final_newline": (base + "end", base + "END"),
        "emptied": (base, ""),
    }[shape]
    diff = await _diff.unified_diff(old, new, "a/f", "b/f")
    assert apply_patch(old, diff.text) == new


async def test_a_diff_over_budget_shows_the_changed_region_whole():
    old, new = repetitive_pair(30_000)
    diff = await _diff.unified_diff(old, new, "a/f", "b/f", budget=0.001)
    assert not diff.exact and apply_patch(old, diff.text) == new
    # The first 101 lines are the same in both files; everything after is one block.
    assert (diff.added, diff.removed) == (10_000 - 101, 10_000 - 101)


async def test_an_fs_write_preview_of_a_repetitive_40_kb_file_keeps_the_loop_free(ctx, config):
    # The example: this preview ran difflib on the event loop for days.
    old, new = repetitive_pair(40_000)
    (ctx.workspace / "data.txt").write_text(old)
    started = time.monotonic()
    async with loop_not_blocked(LOOP_BOUND, "an fs_write preview of a repetitive file"):
        preview = await fs_write.build(config).dry_run(ctx, path="data.txt", content=new)
    assert time.monotonic() - started < _diff.BUDGET_SECONDS + 10  # budget, process start, load
    assert apply_patch(old, preview["diff"]) == new   # every change shown, nothing cut
    assert "Overwrite data.txt" in preview["summary"]


async def test_an_fs_write_executes_a_repetitive_overwrite_without_blocking_the_loop(ctx, config):
    old, new = repetitive_pair(40_000)
    (ctx.workspace / "data.txt").write_text(old)
    async with loop_not_blocked(LOOP_BOUND, "an fs_write of a repetitive file"):
        result = await fs_write.build(config).execute(ctx, path="data.txt", content=new)
    assert (ctx.workspace / "data.txt").read_text() == new and "lines" in result["summary"]


async def test_an_fs_edit_of_a_repetitive_snippet_keeps_the_loop_free(ctx, config):
    old_snippet, new_snippet = repetitive_pair(40_000)
    content = "# header\n" + old_snippet + "# footer\n"
    (ctx.workspace / "data.txt").write_text(content)
    tool = fs_edit.build(config)
    async with loop_not_blocked(LOOP_BOUND, "an fs_edit preview of a repetitive snippet"):
        preview = await tool.dry_run(ctx, path="data.txt", old_text=old_snippet, new_text=new_snippet)
        await tool.execute(ctx, path="data.txt", old_text=old_snippet, new_text=new_snippet)
    assert apply_patch(content, preview["diff"]) == "# header\n" + new_snippet + "# footer\n"


@pytest.mark.parametrize("family", ["repeated_lines", "newlines", "unclosed_fence", "many_fences",
                                    "bullets", "one_huge_line"])
async def test_a_preview_of_hostile_file_content_keeps_the_loop_free(ctx, config, family):
    old = hostile_inputs(LARGE)[family]
    new = "\n".join(reversed(old.split("\n")))   # every line moved
    (ctx.workspace / "f.txt").write_text(old)
    async with loop_not_blocked(LOOP_BOUND, f"an fs_write preview of {family}"):
        preview = await fs_write.build(config).dry_run(ctx, path="f.txt", content=new)
    assert apply_patch(old, preview["diff"]) == new


# --- the process pool ------------------------------------------------------------------------


async def test_a_job_over_budget_is_stopped_and_the_pool_keeps_working():
    pool = CpuPool(workers=1)
    try:
        async with loop_not_blocked(LOOP_BOUND, "a CPU job in the pool"):
            with pytest.raises(OverBudget):
                await pool.run(spin, 30.0, budget=0.3)
            assert await pool.run(spin, 0.01, budget=5) > 0
    finally:
        pool.close()


async def test_web_fetch_reduces_a_hostile_page_in_a_worker_not_on_the_loop(tmp_path):
    page = "<div>" * 40_000 + "<p>deep</p>" + "<a " * 40_000
    transport = httpx.MockTransport(
        lambda request: httpx.Response(200, headers={"content-type": "text/html"}, text=page))
    ctx = make_ctx(tmp_path, resolver=FakeResolver({"pages.example": ["93.184.216.34"]}),
                   transport=transport)
    async with loop_not_blocked(LOOP_BOUND, "a hostile page"):
        result = await web_fetch.build().execute(ctx, url="http://pages.example/")
    assert "deep" in result["text"]

