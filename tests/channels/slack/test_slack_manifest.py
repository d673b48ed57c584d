"""deploy/slack-manifest.yaml asks for exactly what the Slack channel uses: the scopes of the
Web API methods it calls (the fake Slack refuses any call without its scope and grants exactly
the manifest's, so every Slack test also proves nothing else is needed), the message events it
reads, the slash command of the default config, Socket Mode and interactivity on."""

from __future__ import annotations

from pathlib import Path

from bot.config.settings import DEFAULTS
from channels.slack.doctor import SCOPES as DOCTOR_SCOPES
from tests.fakes.slack_server import DOWNLOAD_SCOPE, METHOD_SCOPES
from tests.fakes.slack_server import SCOPES as FAKE_SCOPES
from tests.support.yaml_subset import parse_yaml_subset

MANIFEST = Path(__file__).parents[3] / "deploy" / "slack-manifest.yaml"
# The events the reader takes (DMs, public and private channels); a mention arrives as one of
# these, so app_mention is not needed. Each needs the history scope of its kind.
EVENT_SCOPES = {"message.im": "im:history", "message.channels": "channels:history",
                "message.groups": "groups:history"}


def manifest() -> dict:
    return parse_yaml_subset(MANIFEST.read_text(encoding="utf-8"))


def test_the_manifest_asks_for_the_scopes_the_doctor_checks_and_the_fake_grants():
    scopes = manifest()["oauth_config"]["scopes"]["bot"]
    assert len(scopes) == len(set(scopes))
    assert set(scopes) == set(DOCTOR_SCOPES) == set(FAKE_SCOPES.split(","))


def test_every_scope_of_the_manifest_is_needed_by_a_call_an_event_or_a_feature():
    scopes = set(manifest()["oauth_config"]["scopes"]["bot"])
    needed = {scope for method in METHOD_SCOPES.values() for scope in method}
    needed |= set(EVENT_SCOPES.values()) | {DOWNLOAD_SCOPE, "commands"}
    assert scopes == needed


def test_the_manifest_subscribes_to_the_message_events_the_channel_reads():
    settings = manifest()["settings"]
    assert set(settings["event_subscriptions"]["bot_events"]) == set(EVENT_SCOPES)
    assert settings["socket_mode_enabled"] == "true"
    assert settings["interactivity"]["is_enabled"] == "true"   # the approval buttons


def test_the_manifest_declares_the_slash_command_of_the_default_config():
    (command,) = manifest()["features"]["slash_commands"]
    assert command["command"] == DEFAULTS["slack"]["slash_command"] == "/myclaw"
    assert command["should_escape"] == "false"   # the text arrives as typed
    assert manifest()["features"]["app_home"]["messages_tab_enabled"] == "true"   # DMs
