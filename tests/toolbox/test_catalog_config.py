"""The catalog follows the configuration in force: a tool that could never run for a sender
under this configuration is not offered, and `myclaw tools --sender` agrees with the prompt."""

from __future__ import annotations

from bot.app import build_registry
from tests.conftest import make_config
from tests.ops.test_cli import base_env, run_cli, write_config


def offered(tmp_path, sub: str, overrides: dict) -> set[str]:
    config = make_config(tmp_path / sub, overrides)
    registry = build_registry(config)
    return {c["name"] for c in registry.catalog_for_prompt("telegram:42", "read_only")}


def test_a_read_only_sender_is_offered_http_request_only_with_an_allow_list(tmp_path):
    senders = {"senders": {"telegram:42": "read_only"}}
    assert "http_request" not in offered(tmp_path, "a", senders)
    listed = {**senders, "tools": {"net": {"allow_domains": ["api.example.com"]}}}
    assert "http_request" in offered(tmp_path, "b", listed)


def test_myclaw_tools_agrees_with_the_prompts_catalog(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    write_config(tmp_path / "a", '[senders]\n"telegram:42" = "read_only"\n')
    without = run_cli("tools", "--sender", "telegram:42", env=base_env(tmp_path / "a"))
    shown, _, hidden = without.stdout.partition("Hidden")
    assert "http_request" not in shown and "http_request" in hidden
    write_config(tmp_path / "b", '[senders]\n"telegram:42" = "read_only"\n'
                                 '[tools.net]\nallow_domains = ["api.example.com"]\n')
    with_list = run_cli("tools", "--sender", "telegram:42", env=base_env(tmp_path / "b"))
    assert "http_request" in with_list.stdout.partition("Hidden")[0]
