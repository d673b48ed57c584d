"""What the bubblewrap sandbox adds to one shell_run command.

Runs the same commands --runs times (after one warm-up) through the process runner alone
(`/bin/sh -c`, what shell_run did before the sandbox) and through the sandbox (prlimit + bwrap
+ `/bin/sh -c`), one at a time, and prints the median and p90 wall time of each and the
difference. Also prints how long the one-time probe takes (done once per process, on the first
call). Needs bubblewrap.

    .venv/bin/python bench/shell_sandbox.py [--runs 30]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools._bwrap import Limits, probe
from tools._proc import run_process

COMMANDS = ["true", "ls -la", "grep -c a /usr/share/dict/words /etc/os-release || true"]


async def timed(make, runs: int) -> list[float]:
    await make()  # warm-up
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        result = await make()
        times.append(time.perf_counter() - started)
        assert result["timed_out"] is False
    return times


def line(label: str, times: list[float]) -> str:
    ordered = sorted(times)
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return f"{label:<34} median {statistics.median(times) * 1000:7.1f} ms   p90 {p90 * 1000:7.1f} ms"


async def main(runs: int) -> None:
    started = time.perf_counter()
    sandbox = await probe()
    print(f"probe (once per process): {(time.perf_counter() - started) * 1000:.1f} ms "
          f"({sandbox.bwrap}, optional flags {sandbox.optional_flags}, fresh /proc {sandbox.proc})")
    with tempfile.TemporaryDirectory() as folder:
        workspace = Path(folder)
        env = {"PATH": "/usr/bin:/bin"}
        for command in COMMANDS:
            plain = await timed(lambda c=command: run_process(
                ["/bin/sh", "-c", c], str(workspace), env, 30, 100_000, asyncio.Event()), runs)
            boxed = await timed(lambda c=command: sandbox.run(
                c, workspace, env, network=False, limits=Limits(), timeout=30, cap=100_000,
                stop=asyncio.Event()), runs)
            print(f"`{command}`")
            print("  " + line("plain /bin/sh -c", plain))
            print("  " + line("prlimit + bwrap + /bin/sh -c", boxed))
            extra = statistics.median(boxed) - statistics.median(plain)
            print(f"  sandbox adds {extra * 1000:.1f} ms per command (median)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    asyncio.run(main(parser.parse_args().runs))
