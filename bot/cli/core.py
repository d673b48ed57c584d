"""Core subcommands: run, chat, tools, usage."""

from __future__ import annotations

import argparse
import logging
import re
import sys
import time
from datetime import UTC, datetime
from typing import Any

from bot.config import SENDER_HINT, SENDER_KEY, Config
from bot.store_factory import make_store


def add_commands(subparsers: Any) -> None:
    run = subparsers.add_parser("run", help="start every configured channel (terminal if none)")
    run.set_defaults(handler=cmd_run)
    chat = subparsers.add_parser("chat", help="talk to the agent in this terminal")
    chat.set_defaults(handler=cmd_chat)
    tools = subparsers.add_parser("tools", help="the catalog a sender would receive, and why "
                                  "other tools are hidden")
    tools.add_argument("--sender", default="cli:local", help="e.g. telegram:123 (default cli:local)")
    tools.add_argument("--role", action="append", default=[], help="Discord role name (repeat)")
    tools.set_defaults(handler=cmd_tools)
    usage = subparsers.add_parser("usage", help="token usage recorded per turn")
    usage.add_argument("--days", type=int, default=30, help="how far back (default 30)")
    usage.set_defaults(handler=cmd_usage)


async def cmd_run(args: argparse.Namespace, config: Config) -> int:
    from bot.app import App, harden_process, require_api_key

    require_api_key(config)
    harden_process()
    app = await App.open(config)
    try:
        names = app.configured_channels()
        if not names:
            return await _terminal(app, args)
        await app.serve(names)
    finally:
        await app.close()
    return 0


async def cmd_chat(args: argparse.Namespace, config: Config) -> int:
    from bot.app import App, harden_process, require_api_key

    require_api_key(config)
    harden_process()
    app = await App.open(config)
    try:
        return await _terminal(app, args)
    finally:
        await app.close()


async def _terminal(app: Any, args: argparse.Namespace) -> int:
    from channels.cli import TerminalChannel

    await app.start_services()
    if args.log_level is None:  # the conversation shows its own errors; keep log lines out of it
        logging.getLogger().setLevel(logging.ERROR)
    logging.getLogger("bot.app").info("myclaw ready (channels: terminal)")
    grace = app.config["agent"]["shutdown_grace_seconds"]
    terminal = TerminalChannel(app.agent, grace=grace)
    app.services.delivery.register("cli", terminal)
    await app.expiry.sweep()
    await terminal.run()
    await app.agent.shutdown(grace)
    return 0


async def cmd_tools(args: argparse.Namespace, config: Config) -> int:
    from bot.app import build_registry
    from bot.policy import Caller
    from bot.senders import Senders

    if not re.fullmatch(SENDER_KEY, args.sender):
        print(f"myclaw: --sender {args.sender!r} is not a sender id: {SENDER_HINT}",
              file=sys.stderr)
        return 2
    registry = build_registry(config)
    async with make_store(config) as store:
        autonomy = await Senders(config, store).autonomy(args.sender, tuple(args.role))
    print(f"{args.sender}: autonomy {autonomy}")
    if autonomy in ("pairing", "ignore"):
        what = ("must pair first (myclaw pair approve CODE)" if autonomy == "pairing"
                else "is ignored")
        print(f"This sender {what}; no tools are offered until they have a level.")
        return 0
    visibility = registry.visibility(Caller(args.sender, autonomy))
    offered = [n for n, d in visibility.items() if d.verdict != "deny"]
    print(f"\nOffered ({len(offered)}):")
    for name in offered:
        tool = registry.get(name)
        note = "asks first" if visibility[name].verdict == "ask" else "runs"
        print(f"  {name:<16} {tool.meta.risk:<6} {note}")
    hidden = {n: d.reason for n, d in visibility.items() if d.verdict == "deny"}
    if hidden:
        print(f"\nHidden ({len(hidden)}):")
        for name, reason in hidden.items():
            print(f"  {name:<16} {reason}")
    if registry.unavailable:
        print("\nNot registered:")
        for name, reason in sorted(registry.unavailable.items()):
            print(f"  {name:<16} {reason}")
    return 0


async def cmd_usage(args: argparse.Namespace, config: Config) -> int:
    since = time.time() - args.days * 86400
    async with make_store(config) as store:
        calls = await store.fetchall(
            "SELECT ts, sender, model, input_tokens, output_tokens, cache_read_tokens,"
            " cache_write_tokens FROM usage WHERE ts >= ?", (since,))
    rows = usage_by_day(calls)
    if not rows:
        print(f"No model usage recorded in the last {args.days} days.")
        return 0
    header = f"{'day':<11}{'sender':<22}{'model':<20}{'calls':>6}{'input':>9}{'output':>9}" \
             f"{'cache rd':>10}{'cache wr':>10}"
    print(header)
    for r in rows:
        print(f"{r['day']:<11}{r['sender']:<22}{r['model']:<20}{r['calls']:>6}{r['input']:>9}"
              f"{r['output']:>9}{r['cache_read']:>10}{r['cache_write']:>10}")
    return 0


def usage_by_day(calls: list[Any]) -> list[dict[str, Any]]:
    """Model calls summed per UTC day, sender and model (the day computed here, not by a
    database's date functions, which differ between SQLite and PostgreSQL)."""
    totals: dict[tuple[str, str, str], dict[str, Any]] = {}
    for call in calls:
        day = datetime.fromtimestamp(call["ts"], UTC).date().isoformat()
        entry = totals.setdefault((day, call["sender"], call["model"]), {
            "day": day, "sender": call["sender"], "model": call["model"], "calls": 0,
            "input": 0, "output": 0, "cache_read": 0, "cache_write": 0})
        entry["calls"] += 1
        for name, column in (("input", "input_tokens"), ("output", "output_tokens"),
                             ("cache_read", "cache_read_tokens"),
                             ("cache_write", "cache_write_tokens")):
            entry[name] += call[column]
    return [totals[key] for key in sorted(totals, key=lambda k: (k[0], k[1]))]
