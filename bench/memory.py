"""Memory of `myclaw run` with a Telegram-only configuration, next to the floor bot.

Both bots run as child processes against a fake Telegram Bot API (in this process, one per bot)
and a fake Anthropic (its own process), as in bench/telegram.py, each under
bench/_memory_probe.py, which on SIGUSR1 reports the process's RSS and what it holds by package.

1. RSS: each bot is started, left idle --settle seconds (idle RSS), then --chats different
   senders write at the same moment (the model answers after --delay s); once every answer has
   arrived and --settle seconds have passed, the RSS again (growth = after - idle). Runs
   alternate myclaw, floor, myclaw, … (A/B/A), so drift in machine load hits both.
   Targets: idle RSS ≤ 1.05× the floor's; growth after the chats ≤ the floor's.
2. By package: one more run of each with tracemalloc on from the first line (which slows
   start-up and inflates RSS, hence separate runs): the live bytes it traces and the modules
   loaded, per top-level package, idle and after the chats. tracemalloc sees Python's own
   allocations, not those of C libraries (OpenSSL, SQLite's page cache, Rust extensions):
   the gap between RSS and "traced" is theirs plus the interpreter's.

    .venv/bin/python bench/memory.py [--runs 3] [--chats 100] [--delay 1.0] [--top 25]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from _common import fake_anthropic
from telegram import Bot, chats_run, running_bot  # bench/telegram.py, beside this file

IDLE_TARGET = 1.05
CHAT_BASE = 200_000
ORDER = ("myclaw", "floor")


@dataclass
class Probe:
    rss_mib: float
    modules: dict[str, int]
    traced: dict[str, int]


@dataclass
class Sample:
    idle: Probe
    after: Probe
    answered: int

    @property
    def growth(self) -> float:
        return self.after.rss_mib - self.idle.rss_mib


@dataclass
class Results:
    rss: dict[str, list[Sample]] = field(default_factory=lambda: {b: [] for b in ORDER})
    traced: dict[str, Sample] = field(default_factory=dict)


def _written(out: Path, forget: bool = False) -> dict | None:
    """The child's report once it is written (the child renames it into place)."""
    if forget:
        out.unlink(missing_ok=True)
        return None
    return json.loads(out.read_text(encoding="utf-8")) if out.exists() else None


async def probe(bot: Bot, out: Path, timeout: float = 60.0) -> Probe:
    """Ask the child for its report (SIGUSR1) and wait, bounded, until it is written."""
    _written(out, forget=True)
    bot.process.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + timeout
    while (report := _written(out)) is None:
        if time.monotonic() > deadline or bot.process.returncode is not None:
            raise RuntimeError(f"{bot.name}: no memory report within {timeout:.0f}s:\n"
                               f"{bot.log_tail()}")
        await asyncio.sleep(0.05)
    return Probe(report["rss_kib"] / 1024, report["modules"], report["traced"])


async def one_run(name: str, anthropic_url: str, home: Path, users: list[int],
                  args: argparse.Namespace, trace: bool) -> Sample:
    out = home.parent / f"{home.name}.json"
    env = {"MEMORY_PROBE_OUT": str(out), "MEMORY_PROBE_TRACE": "1" if trace else "0",
           "MEMORY_PROBE_FRAMES": str(args.frames)}
    start_timeout = args.start_timeout * (4 if trace else 1)
    async with running_bot(name, anthropic_url, home, users, None, start_timeout,
                           probe=env) as bot:
        await asyncio.sleep(args.settle)
        wait = args.answer_timeout * (30 if trace else 1)   # a traced snapshot takes a while
        idle = await probe(bot, out, wait)
        chats = await chats_run(bot, users, args.delay + args.answer_timeout * (4 if trace else 1))
        await asyncio.sleep(args.settle)
        after = await probe(bot, out, wait)
    return Sample(idle, after, chats.answered)


def _users(run: int, chats: int) -> list[int]:
    return [CHAT_BASE + run * 1000 + i for i in range(chats)]


async def run(args: argparse.Namespace, tmp: Path) -> Results:
    results = Results()
    with fake_anthropic(delay=args.delay) as anthropic_url:
        print(f"RSS: idle, then {args.chats} chats at once (model {args.delay:.1f} s)", flush=True)
        for run_no in range(args.runs):
            for name in ORDER:
                sample = await one_run(name, anthropic_url, tmp / f"rss-{name}-{run_no}",
                                       _users(run_no, args.chats), args, trace=False)
                results.rss[name].append(sample)
                print(f"  run {run_no + 1} {name:<6}  idle {sample.idle.rss_mib:6.1f} MiB  "
                      f"after {sample.after.rss_mib:6.1f} MiB  growth {sample.growth:+5.1f} MiB  "
                      f"answered {sample.answered}/{args.chats}", flush=True)
        if args.top:
            print("by package: one run of each under tracemalloc", flush=True)
            for name in ORDER:
                results.traced[name] = await one_run(
                    name, anthropic_url, tmp / f"traced-{name}", _users(args.runs, args.chats),
                    args, trace=True)
    return results


def _table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) if i == 0 else cell.rjust(width)
                        for i, (cell, width) in enumerate(zip(row, widths, strict=True))).rstrip())


def _kib(value: int) -> str:
    return f"{value / 1024:,.0f}"


def package_table(traced: dict[str, Sample], top: int) -> None:
    mine, floor = traced["myclaw"], traced["floor"]
    names = set(mine.idle.traced) | set(floor.idle.traced) | set(mine.after.traced)
    # The package a Telegram bot's modules live in: "bot.llm" counts modules of "bot".
    def modules(sample: Probe, name: str) -> str:
        count = sample.modules.get(name.split(".")[0].removeprefix("(stdlib) "), 0)
        return str(count) if count and "." not in name else ""

    def cols(sample: Sample, name: str) -> tuple[str, str, str]:
        idle = sample.idle.traced.get(name, 0)
        grown = sample.after.traced.get(name, 0) - idle
        return modules(sample.idle, name), _kib(idle), f"{grown / 1024:+,.0f}"

    ranked = sorted(names, key=lambda n: -max(mine.idle.traced.get(n, 0),
                                              floor.idle.traced.get(n, 0)))
    rows = [("package", "myclaw mods", "idle KiB", "+chats KiB", "floor mods", "idle KiB",
             "+chats KiB")]
    rows += [(name, *cols(mine, name), *cols(floor, name)) for name in ranked[:top]]
    rest = ranked[top:]

    def rest_cols(sample: Sample) -> tuple[str, str, str]:
        idle = sum(sample.idle.traced.get(n, 0) for n in rest)
        after = sum(sample.after.traced.get(n, 0) for n in rest)
        return "", _kib(idle), f"{(after - idle) / 1024:+,.0f}"

    def total_cols(sample: Sample) -> tuple[str, str, str]:
        idle, after = sum(sample.idle.traced.values()), sum(sample.after.traced.values())
        return (str(sum(sample.idle.modules.values())), _kib(idle),
                f"{(after - idle) / 1024:+,.0f}")

    rows.append((f"({len(rest)} more)", *rest_cols(mine), *rest_cols(floor)))
    rows.append(("traced total", *total_cols(mine), *total_cols(floor)))
    rows.append(("RSS under tracemalloc (MiB)", "", f"{mine.idle.rss_mib:.1f}",
                 f"{mine.growth:+.1f}", "", f"{floor.idle.rss_mib:.1f}", f"{floor.growth:+.1f}"))
    print("\nlive bytes tracemalloc traces per package, after start-up (idle) and their change "
          "after the chats; modules loaded per top-level package\n")
    _table(rows)
    extra = sorted(set(mine.idle.modules) - set(floor.idle.modules))
    print(f"\ntop-level modules myclaw loads that the floor does not: {', '.join(extra)}")


def report(args: argparse.Namespace, results: Results) -> bool:
    if results.traced:
        package_table(results.traced, args.top)
    if not args.runs:
        return True
    med = {name: {"idle": statistics.median(s.idle.rss_mib for s in samples),
                  "after": statistics.median(s.after.rss_mib for s in samples),
                  "growth": statistics.median(s.growth for s in samples)}
           for name, samples in results.rss.items()}
    mine, floor = med["myclaw"], med["floor"]
    idle_ok = mine["idle"] <= IDLE_TARGET * floor["idle"]
    growth_ok = mine["growth"] <= max(floor["growth"], 0.0)
    answered = min(s.answered for samples in results.rss.values() for s in samples)
    rows = [("metric", "myclaw", "floor", "ratio", "target", ""),
            ("RSS idle (MiB)", f"{mine['idle']:.1f}", f"{floor['idle']:.1f}",
             f"{mine['idle'] / floor['idle']:.3f}x", f"≤ {IDLE_TARGET:.2f}x",
             "OK" if idle_ok else "NOT MET"),
            (f"RSS after {args.chats} chats (MiB)", f"{mine['after']:.1f}", f"{floor['after']:.1f}",
             f"{mine['after'] / floor['after']:.3f}x", "", ""),
            ("growth (MiB)", f"{mine['growth']:+.1f}", f"{floor['growth']:+.1f}", "",
             "≤ floor's", "OK" if growth_ok else "NOT MET"),
            ("answered (worst run)", f"{answered}/{args.chats}", "", "", "", "")]
    print(f"\nmemory, Telegram-only (median of {args.runs} runs each, alternating)\n")
    _table(rows)
    return idle_ok and growth_ok and answered == args.chats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="RSS runs of each (0: none)")
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument("--delay", type=float, default=1.0, help="model call seconds")
    parser.add_argument("--settle", type=float, default=1.5, help="seconds before each RSS")
    parser.add_argument("--top", type=int, default=25, help="packages in the table (0: none)")
    parser.add_argument("--frames", type=int, default=1,
                        help="tracemalloc frames per allocation (more: finer, much slower)")
    parser.add_argument("--start-timeout", type=float, default=60.0)
    parser.add_argument("--answer-timeout", type=float, default=20.0)
    parser.add_argument("--timeout", type=float, default=600.0, help="whole benchmark, seconds")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    try:
        with tempfile.TemporaryDirectory(prefix="myclaw-bench-mem-") as tmp:
            results = asyncio.run(asyncio.wait_for(run(args, Path(tmp)), args.timeout))
    except TimeoutError:
        print(f"memory benchmark: stopped after --timeout {args.timeout:.0f}s", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        print(f"memory benchmark failed: {exc}", file=sys.stderr)
        return 2
    ok = report(args, results)
    print(f"\nmachine: {os.cpu_count()} CPUs, 1-min load average {load:.2f} at the start")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
