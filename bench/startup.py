"""Start-up time and idle memory of `myclaw run`, next to the floor.

For each configuration, `myclaw run` is started as a child process (the same `bot.ops.cli.main` the
console script calls) with a temporary config and environment, and timed from just before the
spawn to its log line "myclaw ready". Idle RSS is VmRSS from /proc/<pid>/status after a settle
period. The floor is a Python process that only imports the libraries that configuration needs
and then reports ready the same way.

    CLI-only      no tokens: the terminal channel          floor: anthropic aiosqlite jsonschema httpx
    Telegram      Telegram on the local fake               floor: + telegram.ext
    all channels  Telegram + Discord on local fakes        floor: + telegram.ext discord

Every byte of traffic stays on 127.0.0.1: Telegram and Discord are the fakes from tests/fakes/
(Discord has no base-URL option, so the child points discord.py at the fake before running main,
as the tests do), and ANTHROPIC_BASE_URL points at a closed local port (start-up makes no model
call). Each measurement is bounded by a timeout; a run that does not get ready is reported, not
waited for. Prints the median of --runs runs (default 5) after one discarded warm-up run, then
what the message catalogs cost: loading them once, and their work per message.

    .venv/bin/python bench/startup.py [--runs 5] [--settle 1.0] [--timeout 30]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
READY_MARK = "myclaw ready"
TELEGRAM_TOKEN = "123456:TEST-token_abc"
DISCORD_TOKEN = "OTAwMDAwMDAwMDAwMDAwMDAx.GFAKE0.fake-bench-hmac-0000000"   # shaped as Discord's

CLI_LIBS = ("anthropic", "aiosqlite", "jsonschema", "httpx")
TELEGRAM_LIBS = (*CLI_LIBS, "telegram.ext")
ALL_LIBS = (*TELEGRAM_LIBS, "discord")

# The child: optionally point discord.py at the fake, then run the real command line.
APP_BOOTSTRAP = """\
import sys
rest, gateway = sys.argv[1], sys.argv[2]
if rest:
    import discord.gateway, discord.http, yarl
    discord.http.Route.BASE = rest
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway)
from bot.ops.cli import main
sys.exit(main(sys.argv[3:]))
"""
FLOOR_BOOTSTRAP = f"""\
import importlib, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print("{READY_MARK} (floor)", file=sys.stderr, flush=True)
sys.stdin.read()
"""


@dataclass
class Sample:
    ready_ms: float | None      # None: not ready within the timeout
    rss_kib: int | None
    why: str = ""


@dataclass
class Fakes:
    telegram_base: str = ""
    discord_rest: str = ""
    discord_gateway: str = ""


def closed_local_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def vm_rss_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def child_env(home: Path, channels: tuple[str, ...]) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "LANG": "C.UTF-8",
        "ANTHROPIC_API_KEY": "sk-bench-not-a-real-key",
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{closed_local_port()}",
    }
    if "telegram" in channels:
        env["TELEGRAM_BOT_TOKEN"] = TELEGRAM_TOKEN
    if "discord" in channels:
        env["DISCORD_BOT_TOKEN"] = DISCORD_TOKEN
    return env


def write_config(home: Path, fakes: Fakes | None) -> Path:
    lines = ["[agent]", f'workspace = "{home / "workspace"}"', "",
             "[log]", 'format = "text"', 'level = "INFO"', ""]
    if fakes is not None:
        lines += ["[telegram]", f'base_url = "{fakes.telegram_base}/bot"',
                  f'base_file_url = "{fakes.telegram_base}/file/bot"', "",
                  # No guilds on the fake: discord.py would otherwise wait 2 s for guild data that
                  # a real gateway sends at once.
                  "[discord]", "guild_ready_timeout = 0.1", ""]
    path = home / "myclaw.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    path.chmod(0o600)
    return path


async def measure(argv: list[str], env: dict[str, str], settle: float, timeout: float) -> Sample:
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        *argv, env=env, cwd=env["HOME"], stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    assert process.stderr is not None
    tail: list[str] = []
    try:
        ready_ms = await asyncio.wait_for(_ready_line(process.stderr, tail, started), timeout)
    except TimeoutError:
        await _stop(process)
        return Sample(None, None, f"not ready within {timeout:.0f}s; last: {tail[-3:]}")
    if ready_ms is None:
        await _stop(process)
        return Sample(None, None, f"exited {process.returncode}; last: {tail[-3:]}")
    drain = asyncio.create_task(_drain(process.stderr))  # a full pipe would stall the child
    await asyncio.sleep(settle)  # idle period before reading memory: this is the measurement
    rss = vm_rss_kib(process.pid)
    await _stop(process)
    drain.cancel()
    return Sample(ready_ms, rss)


async def _ready_line(stream: asyncio.StreamReader, tail: list[str], started: float) -> float | None:
    while line := await stream.readline():
        text = line.decode(errors="replace").rstrip()
        tail.append(text[-160:])
        if READY_MARK in text:
            return (time.perf_counter() - started) * 1000
    return None


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.read(65536):
        pass


async def _stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), 10)
        except TimeoutError:
            process.kill()
            await process.wait()


@contextlib.asynccontextmanager
async def running_fakes() -> AsyncIterator[Fakes]:
    sys.path.insert(0, str(ROOT))
    from tests.fakes.discord_server import FakeDiscord
    from tests.fakes.telegram_server import FakeTelegram

    async with FakeTelegram(token=TELEGRAM_TOKEN) as telegram, \
            FakeDiscord(token=DISCORD_TOKEN) as discord_fake:
        yield Fakes(telegram_base=telegram.base_url.removesuffix("/bot"),
                    discord_rest=discord_fake.rest_base,
                    discord_gateway=str(discord_fake.gateway_url))


@dataclass
class Command:
    configuration: str
    argv: list[str]
    env: dict[str, str]
    samples: list[Sample]


def commands_for(name: str, home: Path, fakes: Fakes | None, libs: tuple[str, ...],
                 channels: tuple[str, ...] = ()) -> list[Command]:
    """The app and its floor for one configuration, with their own config and environment."""
    home.mkdir()
    config = write_config(home, fakes)
    env = child_env(home, channels)
    rest = fakes.discord_rest if fakes else ""
    gateway = fakes.discord_gateway if fakes else ""
    # --log-level: the terminal chat keeps log lines out of the conversation unless asked for
    # one, and the ready line is one.
    app = [sys.executable, "-c", APP_BOOTSTRAP, rest, gateway, "--config", str(config),
           "--log-level", "INFO", "run"]
    floor = [sys.executable, "-c", FLOOR_BOOTSTRAP, *libs]
    return [Command(name, app, env, []), Command(name, floor, env, [])]


async def run_interleaved(commands: list[Command], args: argparse.Namespace) -> None:
    """One discarded warm-up each (page cache, first store migration), then round-robin runs so
    that drift in machine load hits every command alike."""
    for command in commands:
        await measure(command.argv, command.env, 0.0, args.timeout)
    for _ in range(args.runs):
        for command in commands:
            command.samples.append(await measure(command.argv, command.env, args.settle,
                                                 args.timeout))


def _median(values: list[float | int | None]) -> float | None:
    real = [v for v in values if v is not None]
    return statistics.median(real) if len(real) == len(values) and real else None


def _cell(value: float | None, scale: float = 1.0, unit: str = "", signed: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value / scale:+.0f}{unit}" if signed else f"{value / scale:.0f}{unit}"


def report(commands: list[Command], runs: int) -> None:
    print(f"\nmyclaw start-up (median of {runs} runs)\n")
    header = (f"{'configuration':<14}{'ready ms':>10}{'floor ms':>10}{'overhead':>10}"
              f"{'idle RSS':>11}{'floor RSS':>11}{'overhead':>10}")
    print(header)
    print("-" * len(header))
    for app, floor in zip(commands[::2], commands[1::2], strict=True):
        ready, floor_ready = (_median([s.ready_ms for s in c.samples]) for c in (app, floor))
        rss, floor_rss = (_median([s.rss_kib for s in c.samples]) for c in (app, floor))
        extra_ms = ready - floor_ready if ready is not None and floor_ready is not None else None
        extra_rss = rss - floor_rss if rss is not None and floor_rss is not None else None
        print(f"{app.configuration:<14}{_cell(ready):>10}{_cell(floor_ready):>10}"
              f"{_cell(extra_ms, signed=True):>10}{_cell(rss, 1024, ' MiB'):>11}"
              f"{_cell(floor_rss, 1024, ' MiB'):>11}{_cell(extra_rss, 1024, ' MiB', signed=True):>10}")
        for sample in app.samples + floor.samples:
            if sample.why:
                print(f"  ! {app.configuration}: {sample.why}")


# The message catalogs, in a fresh interpreter that has imported what the bot imports anyway:
# importing bot.language and reading the three compiled catalogs (start-up pays it: Telegram's
# menus name all three), Babel's first date format (paid once, by the first card), then what a
# message pays for its words (the reader's translator and a notice) and what an approval card's
# lines cost (with its two times in the reader's format).
CATALOG_PROBE = """\
import time
import bot.core.events, bot.config.settings
t0 = time.perf_counter()
from bot.language.catalogs import translator
for language in ("en", "it", "es"):
    translator(language)
t1 = time.perf_counter()
translator("it").clock(1.8e9)
t2 = time.perf_counter()
from bot.language.phrase import Phrase
said = Phrase("Started a fresh conversation.")
for _ in range(5000):
    translator("it").at("Europe/Rome").say(said)
t3 = time.perf_counter()
for _ in range(500):
    tr = translator("it").at("Europe/Rome")
    tr._("Approval needed"), tr._("Requested by: {who}", who="telegram:1")
    tr._("Expires at {time}.", time=tr.clock(1.8e9)), tr.clock(1.8e9 + 60)
t4 = time.perf_counter()
print(f"{(t1 - t0) * 1e3:.2f} {(t2 - t1) * 1e3:.2f} {(t3 - t2) / 5000 * 1e6:.2f} "
      f"{(t4 - t3) / 500 * 1e6:.1f}")
"""


def catalog_figures(runs: int) -> list[float]:
    """Medians of: ms to import and load every catalog, ms of Babel's first format, µs of
    catalog work per message, µs per approval card."""
    import subprocess

    samples = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", CATALOG_PROBE], cwd=ROOT, check=True,
                             capture_output=True, text=True, timeout=60).stdout.split()
        samples.append([float(value) for value in out])
    return [statistics.median(column) for column in zip(*samples, strict=True)]


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--settle", type=float, default=1.0, help="idle seconds before reading RSS")
    parser.add_argument("--timeout", type=float, default=30.0, help="per run, seconds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="myclaw-bench-") as tmp:
        async with running_fakes() as fakes:
            commands = [*commands_for("CLI-only", Path(tmp) / "cli", None, CLI_LIBS),
                        *commands_for("Telegram", Path(tmp) / "tg", fakes, TELEGRAM_LIBS,
                                      ("telegram",)),
                        *commands_for("all channels", Path(tmp) / "all", fakes, ALL_LIBS,
                                      ("telegram", "discord"))]
            await run_interleaved(commands, args)
    report(commands, args.runs)
    load_ms, first_format_ms, message_us, card_us = catalog_figures(args.runs)
    print(f"\ncatalogs: {load_ms:.1f} ms to import and load en/it/es at start; "
          f"{first_format_ms:.1f} ms for Babel's first date format (once, the first card); "
          f"{message_us:.1f} µs per message; {card_us:.0f} µs per approval card (Italian)")
    return 1 if any(s.ready_ms is None for c in commands for s in c.samples) else 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
