"""Telegram end to end: per-message latency and 100 chats at once, myclaw next to the floor.

Both bots run as child processes against a fake Telegram Bot API (in this process, one fresh
instance per bot) and a fake Anthropic (its own process, so its CPU is not the bot's):

    myclaw  `python -m bot run` with a temporary myclaw.toml ([telegram] base_url → the fake,
            every benchmark sender "full"), TELEGRAM_BOT_TOKEN, ANTHROPIC_BASE_URL → the fake
    floor   bench/_floor_bot.py: bare python-telegram-bot + anthropic with their default HTTP
            clients, one non-streaming messages.create and reply_text per message,
            concurrent_updates(True)

1. latency: N private messages, one at a time (the next one --gap seconds after the previous
   answer), model answering at once; one conversation per run, so its history grows from empty.
   Latency = from the moment the update is made available to the bot's getUpdates long poll
   until the fake receives the request (sendMessage, or the editMessageText that completes a
   streamed message) carrying the full answer text. Target: p50 ≤ 15 ms. Also printed: where
   the time goes (stages timed by both fakes), Bot API calls and the bot's own CPU per message.
2. 100 chats: 100 different senders send one message at the same moment, every model call takes
   1.0 s. Wall time until all 100 answers arrived. Target ≤ 1.5 s, all answered.

Both bots stay up for the whole phase and their runs are interleaved, so drift in machine load
hits both alike; each bot is warmed up first. Prints each run and the median of --runs runs.
The bots, the fakes and this process share the machine's CPUs: load from anything else running
inflates the figures (the load average is printed). All traffic stays on 127.0.0.1; every wait
is bounded, the children are always stopped, and the whole run ends after --timeout seconds.

    .venv/bin/python bench/telegram.py [--messages 100] [--chats 100] [--runs 3]
    .venv/bin/python bench/telegram.py --skip-chats --profile /tmp/myclaw.prof   # cProfile
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import contextvars
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import ROOT, fake_anthropic, percentile

from tests.fakes.telegram_server import Call, FakeTelegram

TOKEN = "123456:TEST-token_abc"
LATENCY_USER = 4242
WARMUP_USER = 4343
CHAT_BASE = 100_000            # senders of the 100-chat runs: CHAT_BASE + run * 1000 + i
LATENCY_TARGET_MS = 15.0
CHATS_TARGET_S = 1.5
ANSWER_METHODS = ("sendMessage", "editMessageText")
BOTS = ("myclaw", "floor")

_arrived: contextvars.ContextVar[float] = contextvars.ContextVar("arrived", default=0.0)


@dataclass
class Exchange:
    """One message and its answer: perf_counter() times, seconds (0.0 = not seen)."""

    injected: float = 0.0     # the update was made available to getUpdates
    delivered: float = 0.0    # a getUpdates answer carrying it was produced
    model_call: float = 0.0   # the model request arrived at the fake Anthropic (filled in later)
    first_call: float = 0.0   # the first sendMessage/editMessageText for its chat arrived
    answered: float = 0.0     # the request carrying the full answer text arrived

    @property
    def ms(self) -> float:
        return (self.answered - self.injected) * 1000


@dataclass
class _Pending:
    text: str
    exchange: Exchange
    done: asyncio.Future[Exchange]


class TimedTelegram(FakeTelegram):
    """The fake Bot API, plus the times of each expected answer (see Exchange) and a count of
    the bot's API calls per chat. Work per request is O(1), so the fake stays light
    (FakeTelegram.wait_for rescans every call: used only to wait for the first poll)."""

    def __init__(self) -> None:
        super().__init__(token=TOKEN)
        self._pending: dict[int, _Pending] = {}
        self.api_calls: dict[int, int] = {}

    def send(self, user: int, text: str, answer: str) -> asyncio.Future[Exchange]:
        """Make a private message available now; the future resolves when `answer` arrives."""
        pending = _Pending(answer, Exchange(), asyncio.get_running_loop().create_future())
        self._pending[user] = pending
        pending.exchange.injected = time.perf_counter()
        self.private_message(user, text)
        return pending.done

    async def _dispatch(self, request: Any) -> Any:
        _arrived.set(time.perf_counter())   # each request runs in its own task: its own context
        return await super()._dispatch(request)

    async def _api_getUpdates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        updates = await super()._api_getUpdates(params)
        now = time.perf_counter()
        for update in updates:
            pending = self._pending.get(update.get("message", {}).get("chat", {}).get("id"))
            if pending is not None and not pending.exchange.delivered:
                pending.exchange.delivered = now
        return updates

    async def _record(self, call: Call) -> None:
        if call.error is None and call.method != "getUpdates":
            try:
                chat = int(call.params.get("chat_id", 0))
            except (TypeError, ValueError):
                chat = 0
            self.api_calls[chat] = self.api_calls.get(chat, 0) + 1
            pending = self._pending.get(chat)
            if pending is not None and call.method in ANSWER_METHODS:
                arrived = _arrived.get() or time.perf_counter()
                exchange = pending.exchange
                exchange.first_call = exchange.first_call or arrived
                if call.params.get("text") == pending.text:
                    exchange.answered = arrived
                    del self._pending[chat]
                    if not pending.done.done():
                        pending.done.set_result(exchange)
        await super()._record(call)

    async def polls(self, count: int, timeout: float) -> None:
        await self.wait_for("getUpdates", timeout=timeout, count=count)


# --- the bots -------------------------------------------------------------------------------


@dataclass
class Bot:
    name: str
    tg: TimedTelegram
    process: asyncio.subprocess.Process
    log_path: Path

    def cpu_seconds(self) -> float | None:
        """User + system CPU time the child has used so far (Linux /proc), None if unknown."""
        try:
            with open(f"/proc/{self.process.pid}/stat", encoding="ascii") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mib(self) -> float | None:
        """The child's resident memory now (VmRSS), None if unknown."""
        try:
            with open(f"/proc/{self.process.pid}/status", encoding="ascii") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024
        except (OSError, ValueError, IndexError):
            return None
        return None

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def write_config(home: Path, tg: FakeTelegram, senders: list[int]) -> Path:
    lines = ["[agent]", f'workspace = "{home / "workspace"}"', "",
             "[store]", f'path = "{home / "data" / "myclaw.db"}"', "",
             "[senders]", *(f'"telegram:{sender}" = "full"' for sender in senders), "",
             "[telegram]", f'base_url = "{tg.base_url}"', f'base_file_url = "{tg.base_file_url}"', "",
             # The floor bot has no per-sender rate limit, and the latency run sends 110 messages
             # from one sender in a few seconds: measure the message path, not the limiter.
             "[rate_limits]", "messages_per_minute = 0", ""]
    path = home / "myclaw.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    path.chmod(0o600)
    return path


def _command(name: str, anthropic_url: str, home: Path, tg: FakeTelegram, senders: list[int],
             profile: str | None) -> tuple[list[str], dict[str, str]]:
    """The child's command line and its whole environment (nothing inherited but PATH)."""
    home.mkdir(parents=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8",
           "PYTHONPATH": str(ROOT), "TELEGRAM_BOT_TOKEN": TOKEN, "ANTHROPIC_API_KEY": "bench",
           "ANTHROPIC_BASE_URL": anthropic_url}
    if name == "myclaw":
        env["MYCLAW_CONFIG"] = str(write_config(home, tg, senders))
        prof = ["-m", "cProfile", "-o", profile] if profile else []
        return [sys.executable, *prof, "-m", "bot", "run"], env
    env["TELEGRAM_BASE_URL"] = tg.base_url
    return [sys.executable, str(ROOT / "bench" / "_floor_bot.py")], env


@contextlib.asynccontextmanager
async def running_bot(name: str, anthropic_url: str, home: Path, senders: list[int],
                      profile: str | None, start_timeout: float,
                      probe: dict[str, str] | None = None) -> AsyncIterator[Bot]:
    """Start one bot on its own fake Telegram; yield once it is long-polling; always stop it.
    It runs in its own temporary home (its cwd too, so no project-local file is picked up).
    With `probe` (extra environment), the bot runs under bench/_memory_probe.py."""
    async with TimedTelegram() as tg:
        argv, env = _command(name, anthropic_url, home, tg, senders, profile)
        if probe is not None:
            floor_script = argv[1:] if name == "floor" else []
            argv = [sys.executable, str(ROOT / "bench" / "_memory_probe.py"), name, *floor_script]
            env.update(probe)
        log_path = home / f"{name}.log"
        log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            process = await asyncio.create_subprocess_exec(
                *argv, env=env, cwd=home, stdin=asyncio.subprocess.DEVNULL, stdout=log_fd,
                stderr=log_fd)
        finally:
            os.close(log_fd)
        bot = Bot(name, tg, process, log_path)
        try:
            await _ready(bot, start_timeout)
            yield bot
        finally:
            await _stop(process)


async def _ready(bot: Bot, timeout: float) -> None:
    polling = asyncio.create_task(bot.tg.polls(1, timeout))
    exited = asyncio.create_task(bot.process.wait())
    try:
        await asyncio.wait({polling, exited}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (polling, exited):
            task.cancel()
        await asyncio.gather(polling, exited, return_exceptions=True)
    if not (polling.done() and not polling.cancelled() and polling.exception() is None):
        raise RuntimeError(f"{bot.name} did not start long polling within {timeout:.1f}s "
                           f"(exit code {bot.process.returncode}):\n{bot.log_tail()}")


async def _stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), 20)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()


# --- measurements ---------------------------------------------------------------------------


@dataclass
class LatencyRun:
    exchanges: list[Exchange]
    calls_per_message: float
    cpu_ms_per_message: float | None   # the bot process's own CPU time

    @property
    def ms(self) -> list[float]:
        return [e.ms for e in self.exchanges]

    @property
    def p50(self) -> float:
        return percentile(self.ms, 50)

    @property
    def p99(self) -> float:
        return percentile(self.ms, 99)

    @property
    def mean(self) -> float:
        return statistics.mean(self.ms)

    @property
    def first_tenth_p50(self) -> float:
        return percentile(self.ms[:max(1, len(self.ms) // 10)], 50)

    @property
    def last_tenth_p50(self) -> float:
        return percentile(self.ms[-max(1, len(self.ms) // 10):], 50)


@dataclass
class ChatsRun:
    wall_s: float | None     # None: not every chat answered within the timeout
    answered: int
    chats: int
    started: float
    exchanges: list[Exchange]
    cpu_s: float | None                                      # the bot process's own CPU time
    model_calls: list[float] = field(default_factory=list)   # arrivals at the fake Anthropic

    def spans(self) -> str:
        """When model requests and answers arrived, in seconds after the messages went out."""
        def span(times: list[float]) -> str:
            if not times:
                return "n/a"
            return f"{min(times) - self.started:.2f}–{max(times) - self.started:.2f} s"
        answers = [e.answered for e in self.exchanges if e.answered]
        return f"model requests {span(self.model_calls)}, answers {span(answers)}"


@dataclass
class Results:
    latency: dict[str, list[LatencyRun]] = field(default_factory=lambda: {b: [] for b in BOTS})
    chats: dict[str, list[ChatsRun]] = field(default_factory=lambda: {b: [] for b in BOTS})
    # Resident memory of each bot once polling (idle) and after the latency runs.
    idle_rss: dict[str, float | None] = field(default_factory=dict)
    used_rss: dict[str, float | None] = field(default_factory=dict)


async def one_message(bot: Bot, user: int, text: str, timeout: float) -> Exchange:
    try:
        return await asyncio.wait_for(bot.tg.send(user, text, f"ok: {text}"), timeout)
    except TimeoutError:
        raise RuntimeError(f"{bot.name}: no answer to {text!r} within {timeout:.0f}s:\n"
                           f"{bot.log_tail()}") from None


async def latency_run(bot: Bot, user: int, messages: int, gap: float,
                      timeout: float) -> LatencyRun:
    """One conversation of `messages` exchanges (its history grows from empty as it goes)."""
    exchanges = []
    cpu_before = bot.cpu_seconds()
    for i in range(messages):
        exchanges.append(await one_message(bot, user, f"ping {i}", timeout))
        await asyncio.sleep(gap)   # let the bot finish its own after-answer work first
    cpu_after = bot.cpu_seconds()
    cpu = None if cpu_before is None or cpu_after is None \
        else (cpu_after - cpu_before) * 1000 / messages
    return LatencyRun(exchanges, bot.tg.api_calls.get(user, 0) / messages, cpu)


async def chats_run(bot: Bot, users: list[int], timeout: float) -> ChatsRun:
    cpu_before = bot.cpu_seconds()
    started = time.perf_counter()
    # All made available in the same instant: the bot fetches them in one getUpdates batch.
    answers = [bot.tg.send(user, f"hello {user}", f"ok: hello {user}") for user in users]
    done, pending = await asyncio.wait(answers, timeout=timeout)
    for future in pending:
        future.cancel()
    exchanges = [f.result() for f in done]
    slowest = max((e.answered - started for e in exchanges), default=0.0)
    cpu_after = bot.cpu_seconds()
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    return ChatsRun(slowest if not pending else None, len(done), len(users), started, exchanges,
                    cpu)


async def model_request_times(anthropic_url: str) -> list[float]:
    """Arrival times of every model request so far, from the fake Anthropic's own log."""
    import aiohttp

    async with aiohttp.ClientSession() as session, \
            session.get(f"{anthropic_url}/_fake/requests") as response:
        recorded = await response.json()
    # The fake stamps arrivals with time.monotonic(); on Linux perf_counter() is the same clock.
    return sorted(r["time"] for r in recorded if r["path"].endswith("/messages"))


async def add_model_call_times(anthropic_url: str, runs: list[LatencyRun]) -> None:
    """Match each exchange with the model request that arrived while it was in flight (the
    messages were sent one at a time, so there is exactly one), from the fake's own log."""
    times = await model_request_times(anthropic_url)
    for exchange in (e for run in runs for e in run.exchanges):
        index = bisect.bisect_left(times, exchange.injected)
        if index < len(times) and times[index] <= exchange.answered:
            exchange.model_call = times[index]


# --- phases ---------------------------------------------------------------------------------


async def latency_phase(args: argparse.Namespace, tmp: Path, results: Results) -> None:
    # One sender (so one fresh session) per run, warm-up on another: runs are alike.
    senders = [LATENCY_USER + run for run in range(args.runs + 1)]
    with fake_anthropic(delay=0.0) as anthropic_url:
        async with running_bot("myclaw", anthropic_url, tmp / "lat-myclaw", senders, args.profile,
                               args.start_timeout) as mine, \
                running_bot("floor", anthropic_url, tmp / "lat-floor", senders, None,
                            args.start_timeout) as floor:
            bots = {"myclaw": mine, "floor": floor}
            results.idle_rss = {name: bot.rss_mib() for name, bot in bots.items()}
            for bot in bots.values():
                for i in range(args.warmup):
                    await one_message(bot, LATENCY_USER, f"warm up {i}", args.answer_timeout)
            for run in range(args.runs):
                for name, bot in bots.items():
                    result = await latency_run(bot, senders[run + 1], args.messages, args.gap,
                                               args.answer_timeout)
                    results.latency[name].append(result)
                    print(f"  latency run {run + 1} {name:<6}  p50 {result.p50:6.2f} ms  "
                          f"p99 {result.p99:6.2f} ms  mean {result.mean:6.2f} ms  "
                          f"(p50 first/last tenth {result.first_tenth_p50:5.2f}/"
                          f"{result.last_tenth_p50:5.2f} ms; "
                          f"{result.calls_per_message:.1f} Bot API calls/message, bot CPU "
                          f"{_fmt(result.cpu_ms_per_message, 'ms')}/message)", flush=True)
            results.used_rss = {name: bot.rss_mib() for name, bot in bots.items()}
            await add_model_call_times(anthropic_url, [r for name in BOTS
                                                       for r in results.latency[name]])


async def chats_phase(args: argparse.Namespace, tmp: Path, results: Results) -> None:
    users = [[CHAT_BASE + run * 1000 + i for i in range(args.chats)] for run in range(args.runs)]
    senders = [WARMUP_USER, *(user for run in users for user in run)]
    timeout = args.delay + args.answer_timeout
    with fake_anthropic(delay=args.delay) as anthropic_url:
        async with running_bot("myclaw", anthropic_url, tmp / "chats-myclaw", senders, args.profile
                               and f"{args.profile}.chats", args.start_timeout) as mine, \
                running_bot("floor", anthropic_url, tmp / "chats-floor", senders, None,
                            args.start_timeout) as floor:
            bots = {"myclaw": mine, "floor": floor}
            for bot in bots.values():
                await one_message(bot, WARMUP_USER, "warm up", timeout)
            for run in range(args.runs):
                for name, bot in bots.items():
                    await asyncio.sleep(args.settle)   # leftovers of the previous run (typing...)
                    result = await chats_run(bot, users[run], timeout)
                    results.chats[name].append(result)
                    wall = f"{result.wall_s:5.2f} s" if result.wall_s is not None else "  n/a  "
                    print(f"  {args.chats} chats run {run + 1} {name:<6}  wall {wall}  "
                          f"answered {result.answered}/{result.chats}  bot CPU "
                          f"{_fmt(result.cpu_s, 's')}", flush=True)
            times = await model_request_times(anthropic_url)   # once, after the measurements
            print("  when model requests and answers arrived, after the messages went out:")
            for run in range(args.runs):
                for name in BOTS:
                    result = results.chats[name][run]
                    end = result.started + (result.wall_s or timeout)
                    result.model_calls = [t for t in times if result.started <= t <= end]
                    print(f"    run {run + 1} {name:<6}  {result.spans()}")


# --- report ---------------------------------------------------------------------------------


def _median(values: list[float | None]) -> float | None:
    real = [v for v in values if v is not None]
    return statistics.median(real) if real and len(real) == len(values) else None


def _fmt(value: float | None, unit: str) -> str:
    return "n/a" if value is None else f"{value:.2f} {unit}"


STAGES = (
    ("update made available → handed out by getUpdates", "injected", "delivered"),
    ("handed out → model request arrives", "delivered", "model_call"),
    ("model request → first answer call arrives", "model_call", "first_call"),
    ("first answer call → full answer arrives", "first_call", "answered"),
    ("total", "injected", "answered"),
)


def breakdown(results: Results) -> None:
    """Median of each stage over every measured message (stages need not add up exactly)."""
    columns: dict[str, list[Exchange]] = {
        "myclaw": [e for r in results.latency["myclaw"] for e in r.exchanges],
        "myclaw last 10%": [e for r in results.latency["myclaw"]
                            for e in r.exchanges[-max(1, len(r.exchanges) // 10):]],
        "floor": [e for r in results.latency["floor"] for e in r.exchanges],
    }
    rows = []
    for label, start, end in STAGES:
        cells = []
        for exchanges in columns.values():
            spans = [(getattr(e, end) - getattr(e, start)) * 1000 for e in exchanges
                     if getattr(e, start) and getattr(e, end)]
            cells.append(f"{statistics.median(spans):.2f} ms" if spans else "n/a")
        rows.append((label, *cells))
    print("\nwhere the latency goes (median per stage over all measured messages; the model "
          "request time comes from the fake Anthropic's log)")
    _table([("stage", *columns), *rows])


def _table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) if i == 0 else cell.rjust(width)
                        for i, (cell, width) in enumerate(zip(row, widths, strict=True))).rstrip())


def report(args: argparse.Namespace, results: Results) -> bool:
    rows: list[tuple[str, ...]] = []
    ok_all = True
    if not args.skip_latency:
        lat = {b: results.latency[b] for b in BOTS}
        for label, key in (("p50", "p50"), ("p99", "p99"), ("mean", "mean")):
            mine = _median([getattr(r, key) for r in lat["myclaw"]])
            floor = _median([getattr(r, key) for r in lat["floor"]])
            ratio = f"{mine / floor:.2f}x" if mine and floor else "n/a"
            target, verdict = "", ""
            if key == "p50":
                target = f"≤ {LATENCY_TARGET_MS:.0f} ms"
                met = mine is not None and mine <= LATENCY_TARGET_MS
                verdict = "OK" if met else "NOT MET"
                ok_all &= met
            rows.append((f"latency {label}", _fmt(mine, "ms"), _fmt(floor, "ms"), ratio,
                         target, verdict))
        for label, key in (("p50, first tenth", "first_tenth_p50"),
                           ("p50, last tenth", "last_tenth_p50")):
            mine = _median([getattr(r, key) for r in lat["myclaw"]])
            floor = _median([getattr(r, key) for r in lat["floor"]])
            rows.append((f"  {label}", _fmt(mine, "ms"), _fmt(floor, "ms"), "", "", ""))
        cpu = {b: _median([r.cpu_ms_per_message for r in lat[b]]) for b in BOTS}
        rows.append(("bot CPU per message", _fmt(cpu["myclaw"], "ms"), _fmt(cpu["floor"], "ms"),
                     f"{cpu['myclaw'] / cpu['floor']:.2f}x" if cpu["myclaw"] and cpu["floor"]
                     else "n/a", "", ""))
        for label, rss in (("RSS, idle once polling", results.idle_rss),
                           ("RSS, after the latency runs", results.used_rss)):
            mine, floor = rss.get("myclaw"), rss.get("floor")
            rows.append((label, _fmt(mine, "MiB"), _fmt(floor, "MiB"),
                         f"{mine / floor:.2f}x" if mine and floor else "n/a", "", ""))
        calls = {b: _median([r.calls_per_message for r in lat[b]]) for b in BOTS}
        rows.append(("Bot API calls/msg", _fmt(calls["myclaw"], ""), _fmt(calls["floor"], ""),
                     "", "", ""))
    if not args.skip_chats:
        ch = {b: results.chats[b] for b in BOTS}
        walls = {b: _median([r.wall_s for r in ch[b]]) for b in BOTS}
        answered = {b: min((r.answered for r in ch[b]), default=0) for b in BOTS}
        met = (walls["myclaw"] is not None and walls["myclaw"] <= CHATS_TARGET_S
               and answered["myclaw"] == args.chats)
        ok_all &= met
        ratio = f"{walls['myclaw'] / walls['floor']:.2f}x" if walls["myclaw"] and walls["floor"] \
            else "n/a"
        rows.append((f"{args.chats} chats, model {args.delay:.1f} s", _fmt(walls["myclaw"], "s"),
                     _fmt(walls["floor"], "s"), ratio, f"≤ {CHATS_TARGET_S:.1f} s",
                     "OK" if met else "NOT MET"))
        rows.append(("  answered (worst run)", f"{answered['myclaw']}/{args.chats}",
                     f"{answered['floor']}/{args.chats}", "", f"{args.chats}/{args.chats}",
                     "OK" if answered["myclaw"] == args.chats else "NOT MET"))
        cpu = {b: _median([r.cpu_s for r in ch[b]]) for b in BOTS}
        rows.append(("  bot CPU per burst", _fmt(cpu["myclaw"], "s"), _fmt(cpu["floor"], "s"),
                     f"{cpu['myclaw'] / cpu['floor']:.2f}x" if cpu["myclaw"] and cpu["floor"]
                     else "n/a", "", ""))
    if not args.skip_latency:
        breakdown(results)
    latency = "" if args.skip_latency else \
        f"; latency: {args.messages} messages per run after {args.warmup} warm-up"
    print(f"\nTelegram end to end (median of {args.runs} runs{latency})\n")
    _table([("metric", "myclaw", "floor", "ratio", "target", ""), *rows])
    return ok_all


async def run(args: argparse.Namespace) -> bool:
    results = Results()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="myclaw-bench-tg-") as tmp:
        if not args.skip_latency:
            print("latency: one message at a time, model answers at once", flush=True)
            await latency_phase(args, Path(tmp), results)
        if not args.skip_chats:
            print(f"{args.chats} chats at once, each model call takes {args.delay:.1f} s", flush=True)
            await chats_phase(args, Path(tmp), results)
    ok = report(args, results)
    load_after = os.getloadavg()[0]
    print(f"\nmachine: {os.cpu_count()} CPUs, 1-min load average {load_before:.2f} before, "
          f"{load_after:.2f} after (the bot, the floor and both fakes share these CPUs)")
    if load_before > 0.5 * (os.cpu_count() or 1):
        print("  ! the machine was busy when the benchmark started: figures may be inflated")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100, help="latency: messages per run")
    parser.add_argument("--warmup", type=int, default=10, help="latency: warm-up messages")
    parser.add_argument("--gap", type=float, default=0.02,
                        help="latency: seconds between an answer and the next message")
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument("--delay", type=float, default=1.0, help="model call seconds (100 chats)")
    parser.add_argument("--settle", type=float, default=1.0, help="seconds between 100-chat runs")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-chats", action="store_true")
    parser.add_argument("--profile", help="run myclaw under cProfile, writing this file "
                                          "(and <file>.chats for the 100-chat phase)")
    parser.add_argument("--start-timeout", type=float, default=60.0)
    parser.add_argument("--answer-timeout", type=float, default=10.0)
    parser.add_argument("--timeout", type=float, default=300.0, help="whole benchmark, seconds")
    args = parser.parse_args()
    if args.profile:
        args.profile = str(Path(args.profile).resolve())   # the child runs in its own cwd
    try:
        ok = asyncio.run(asyncio.wait_for(run(args), args.timeout))
    except TimeoutError:
        print(f"telegram benchmark: stopped after --timeout {args.timeout:.0f}s", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        print(f"telegram benchmark failed: {exc}", file=sys.stderr)
        return 2
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
