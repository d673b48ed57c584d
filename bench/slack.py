"""Slack end to end next to Telegram's webhook: message round trip and 100 threads at once.

Both channels run in this process, each on a fresh App (the real store, agent and channel,
started by the App) with its platform's fake on 127.0.0.1 (tests/fakes/), and the fake Anthropic
in its own process, answering at once for the round trips and after 1.0 s for the thread runs:

    telegram  [telegram] mode = "webhook"; each update POSTed to the bot's webhook with the
              secret header, as Telegram does
    slack     Socket Mode (the default): each event pushed over the WebSocket as an envelope,
              acknowledged by the bot once stored (slack-bolt / slack-sdk against the fake)

1. round trip: N DMs from one person, one after the other; from pushing the event until the
   fake holds the message carrying the full answer. Target: Slack's p50 within 1.2× of
   Telegram's.
2. 100 threads: 100 people mention the bot in a channel at the same moment, each mention its
   own thread (its own conversation); every model call takes 1.0 s; wall time until all 100
   answers are in their threads. Telegram: 100 private chats. Target: within 1.2×.

All traffic stays on 127.0.0.1; every wait is bounded (--timeout seconds per phase).

    .venv/bin/python bench/slack.py [--messages 50] [--threads 100]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _common import ROOT, fake_anthropic, make_config, percentile
from _telegram_webhook import UNLIMITED, telegram_webhook_bot

# bench/telegram.py would shadow python-telegram-bot's `telegram` package for this script.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]

from tests.fakes.slack_server import BOT_USER, FakeSlack, visible_text  # noqa: E402

GENERAL = "C0BENCH"
LATENCY_USER = 4242
THREAD_BASE = 390_000
TARGET_RATIO = 1.2


def _user(n: int) -> str:
    return f"U{n}"


async def _slack(model_url: str) -> tuple[Any, FakeSlack]:
    from bot.app import App

    slack = await FakeSlack().__aenter__()
    overrides = {**UNLIMITED, "slack": {"base_url": slack.base_url, "channels": [GENERAL]}}
    app = await App.open(make_config(model_url, overrides, env={
        "SLACK_BOT_TOKEN": slack.bot_token, "SLACK_APP_TOKEN": slack.app_token}))
    await app.start_channels(["slack"])
    return app, slack


def _final(message: dict[str, Any], words: str) -> bool:
    return not message.get("streaming") and visible_text(message).strip() == f"ok: {words}"


async def _close(app: Any, fake: Any) -> None:
    await app.stop_channels()
    await app.close()
    await fake.__aexit__(None, None, None)


async def telegram_round_trips(model_url: str, messages: int, timeout: float) -> list[float]:
    app, tg, send, answered = await telegram_webhook_bot(model_url)
    try:
        times = []
        for n in range(messages + 3):                 # three warm-up messages
            words = f"message {n}"
            began = time.perf_counter()
            assert await send(LATENCY_USER, words) == 200
            await tg.wait_until(lambda w=words: answered(LATENCY_USER, w), timeout=timeout)
            if n >= 3:
                times.append((time.perf_counter() - began) * 1000)
        return times
    finally:
        await _close(app, tg)


async def slack_round_trips(model_url: str, messages: int, timeout: float) -> list[float]:
    app, slack = await _slack(model_url)
    user = _user(LATENCY_USER)
    dm = f"D{user[1:]}"
    try:
        times = []
        for n in range(messages + 3):
            words = f"message {n}"
            began = time.perf_counter()
            await slack.send("events_api", slack.dm_event(user, words), timeout=timeout)
            await slack.wait_until(lambda w=words: any(
                _final(m, w) for (c, _), m in slack.messages.items() if c == dm), timeout)
            if n >= 3:
                times.append((time.perf_counter() - began) * 1000)
        return times
    finally:
        await _close(app, slack)


async def telegram_chats(model_url: str, count: int, timeout: float) -> float:
    app, tg, send, answered = await telegram_webhook_bot(model_url)
    users = {THREAD_BASE + i for i in range(count)}

    def all_answered() -> bool:
        done = {int(c.params["chat_id"]) for c in tg.calls
                if c.method in ("sendMessage", "editMessageText") and c.params.get("text") == "ok: hi"}
        return users <= done
    try:
        assert await send(THREAD_BASE - 1, "warm up") == 200
        await tg.wait_until(lambda: answered(THREAD_BASE - 1, "warm up"), timeout=timeout)
        began = time.perf_counter()
        statuses = await asyncio.gather(*(send(user, "hi") for user in users))
        assert set(statuses) == {200}
        await tg.wait_until(all_answered, timeout=timeout)
        return time.perf_counter() - began
    finally:
        await _close(app, tg)


async def slack_threads(model_url: str, count: int, timeout: float) -> float:
    app, slack = await _slack(model_url)
    mention = f"<@{BOT_USER}>"

    def answered_threads(threads: set[str], words: str) -> bool:
        done = {m.get("thread_ts") for (c, _), m in slack.messages.items()
                if c == GENERAL and m.get("thread_ts") in threads and _final(m, words)}
        return len(done) == len(threads)
    try:
        warm = slack.channel_event(GENERAL, _user(THREAD_BASE - 1), f"{mention} warm up")
        await slack.send("events_api", warm, timeout=timeout)
        await slack.wait_until(lambda: answered_threads({warm["event"]["ts"]}, "warm up"), timeout)
        events = [slack.channel_event(GENERAL, _user(THREAD_BASE + i), f"{mention} hi")
                  for i in range(count)]
        threads = {event["event"]["ts"] for event in events}
        began = time.perf_counter()
        await asyncio.gather(*(slack.send("events_api", event, timeout=timeout) for event in events))
        await slack.wait_until(lambda: answered_threads(threads, "hi"), timeout)
        return time.perf_counter() - began
    finally:
        await _close(app, slack)


async def main(args: argparse.Namespace) -> int:
    ok = True
    with fake_anthropic(0.0) as quick:
        figures = {"telegram": await telegram_round_trips(quick, args.messages, args.timeout),
                   "slack": await slack_round_trips(quick, args.messages, args.timeout)}
    print(f"1. round trip, {args.messages} DMs one after another (event in → full answer held):")
    for name, values in figures.items():
        print(f"   {name:<9} p50 {percentile(values, 50):6.1f} ms   p90 "
              f"{percentile(values, 90):6.1f} ms   mean {statistics.mean(values):6.1f} ms")
    ratio = percentile(figures["slack"], 50) / percentile(figures["telegram"], 50)
    ok &= ratio <= TARGET_RATIO
    print(f"   slack / telegram p50: {ratio:.2f}× (target ≤ {TARGET_RATIO}×)")
    with fake_anthropic(1.0) as slow:
        walls = {"telegram": await telegram_chats(slow, args.threads, args.timeout),
                 "slack": await slack_threads(slow, args.threads, args.timeout)}
    print(f"2. {args.threads} conversations at once, every model call 1.0 s (wall time until all "
          "answered; Slack: channel threads, Telegram: private chats):")
    for name, wall in walls.items():
        print(f"   {name:<9} {wall:6.2f} s")
    ratio = walls["slack"] / walls["telegram"]
    ok &= ratio <= TARGET_RATIO
    print(f"   slack / telegram: {ratio:.2f}× (target ≤ {TARGET_RATIO}×)")
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=50)
    parser.add_argument("--threads", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=60.0)
    sys.exit(asyncio.run(main(parser.parse_args())))
