"""`myclaw console login` and `myclaw console logout --all`: access to the web console.

    myclaw console login           print a one-time login link (valid for [console] login_ttl_seconds)
    myclaw console logout --all    end every console session and unused link

The link is the only way in: whoever can run this command on the server is the operator.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bot.config.settings import Config
from bot.ops.console import auth_for
from bot.store.factory import make_store


def add_commands(subparsers: Any) -> None:
    console = subparsers.add_parser("console", help="log in to the web console, or log everyone out")
    actions = console.add_subparsers(dest="console_action", metavar="ACTION")
    actions.required = True
    actions.add_parser("login", help="print a one-time login link").set_defaults(handler=console_login)
    logout = actions.add_parser("logout", help="end console sessions")
    logout.add_argument("--all", action="store_true", required=True,
                        help="end every session and every unused login link")
    logout.set_defaults(handler=console_logout)


def base_url(config: Config) -> str:
    section = config["console"]
    if section["public_url"]:
        return section["public_url"].rstrip("/")
    host = section["listen"]
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{section['port']}"


async def console_login(args: argparse.Namespace, config: Config) -> int:
    async with make_store(config) as store:
        token = await auth_for(config, store).issue_login()
    minutes = max(1, config["console"]["login_ttl_seconds"] // 60)
    print(f"{base_url(config)}/login/{token}")
    print(f"Open this link within {minutes} minute(s); it works once.", file=sys.stderr)
    if not config["console"]["enabled"]:
        print("Note: [console] enabled = false in the config; enable it and restart `myclaw run`.",
              file=sys.stderr)
    return 0


async def console_logout(args: argparse.Namespace, config: Config) -> int:
    async with make_store(config) as store:
        ended = await auth_for(config, store).revoke_all()
    print(f"Ended {ended} console session(s); unused login links no longer work.")
    return 0
