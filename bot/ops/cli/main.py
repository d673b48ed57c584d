"""The `myclaw` command line (also `python -m bot`).

Subcommands come from small modules, each exposing `add_commands(subparsers)`; a subcommand sets
`handler=<async function(args, config) -> int>`. Errors of ours (`MyclawError`) print one line
and exit 2; argument errors print usage.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.metadata
import sys
from collections.abc import Sequence

from bot.config import settings as config_mod
from bot.core import logs
from bot.core.errors import MyclawError
from bot.core.events import valid_text

# Modules contributing subcommands, each with add_commands(subparsers), and what they add.
COMMAND_MODULES = {
    "bot.ops.cli.core": ("run", "chat", "tools", "usage"),
    "bot.ops.cli.safety": ("pair", "receipts", "audit"),
    "bot.ops.cli.doctor": ("doctor",),        # doctor [--security] [--telegram]
    "bot.ops.cli.console": ("console",),      # console login, console logout --all
    "bot.ops.cli.jobs": ("jobs",),            # jobs list | cancel
    "bot.ops.cli.store_admin": ("migrate", "store"),   # migrate, store copy
    "bot.ops.cli.models": ("models",),
}
_VALUED_OPTIONS = ("--config", "--log-format", "--log-level")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of the command line `argv`: with only the module of the command it names
    (`myclaw run` has no use for the other commands' code), with all of them when it names
    none, or none known (`myclaw --help`, a typo: every command is listed)."""
    parser = argparse.ArgumentParser(
        prog="myclaw",
        description="A personal AI agent on Telegram, Discord and the terminal.",
    )
    parser.add_argument("--version", action="version", version=f"myclaw {version()}")
    _add_global_options(parser, default=None)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for module_name in command_modules(argv):
        importlib.import_module(module_name).add_commands(subparsers)
    for command in _leaf_parsers(parser):
        # `myclaw doctor --config x.toml` as well as `myclaw --config x.toml doctor`. SUPPRESS
        # keeps a value given before the subcommand when none is given after it.
        _add_global_options(command, default=argparse.SUPPRESS)
    return parser


def command_modules(argv: Sequence[str] | None) -> list[str]:
    """The modules whose commands the parser of `argv` needs (see build_parser)."""
    words = iter(argv or ())
    for word in words:
        if word in _VALUED_OPTIONS:
            next(words, None)
        elif not word.startswith("-"):
            found = [m for m, commands in COMMAND_MODULES.items() if word in commands]
            return found or list(COMMAND_MODULES)
    return list(COMMAND_MODULES)


def _add_global_options(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument("--config", metavar="PATH", default=default,
                        help="config file (default: $MYCLAW_CONFIG, else ./myclaw.toml)")
    parser.add_argument("--log-format", choices=("text", "json"), default=default,
                        help="log line format (default from [log] format)")
    parser.add_argument("--log-level", choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                        default=default)


def _leaf_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parsers that end a command line (`run`, `pair approve`, ...), however deeply nested."""
    subactions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subactions:
        return [parser]
    children = {id(p): p for action in subactions for p in action.choices.values()}
    return [leaf for child in children.values() for leaf in _leaf_parsers(child)]


def version() -> str:
    try:
        return importlib.metadata.version("myclaw")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout without installing
        return "(not installed)"


def setup_logging(args: argparse.Namespace, config: config_mod.Config) -> None:
    logs.configure(fmt=args.log_format or config["log"]["format"],
                   level=args.log_level or config["log"]["level"], secrets=config.secret_values())


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    if not argv:  # bare `myclaw`: the commands, not an error
        parser.print_help(sys.stderr)
        return 2
    args = parser.parse_args(argv)
    try:
        config = config_mod.load(args.config)
        setup_logging(args, config)
        return int(asyncio.run(args.handler(args, config)) or 0)
    except MyclawError as exc:
        print(valid_text(f"myclaw: {exc}"), file=sys.stderr)   # may name a path from the env
        return 2
    except KeyboardInterrupt:
        print("", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
