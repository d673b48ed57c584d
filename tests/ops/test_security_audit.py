"""The security audit: every risky example config is flagged with exactly its findings, and the
shipped example (deploy/myclaw.example.toml) has none.

Each risky file lives in tests/data/; `@TMP@` in it stands for the test's temporary directory.
Configs are loaded from disk with `bot.config.settings.load`, as `myclaw doctor --security` does.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bot.config import settings as config_mod
from bot.ops.security_audit import SEVERITY_ORDER, audit

DATA = Path(__file__).resolve().parents[1] / "data"
EXAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "myclaw.example.toml"


@dataclass
class Case:
    file: str
    expected: set[tuple[str, str]]           # {(severity, key)} — exactly these, nothing else
    mode: int = 0o600
    place: str = "myclaw.toml"               # where the file goes, relative to the tmp dir
    env: dict[str, str] = field(default_factory=dict)
    setup: Callable[[Path], None] | None = None


def readable_state_file(name: str) -> Callable[[Path], None]:
    def setup(tmp_path: Path) -> None:
        data_dir = tmp_path / "xdg" / "myclaw"
        data_dir.mkdir(parents=True, exist_ok=True)
        (data_dir / name).write_bytes(b"x" * 32)
        (data_dir / name).chmod(0o644)
    return setup


TOKEN_ENV = {"TELEGRAM_BOT_TOKEN": "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ"}
CASES = [
    Case("risky-unknown-full.toml", {("high", "senders.unknown")}),
    Case("risky-unknown-supervised.toml", {("high", "senders.unknown")}),
    Case("risky-unknown-read-only.toml", {("low", "senders.unknown")}),
    Case("risky-discord-role-full.toml", {("high", "discord.roles.Admins")}),
    Case("risky-telegram-group-full.toml", {("medium", "telegram.groups")}),
    Case("risky-telegram-group-shared-session.toml", {("high", "telegram.groups")}),
    Case("risky-shell-auto-approve.toml", {("high", "profiles.default.auto_approve")}),
    Case("risky-shell-auto-approve-supervised.toml", {("medium", "profiles.default.auto_approve")}),
    Case("risky-shell-full-without-approval.toml", {("medium", "profiles.default.always_ask")}),
    Case("risky-workspace-root.toml", {("high", "agent.workspace"), ("high", "store.path")}),
    Case("risky-workspace-home.toml", {("high", "agent.workspace")}),
    Case("risky-workspace-above-home.toml", {("high", "agent.workspace")},
         env={"HOME": "@TMP@/home/owner"}),
    Case("risky-workspace-system-dir.toml", {("high", "agent.workspace")}),
    Case("risky-store-in-workspace.toml", {("high", "store.path")}),
    Case("risky-config-in-workspace.toml", {("high", "agent.workspace")},
         place="workspace/myclaw.toml"),
    Case("risky-custom-tools-in-workspace.toml", {("high", "tools.custom_paths")}),
    Case("safe-minimal.toml", {("high", "permissions.config")}, mode=0o644),
    Case("safe-minimal.toml", {("medium", "permissions.config")}, mode=0o640),
    Case("safe-minimal.toml", {("high", "permissions.receipt_key")},
         setup=readable_state_file("receipt.key")),
    Case("safe-minimal.toml", {("high", "permissions.store")},
         setup=readable_state_file("myclaw.db")),
    Case("risky-metadata-allow-host.toml", {("high", "tools.net.allow_hosts")}),
    Case("risky-metadata-hostname.toml", {("high", "tools.net.allow_domains")}),
    Case("risky-link-local-range.toml", {("high", "tools.net.allow_hosts")}),
    Case("risky-private-range.toml", {("medium", "tools.net.allow_hosts")}),
    Case("risky-approver-format.toml", {("medium", "approvals.approvers")}),
    Case("risky-webhook-without-secret.toml", {("high", "telegram.mode")}, env=TOKEN_ENV),
    Case("risky-webhook-plain-http.toml", {("medium", "telegram.webhook_url")},
         env={**TOKEN_ENV, "TELEGRAM_WEBHOOK_SECRET": "a-long-webhook-secret"}),
    Case("risky-telegram-api-plain-http.toml", {("high", "telegram.base_url")}),
    Case("risky-health-public.toml", {("low", "health.listen")}),
    Case("risky-no-sender-budget.toml", {("medium", "budgets.sender_daily")}),
    Case("risky-no-budget-at-all.toml", {("medium", "budgets.sender_daily"),
                                         ("low", "budgets.global_daily")}),
    Case("safe-no-budget-terminal-only.toml", set()),
]


def install(tmp_path: Path, source: Path, place: str = "myclaw.toml", mode: int = 0o600) -> Path:
    target = tmp_path / place
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(source.read_text(encoding="utf-8").replace("@TMP@", str(tmp_path)),
                      encoding="utf-8")
    target.chmod(mode)
    return target


def load(path: Path, tmp_path: Path, env: dict[str, str] | None = None) -> config_mod.Config:
    base = {"HOME": str(Path.home()), "XDG_DATA_HOME": str(tmp_path / "xdg")}
    extra = {k: v.replace("@TMP@", str(tmp_path)) for k, v in (env or {}).items()}
    return config_mod.load(str(path), env={**base, **extra})


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.file}-{c.mode:o}-{c.place}")
def test_each_risky_config_is_flagged_with_exactly_its_findings(tmp_path, case):
    if case.setup is not None:
        case.setup(tmp_path)
    config = load(install(tmp_path, DATA / case.file, case.place, case.mode), tmp_path, case.env)
    findings = audit(config)
    assert {(f.severity, f.key) for f in findings} == case.expected
    for finding in findings:
        assert finding.problem.strip() and finding.fix.strip()


def test_every_risky_file_in_tests_data_is_covered_by_a_case():
    covered = {case.file for case in CASES}
    assert {p.name for p in DATA.glob("risky-*.toml")} <= covered


def test_the_shipped_example_config_has_no_findings_and_the_audit_changes_nothing(tmp_path):
    path = install(tmp_path, EXAMPLE, "etc/myclaw.toml", 0o600)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    findings = audit(load(path, tmp_path))
    assert findings == []
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_the_built_in_defaults_have_no_findings(tmp_path):
    config = config_mod.from_dict({}, env={"HOME": str(Path.home()),
                                           "XDG_DATA_HOME": str(tmp_path / "xdg")})
    assert audit(config) == []


@pytest.mark.parametrize("entry, severity", [
    ("169.254.169.254", "high"),
    ("fd00:ec2::254", "high"),
    ("[fd00:ec2::254]", "high"),
    ("100.100.100.200", "high"),
    ("100.64.0.0/10", "high"),        # carrier-grade NAT range holding Alibaba's metadata address
    ("metadata.google.internal.", "high"),
    ("*", "high"),
    ("192.168.0.0/16", "medium"),
    ("fc00::/7", "high"),             # the IPv6 unique-local range holds AWS's fd00:ec2::254
    ("fe80::/10", "medium"),
    ("127.0.0.0/8", "medium"),
    ("192.168.1.20", None),           # one private host is what allow_hosts is for
    ("nas.local", None),
    ("example.org", None),
])
def test_net_allow_list_entries_are_judged_by_what_they_open(tmp_path, entry, severity):
    config = config_mod.from_dict({"tools": {"net": {"allow_hosts": [entry]}}},
                                  env={"HOME": str(Path.home()), "XDG_DATA_HOME": str(tmp_path)})
    found = [(f.severity, f.key) for f in audit(config)]
    assert found == ([(severity, "tools.net.allow_hosts")] if severity else [])


@pytest.mark.parametrize("profile", [
    {"always_ask": ["shell_run"]},
    {"excluded_tools": ["shell_run"]},
    {"allowed_tools": ["fs_read"]},
    {"auto_approve": ["shell_run"], "always_ask": ["shell_run"]},  # always_ask wins in the policy
])
def test_shell_behind_approval_or_out_of_reach_is_not_flagged(tmp_path, profile):
    config = config_mod.from_dict(
        {"senders": {"telegram:42": "full"}, "profiles": {"default": profile}},
        env={"HOME": str(Path.home()), "XDG_DATA_HOME": str(tmp_path)})
    assert audit(config) == []


@pytest.mark.parametrize("approver", ["telegram:123456789", "discord:222233334444555566",
                                      "cli:local"])
def test_well_formed_approvers_are_not_flagged(tmp_path, approver):
    config = config_mod.from_dict({"approvals": {"approvers": [approver]}},
                                  env={"HOME": str(Path.home()), "XDG_DATA_HOME": str(tmp_path)})
    assert audit(config) == []


def test_findings_come_most_severe_first(tmp_path):
    config = config_mod.from_dict(
        {"senders": {"unknown": "read_only", "telegram:42": "full"},
         "approvals": {"approvers": ["alice"]}, "agent": {"workspace": "/"}},
        env={"HOME": str(Path.home()), "XDG_DATA_HOME": str(tmp_path)})
    severities = [f.severity for f in audit(config)]
    assert set(severities) == {"high", "medium", "low"}
    assert severities == sorted(severities, key=SEVERITY_ORDER.index)


def test_a_plain_http_bot_api_on_localhost_is_allowed(tmp_path):
    """A self-hosted Bot API server on the same machine may speak plain http."""
    config = config_mod.from_dict(
        {"telegram": {"base_url": "http://127.0.0.1:8081/bot",
                      "base_file_url": "http://localhost:8081/file/bot"}},
        env={"HOME": str(Path.home()), "XDG_DATA_HOME": str(tmp_path)})
    assert audit(config) == []


def test_the_example_in_the_repository_would_be_flagged_only_for_its_permissions(tmp_path):
    """Guards the test above: the same file, world-readable, is flagged."""
    path = install(tmp_path, EXAMPLE, "etc/myclaw.toml", 0o644)
    assert os.stat(path).st_mode & 0o004
    assert [(f.severity, f.key) for f in audit(load(path, tmp_path))] == [
        ("high", "permissions.config")]
