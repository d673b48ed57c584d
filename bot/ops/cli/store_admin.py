"""`myclaw migrate` and `myclaw store copy --from LOCATION --to LOCATION`.

A location is `sqlite:PATH` or a `postgresql://` URL. A password is better left out of a URL
typed on the command line (other users see it in the process list): asyncpg reads PGPASSWORD
and ~/.pgpass, and `env:MYCLAW_DATABASE_URL` names the URL in that environment variable.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from bot.config.settings import Config
from bot.core.errors import StoreError
from bot.store.factory import make_store, postgres_store, redact_url, store_location
from bot.store.migrations import applied_since
from bot.store.sqlite import Store


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    migrate = subparsers.add_parser(
        "migrate", help="apply the store's pending schema migrations",
        description="Apply the configured store's pending migrations and print its schema "
                    "version. `myclaw run` applies them too; run this first to do it explicitly, "
                    "e.g. once before starting several replicas.")
    migrate.set_defaults(handler=cmd_migrate)

    store = subparsers.add_parser("store", help="store administration (copy)")
    store_commands = store.add_subparsers(dest="store_command", metavar="SUBCOMMAND")
    store_commands.required = True
    copy = store_commands.add_parser(
        "copy", help="copy a whole store into an empty one (SQLite ⇄ PostgreSQL)",
        description="Copy history, sessions, approvals, receipts, audit, pairings, memories, "
                    "undo log and usage into an empty store. Stop myclaw first. Receipts still "
                    "verify on the copy with the same receipt key (receipt.key in the data "
                    "directory, or MYCLAW_RECEIPT_KEY).")
    copy.add_argument("--from", dest="source", required=True, metavar="LOCATION",
                      help="sqlite:PATH, postgresql://..., or env:VARIABLE holding a URL")
    copy.add_argument("--to", dest="destination", required=True, metavar="LOCATION",
                      help="the empty destination, in the same forms")
    copy.set_defaults(handler=cmd_store_copy)


async def cmd_migrate(args: argparse.Namespace, config: Config) -> int:
    started = time.time()
    async with make_store(config) as store:
        applied = await applied_since(store, started)
        version = await store.schema_version()
    for row in applied:
        print(f"applied {row['number']}: {row['description']}")
    what = f"{len(applied)} migration(s) applied" if applied else "already up to date"
    print(f"{store_location(config)}: schema version {version} ({what})")
    return 0


def open_location(location: str, env: dict[str, str] | None = None) -> Any:
    """An unopened store for `sqlite:PATH`, a PostgreSQL URL, or `env:VARIABLE`."""
    env = dict(os.environ) if env is None else env
    if location.startswith("env:"):
        name = location[len("env:"):]
        if not env.get(name):
            raise StoreError(f"{location}: the environment variable {name} is not set")
        location = env[name]
    if location.startswith("sqlite:"):
        path = location[len("sqlite:"):]
        if not path:
            raise StoreError("sqlite: needs a path, e.g. sqlite:~/.local/share/myclaw/myclaw.db")
        return Store(Path(path).expanduser())
    if location.startswith(("postgresql://", "postgres://")):
        return postgres_store(location)
    raise StoreError(f"{redact_url(location)!r}: expected sqlite:PATH, postgresql://... "
                     f"or env:VARIABLE")


def describe_location(store: Any) -> str:
    return getattr(store, "location", None) or str(getattr(store, "path", "?"))


async def cmd_store_copy(args: argparse.Namespace, config: Config) -> int:
    from bot.store.copy import copy_store

    source, destination = open_location(args.source), open_location(args.destination)
    if isinstance(source, Store) and not source.path.is_file():
        raise StoreError(f"--from {source.path}: no such store (opening it would create an "
                         f"empty one)")
    if describe_location(source) == describe_location(destination):
        raise StoreError("--from and --to are the same store")
    async with source, destination:
        copied = await copy_store(source, destination)
    for entry in copied:
        print(f"{entry.table:<22}{entry.rows:>9} rows")
    total = sum(entry.rows for entry in copied)
    print(f"copied {total} rows from {describe_location(source)} to "
          f"{describe_location(destination)}")
    return 0
