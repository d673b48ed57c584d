"""Core subcommands: run, chat, tools, usage."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from bot.config.schema import SENDER_HINT, SENDER_KEY
from bot.config.settings import Config
from bot.core.identity import OPERATOR, Stranger
from bot.money.spend import usage_since
from bot.ops.preflight import refuse
from bot.store.factory import make_store

if TYPE_CHECKING:
    from bot.app import App


MAX_USAGE_DAYS = 36_600


def _positive_days(text: str) -> int:
    """`--days`: a whole number of days, at least 1 (argparse turns the error into usage)."""
    try:
        days = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of days") from None
    if not 1 <= days <= MAX_USAGE_DAYS:
        raise argparse.ArgumentTypeError(f"{days} days: give at least 1 (and at most "
                                         f"{MAX_USAGE_DAYS:,})")
    return days


def add_commands(subparsers: Any) -> None:
    run = subparsers.add_parser("run", help="start every configured channel (terminal if none)")
    run.set_defaults(handler=cmd_run)
    chat = subparsers.add_parser("chat", help="talk to the agent in this terminal")
    chat.set_defaults(handler=cmd_chat)
    tools = subparsers.add_parser("tools", help="the catalog a sender would receive, and why "
                                  "other tools are hidden")
    tools.add_argument("--sender", default=str(OPERATOR), help="e.g. telegram:123 (default cli:local)")
    tools.add_argument("--role", action="append", default=[], help="Discord role name (repeat)")
    tools.set_defaults(handler=cmd_tools)
    usage = subparsers.add_parser("usage", help="tokens and cost per day, sender and model")
    usage.add_argument("--days", type=_positive_days, default=30,
                       help="how far back, in days (default 30)")
    usage.add_argument("--json", action="store_true", help="machine-readable output")
    usage.set_defaults(handler=cmd_usage)


async def cmd_run(args: argparse.Namespace, config: Config) -> int:
    from bot.app import App
    from bot.ops.process import harden_process, long_lived_heap, require_api_key
    from bot.ops.surfaces import OPERATOR_SURFACES

    require_api_key(config)
    refuse(config)   # the checks doctor shows: one line and exit 2 at the first that fails
    harden_process()
    with long_lived_heap():
        app = await App.open(config, surfaces=OPERATOR_SURFACES)
    try:
        names = app.configured_channels()
        if not names:
            return await _terminal(app, args)
        await app.serve(names)
    finally:
        await app.close()
    return 0


async def cmd_chat(args: argparse.Namespace, config: Config) -> int:
    from bot.app import App
    from bot.ops.process import harden_process, long_lived_heap, require_api_key
    from bot.ops.surfaces import OPERATOR_SURFACES

    require_api_key(config)
    refuse(config, channels=False)
    harden_process()
    with long_lived_heap():
        app = await App.open(config, surfaces=OPERATOR_SURFACES)
    try:
        return await _terminal(app, args)
    finally:
        await app.close()


async def _terminal(app: App, args: argparse.Namespace) -> int:
    # Without --log-level the conversation shows its own errors; log lines stay out of it.
    await app.chat_in_terminal(quiet_logs=args.log_level is None)
    return 0


async def cmd_tools(args: argparse.Namespace, config: Config) -> int:
    from bot.access.senders import Senders
    from bot.app import build_registry
    from bot.core.policy import Caller

    if not re.fullmatch(SENDER_KEY, args.sender):
        print(f"myclaw: --sender {args.sender!r} is not a sender id: {SENDER_HINT}",
              file=sys.stderr)
        return 2
    registry = build_registry(config)
    async with make_store(config) as store:
        autonomy = await Senders(config, store).level_of(args.sender, tuple(args.role))
    print(f"{args.sender}: autonomy {autonomy}")
    if isinstance(autonomy, Stranger):
        what = ("must pair first (myclaw pair approve CODE)" if autonomy is Stranger.PAIRING
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
    from bot.config.prices import PriceTable

    since = time.time() - args.days * 86400
    async with make_store(config) as store:
        rows = await usage_since(store, since)
    report = usage_report(rows, PriceTable.from_config(config))
    currency = config["budgets"]["currency"]
    if args.json:
        print(json.dumps({"currency": currency, "days": args.days, **report}, indent=2))
        return 0
    if not report["rows"]:
        print(f"No model usage recorded in the last {args.days} days.")
        return 0
    print(f"{'day':<11}{'sender':<22}{'model':<20}{'calls':>6}{'input':>9}{'output':>9}"
          f"{'cache rd':>10}{'cache wr':>10}{'cost ' + currency:>13}")
    for r in report["rows"]:
        mark = "*" if r["estimated"] else ""
        print(f"{r['day']:<11}{r['sender']:<22}{r['model']:<20}{r['calls']:>6}{r['input']:>9}"
              f"{r['output']:>9}{r['cache_read']:>10}{r['cache_write']:>10}"
              f"{r['cost']:>12.4f}{mark}")
    for title, key in (("Per day", "by_day"), ("Per sender", "by_sender"), ("Per model", "by_model")):
        print(f"\n{title}:")
        for name, cost in report[key].items():
            print(f"  {name:<40}{cost:>12.4f} {currency}")
    print(f"\nTotal: {report['total']:.4f} {currency}")
    if any(r["estimated"] for r in report["rows"]):
        print("* recorded before costs were stored: priced at today's [prices]")
    return 0


def usage_report(rows: list[Any], prices: Any) -> dict[str, Any]:
    """Usage rows grouped by (UTC day, sender, model), days computed here rather than in SQL
    (the same on every store backend), with cost totals per day, sender and model."""
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    for row in rows:
        day = datetime.fromtimestamp(row["ts"], UTC).date().isoformat()
        group = groups.setdefault((day, row["sender"], row["model"]), {
            "day": day, "sender": row["sender"], "model": row["model"], "calls": 0, "input": 0,
            "output": 0, "cache_read": 0, "cache_write": 0, "cost": 0.0, "estimated": False})
        usage = {"input_tokens": row["input_tokens"], "output_tokens": row["output_tokens"],
                 "cache_read_tokens": row["cache_read_tokens"],
                 "cache_write_tokens": row["cache_write_tokens"]}
        for key, name in (("input", "input_tokens"), ("output", "output_tokens"),
                          ("cache_read", "cache_read_tokens"), ("cache_write", "cache_write_tokens")):
            group[key] += int(usage[name] or 0)
        group["calls"] += 1
        if row["cost"] is None:
            group["estimated"] = True
        group["cost"] += row["cost"] if row["cost"] is not None else prices.cost(row["model"], usage)
    ordered = [groups[key] for key in sorted(groups)]
    totals: dict[str, dict[str, float]] = {"by_day": {}, "by_sender": {}, "by_model": {}}
    for group in ordered:
        for key, name in (("by_day", group["day"]), ("by_sender", group["sender"]),
                          ("by_model", group["model"])):
            totals[key][name] = totals[key].get(name, 0.0) + group["cost"]
    return {"rows": ordered, **totals, "total": sum(g["cost"] for g in ordered)}
