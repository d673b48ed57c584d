"""`myclaw doctor --slack`: does the bot token work, does the app have the scopes the channel
uses, and can Socket Mode connect (apps.connections.open, then the WebSocket's `hello`)?

Each check is (status, name, detail) with status "ok", "warn" or "FAIL"; tokens are never
printed. The scopes are the ones deploy/slack-manifest.yaml asks for (a test holds the two
together); those of features the configuration leaves off are not required.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.core.errors import ChannelError
from bot.core.ports import ChannelConfig
from channels.slack.sending import error_code, web_client

Check = tuple[str, str, str]

SCOPES = ("chat:write", "im:history", "im:write", "channels:history", "groups:history",
          "files:read", "files:write", "usergroups:read", "users:read", "commands")
HELLO_TIMEOUT = 10.0


def required_scopes(config: ChannelConfig) -> list[str]:
    section = config["slack"]
    skip = set()
    if not section["groups"]:
        skip.add("usergroups:read")
    if not section["slash_command"]:
        skip.add("commands")
    if not section["locale_hint"]:
        skip.add("users:read")
    return [scope for scope in SCOPES if scope not in skip]


async def check_slack(config: ChannelConfig) -> list[Check]:
    from channels.slack.channel import tokens

    try:
        bot_token, second = tokens(config)
    except ChannelError as exc:
        return [("FAIL", "slack tokens", str(exc))]
    section = config["slack"]
    client = web_client(bot_token, section["base_url"])
    try:
        return await _checks(config, client, second)
    finally:
        if client.session is not None:
            await client.session.close()


async def _checks(config: ChannelConfig, client: Any, second: str) -> list[Check]:
    section = config["slack"]
    try:
        me = await client.auth_test()
    except SlackApiError as exc:
        return [("FAIL", "slack auth.test", f"Slack refused SLACK_BOT_TOKEN ({error_code(exc)})")]
    except (SlackClientError, OSError) as exc:
        return [("FAIL", "slack auth.test", f"cannot reach {section['base_url']} "
                 f"({type(exc).__name__})")]
    team = str(me.get("team_id", ""))
    checks: list[Check] = [("ok", "slack auth.test",
                            f"token accepted (bot <@{me.get('user_id')}> in {me.get('team')} {team})")]
    if section["team_id"] and section["team_id"] != team:
        checks.append(("FAIL", "slack team", f"the token is for {team}, [slack] team_id is "
                       f"{section['team_id']}"))
    granted = {s.strip() for s in str(me.headers.get("x-oauth-scopes", "")).split(",") if s.strip()}
    missing = [scope for scope in required_scopes(config) if scope not in granted]
    checks.append(("FAIL", "slack scopes", "the app lacks " + ", ".join(missing)
                   + ": add them (deploy/slack-manifest.yaml) and reinstall the app")
                  if missing else ("ok", "slack scopes", "every scope the channel uses is granted"))
    if section["mode"] == "socket":
        checks.append(await _socket_check(client, second))
    else:
        checks.append(("ok", "slack events", f"Events API on {section['listen']}:{section['port']}"
                       f"{section['webhook_path']} (signing secret set)"))
    return checks


async def _socket_check(client: Any, app_token: str) -> Check:
    try:
        opened = await client.apps_connections_open(app_token=app_token)
    except SlackApiError as exc:
        return ("FAIL", "slack socket mode", f"apps.connections.open refused SLACK_APP_TOKEN "
                f"({error_code(exc)}): it needs connections:write, and Socket Mode on")
    except (SlackClientError, OSError) as exc:
        return ("FAIL", "slack socket mode", f"apps.connections.open failed ({type(exc).__name__})")
    try:
        async with asyncio.timeout(HELLO_TIMEOUT), aiohttp.ClientSession() as session, \
                session.ws_connect(str(opened["url"])) as ws:
            frame = await ws.receive()
            hello = json.loads(frame.data) if frame.type == aiohttp.WSMsgType.TEXT else {}
    except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
        return ("FAIL", "slack socket mode", f"the WebSocket did not open ({type(exc).__name__})")
    if hello.get("type") != "hello":
        return ("FAIL", "slack socket mode", "the WebSocket opened but Slack did not say hello")
    return ("ok", "slack socket mode", "connected (Slack said hello)")
