"""`myclaw doctor --slack` against the fake Slack: auth.test with the bot token, the scopes the
app lacks (only those of features the config uses), Socket Mode reachability (apps.connections
.open, then the WebSocket's hello), one line each; tokens never printed."""

from __future__ import annotations

import io

from bot.ops.cli.doctor import run_doctor
from tests.conftest import FAKE_ENV, make_config
from tests.fakes.slack_server import SCOPES, FakeSlack
from tests.support.replica_support import free_port
from tests.support.slack_support import slack_env, slack_overrides


async def doctor(tmp_path, slack: FakeSlack, env: dict[str, str] | None = None,
                 **section) -> tuple[int, list[str]]:
    config = make_config(tmp_path, slack_overrides(slack, **section),
                         env={**FAKE_ENV, **slack_env(slack), **(env or {})})
    out = io.StringIO()
    code = await run_doctor(config, slack=True, out=out)
    return code, [line for line in out.getvalue().splitlines()
                  if line[5:].startswith("slack ")]   # the channel's checks, not the env's


def without(*scopes: str) -> str:
    return ",".join(s for s in SCOPES.split(",") if s not in scopes)


async def test_a_working_app_passes_auth_scopes_and_socket_mode(tmp_path, slack):
    code, lines = await doctor(tmp_path, slack)
    assert lines[0] == "ok   slack auth.test: token accepted (bot <@UBOT> in Fake T0TEAM)"
    assert "ok   slack scopes: every scope the channel uses is granted" in lines
    assert "ok   slack socket mode: connected (Slack said hello)" in lines
    assert code == 0
    printed = "\n".join(lines)
    assert slack.bot_token not in printed and slack.app_token not in printed


async def test_missing_scopes_fail_naming_each_and_the_manifest(tmp_path, slack):
    slack.scopes = without("files:write", "im:write")
    code, lines = await doctor(tmp_path, slack)
    (scopes,) = [line for line in lines if "slack scopes" in line]
    assert scopes.startswith("FAIL slack scopes: the app lacks im:write, files:write")
    assert "deploy/slack-manifest.yaml" in scopes and code == 1


async def test_scopes_of_features_the_config_leaves_off_are_not_required(tmp_path, slack):
    slack.scopes = without("usergroups:read", "commands")
    code, lines = await doctor(tmp_path, slack, slash_command="")
    assert "ok   slack scopes: every scope the channel uses is granted" in lines and code == 0
    code, lines = await doctor(tmp_path, slack, groups={"S0ADMINS": "full"})
    assert any(line.startswith("FAIL slack scopes: the app lacks usergroups:read, commands")
               for line in lines)


async def test_a_refused_bot_token_fails_auth_test_and_checks_nothing_further(tmp_path, slack):
    code, lines = await doctor(tmp_path, slack, env={"SLACK_BOT_TOKEN": "xoxb-revoked"})
    assert lines == ["FAIL slack auth.test: Slack refused SLACK_BOT_TOKEN (invalid_auth)"]
    assert code == 1 and [c.method for c in slack.calls] == ["auth.test"]


async def test_tokens_of_the_wrong_kind_fail_before_any_call(tmp_path, slack):
    code, lines = await doctor(tmp_path, slack, env={"SLACK_APP_TOKEN": "xoxb-not-an-app-token"})
    assert len(lines) == 1 and lines[0].startswith("FAIL slack tokens: SLACK_APP_TOKEN")
    assert code == 1 and slack.calls == []


async def test_socket_mode_fails_when_the_app_token_is_refused(tmp_path, slack):
    slack.fail("apps.connections.open", "invalid_auth")
    code, lines = await doctor(tmp_path, slack)
    assert "FAIL slack socket mode: apps.connections.open refused SLACK_APP_TOKEN (invalid_auth)" \
           ": it needs connections:write, and Socket Mode on" in lines
    assert code == 1


async def test_socket_mode_fails_when_the_websocket_cannot_be_reached(tmp_path, slack):
    slack.socket_url = f"ws://127.0.0.1:{free_port()}/socket"    # nobody listens there
    code, lines = await doctor(tmp_path, slack)
    assert any(line.startswith("FAIL slack socket mode: the WebSocket did not open")
               for line in lines) and code == 1


async def test_socket_mode_fails_when_slack_does_not_say_hello(tmp_path, slack):
    slack.socket_url = slack.disconnecting_socket_url
    code, lines = await doctor(tmp_path, slack)
    assert "FAIL slack socket mode: the WebSocket opened but Slack did not say hello" in lines
    assert code == 1


async def test_the_events_api_mode_needs_no_socket_and_names_its_endpoint(tmp_path, slack):
    code, lines = await doctor(tmp_path, slack, mode="events", listen="127.0.0.1", port=3000)
    assert "ok   slack events: Events API on 127.0.0.1:3000/slack/events (signing secret set)" in lines
    assert not slack.of("apps.connections.open") and code == 0
