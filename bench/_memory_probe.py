"""The child side of bench/memory.py: runs `myclaw run` or the floor bot unchanged, and on
SIGUSR1 writes what the process holds to $MEMORY_PROBE_OUT (JSON): its RSS, the modules loaded
per top-level package and, when started with MEMORY_PROBE_TRACE=1, the bytes tracemalloc sees
live per package.

    python bench/_memory_probe.py myclaw              # as `python -m bot run`
    python bench/_memory_probe.py floor bench/_floor_bot.py

An allocation is charged to the innermost of its MEMORY_PROBE_FRAMES frames (default 1) that
lies outside the import machinery: with one frame, the code objects of every imported module
count as "(import machinery)"; with more (much slower), for the package that imported them.
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import sys
import sysconfig
import tracemalloc

# bench/telegram.py beside this file would shadow python-telegram-bot: drop this directory.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != _HERE]
_ROOT = os.path.dirname(_HERE) + os.sep
_STDLIB = sysconfig.get_paths()["stdlib"] + os.sep
_SKIPPED = ("<frozen", "<string>")


def package_of(filename: str) -> str:
    if "site-packages" + os.sep in filename:
        top = filename.split("site-packages" + os.sep, 1)[1].split(os.sep, 1)[0]
        return top.split(".", 1)[0]
    if filename.startswith(_ROOT):
        parts = filename[len(_ROOT):].split(os.sep)
        if parts[0] in ("bot", "channels") and len(parts) > 2:
            return f"{parts[0]}.{parts[1]}"
        return parts[0].removesuffix(".py")
    if filename.startswith(_STDLIB):
        top = filename[len(_STDLIB):].split(os.sep, 1)[0]
        return "(stdlib) " + top.removesuffix(".py")
    return "(other)"


def traced_by_package() -> dict[str, int]:
    totals: dict[str, int] = {}
    for trace in tracemalloc.take_snapshot().traces:
        owner = "(import machinery)"
        for frame in reversed(trace.traceback):   # innermost first
            if not frame.filename.startswith(_SKIPPED) and "importlib" not in frame.filename:
                owner = package_of(frame.filename)
                break
        totals[owner] = totals.get(owner, 0) + trace.size
    return totals


def rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def dump(*_: object) -> None:
    modules: dict[str, int] = {}
    for name in list(sys.modules):
        top = name.split(".", 1)[0]
        modules[top] = modules.get(top, 0) + 1
    report = {"rss_kib": rss_kib(), "modules": modules,
              "traced": traced_by_package() if tracemalloc.is_tracing() else {}}
    path = os.environ["MEMORY_PROBE_OUT"]
    with open(path + ".tmp", "w", encoding="utf-8") as out:
        json.dump(report, out)
    os.replace(path + ".tmp", path)


def main() -> None:
    if os.environ.get("MEMORY_PROBE_TRACE") == "1":
        tracemalloc.start(int(os.environ.get("MEMORY_PROBE_FRAMES", "1")))
    signal.signal(signal.SIGUSR1, dump)
    which = sys.argv[1]
    if which == "floor":
        sys.argv = sys.argv[2:]
        runpy.run_path(sys.argv[0], run_name="__main__")
    else:
        sys.argv = ["myclaw", "run"]
        runpy.run_module("bot", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
