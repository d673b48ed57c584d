"""Operator subcommands of the safety core: `pair`, `receipts verify`, `audit`.

    myclaw pair list                          codes waiting for the operator
    myclaw pair approve CODE [--level L]      grant a level (default supervised)
    myclaw pair deny CODE
    myclaw receipts verify                    exit 1 and list tampered receipts when any
    myclaw audit [--sender S] [--since T] [--limit N]

Everything printed may contain text a stranger chose (sender ids, forged approval ids), so
control characters are neutralised before they reach the operator's terminal.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import unicodedata
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from bot.access.senders import PairingError, Senders
from bot.approvals.receipts import Receipts, key_path, receipt_key, stored_receipts
from bot.config.settings import Config
from bot.core.identity import LEVELS
from bot.store.audit import AuditQuery, recent_audit
from bot.store.factory import make_store

_RELATIVE = re.compile(r"(\d+)\s*([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
DETAIL_WIDTH = 60


def add_commands(subparsers: Any) -> None:
    pair = subparsers.add_parser("pair", help="approve or deny pairing codes of new senders")
    actions = pair.add_subparsers(dest="pair_action", metavar="ACTION")
    actions.required = True
    actions.add_parser("list", help="pending pairing codes").set_defaults(handler=pair_list)
    approve = actions.add_parser("approve", help="grant a level to the sender of CODE")
    approve.add_argument("code")
    approve.add_argument("--level", choices=LEVELS, default="supervised",
                         help="autonomy to grant (default: supervised)")
    approve.set_defaults(handler=pair_approve)
    deny = actions.add_parser("deny", help="refuse CODE")
    deny.add_argument("code")
    deny.set_defaults(handler=pair_deny)

    receipts = subparsers.add_parser("receipts", help="signed receipts of executed tool calls")
    receipt_actions = receipts.add_subparsers(dest="receipts_action", metavar="ACTION")
    receipt_actions.required = True
    receipt_actions.add_parser("verify", help="recompute every signature; exit 1 on tampering"
                               ).set_defaults(handler=receipts_verify)

    audit = subparsers.add_parser("audit", help="what the bot decided and did, newest last")
    audit.add_argument("--sender", help="only this sender (e.g. telegram:123)")
    audit.add_argument("--since", type=parse_since, metavar="T",
                       help="ISO date/time (UTC unless it has an offset) or relative: 30m, 2h, 3d, 1w")
    audit.add_argument("--limit", type=positive_int, default=100, metavar="N",
                       help="at most N rows, N >= 1 (default 100)")
    audit.set_defaults(handler=audit_list)


# --- pair ----------------------------------------------------------------------------------


async def pair_list(args: argparse.Namespace, config: Config) -> int:
    async with make_store(config) as store:
        codes = await Senders(config, store).list_codes()
    if not codes:
        print("No pending pairing codes.")
        return 0
    now = time.time()
    rows = [(c["code"], clean(c["sender"]), _ago(now - c["created_at"]) + " ago",
             "in " + _ago(c["expires_at"] - now)) for c in codes]
    print(table(("CODE", "SENDER", "ASKED", "EXPIRES"), rows))
    return 0


async def pair_approve(args: argparse.Namespace, config: Config) -> int:
    async with make_store(config) as store:
        try:
            sender = await Senders(config, store).approve(args.code, args.level)
        except PairingError as exc:
            print(f"myclaw: {exc}", file=sys.stderr)
            return 1
    print(f"Granted {args.level} to {clean(sender)}.")
    return 0


async def pair_deny(args: argparse.Namespace, config: Config) -> int:
    async with make_store(config) as store:
        try:
            sender = await Senders(config, store).deny(args.code)
        except PairingError as exc:
            print(f"myclaw: {exc}", file=sys.stderr)
            return 1
    print(f"Denied pairing for {clean(sender)}.")
    return 0


# --- receipts ------------------------------------------------------------------------------


async def receipts_verify(args: argparse.Namespace, config: Config) -> int:
    async with make_store(config) as store:
        total = await stored_receipts(store)
        if total == 0:
            print("No receipts yet.")
            return 0
        key = receipt_key(config, create=False)
        if key is None:
            print(f"myclaw: no receipt key at {key_path(config.data_dir)}: cannot verify "
                  f"{total} receipts", file=sys.stderr)
            return 1
        problems = await Receipts(store, key).verify_all()
    if problems:
        for line in problems:
            print(clean(line))
        print(f"{len(problems)} problem(s) in {total} receipts.", file=sys.stderr)
        return 1
    print(f"All {total} receipts verify.")
    return 0


# --- audit ---------------------------------------------------------------------------------


def positive_int(text: str) -> int:
    try:
        number = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from exc
    if number < 1:
        raise argparse.ArgumentTypeError(f"{number} rows would show nothing: give 1 or more")
    return number


def parse_since(text: str) -> float:
    """'2h' / '3d' / '2025-03-01' / '2025-03-01T12:00+02:00' -> a UNIX timestamp."""
    relative = _RELATIVE.fullmatch(text.strip().lower())
    if relative:
        amount, unit = relative.groups()
        return time.time() - int(amount) * _UNIT_SECONDS[unit]
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither an ISO date/time (2025-03-01T12:00) nor relative (30m, 2h, 3d, 1w)"
        ) from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


async def audit_list(args: argparse.Namespace, config: Config) -> int:
    query = AuditQuery(sender=args.sender or "", since=args.since)
    async with make_store(config) as store:
        rows = await recent_audit(store, query, args.limit)
    if not rows:
        print("No audit entries match.")
        return 0
    lines = [(_utc(row["ts"]), clean(row["sender"]), clean(row["tool"] or "-"),
              clean(row["decision"]), clean(row["outcome"]), clean(row["detail"], DETAIL_WIDTH))
             for row in reversed(rows)]
    print(table(("TIME (UTC)", "SENDER", "TOOL", "DECISION", "OUTCOME", "DETAIL"), lines))
    return 0


# --- formatting ----------------------------------------------------------------------------


def clean(text: Any, width: int | None = None) -> str:
    """One printable line: control and format characters (ANSI escapes, RTL overrides) shown
    as '?', whitespace runs collapsed, optionally cut to `width`."""
    chars = ("?" if unicodedata.category(ch) in ("Cc", "Cf") and ch not in "\t\n" else ch
             for ch in str(text))
    line = " ".join("".join(chars).split())
    if width is not None and len(line) > width:
        line = line[:width - 1] + "…"
    return line


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()
    return "\n".join([line(headers), *(line(r) for r in rows)])


def _utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _ago(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"
