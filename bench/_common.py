"""Shared helpers for the benchmarks: the fake Anthropic in its own process, temp configs,
percentiles. Benchmarks send traffic only to 127.0.0.1."""

from __future__ import annotations

import contextlib
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@contextlib.contextmanager
def fake_anthropic(delay: float = 0.0, responder: str = "echo",
                   module: str = "tests.fakes.anthropic_server") -> Iterator[str]:
    """Run tests/fakes/anthropic_server.py (or another fake `module` with the same command
    line, e.g. tests.fakes.openai_server) in a separate process; yields its base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", module, "--delay", str(delay), "--responder", responder],
        cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        if not line.startswith("READY "):
            raise RuntimeError(f"{module} did not start: {line!r}")
        yield line.split(" ", 1)[1]
    finally:
        proc.terminate()
        proc.wait(10)


def make_config(base_url: str, overrides: dict[str, Any] | None = None,
                env: dict[str, str] | None = None) -> Any:
    from bot.config import settings as config_mod

    tmp = Path(tempfile.mkdtemp(prefix="myclaw-bench-"))
    raw: dict[str, Any] = {"agent": {"workspace": str(tmp / "ws"), "llm_max_retries": 0,
                                     "max_concurrent_llm_calls": 1000},
                           "store": {"path": str(tmp / "myclaw.db")}}
    for section, values in (overrides or {}).items():
        raw.setdefault(section, {}).update(values)
    env = {"HOME": str(tmp), "ANTHROPIC_API_KEY": "bench-key", "ANTHROPIC_BASE_URL": base_url,
           **(env or {})}
    return config_mod.from_dict(raw, env=env)


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary(values: list[float]) -> str:
    return (f"p50 {percentile(values, 50):7.2f} ms   p99 {percentile(values, 99):7.2f} ms   "
            f"mean {statistics.mean(values):7.2f} ms")


class NullSink:
    async def emit(self, event: object) -> None:
        return None
