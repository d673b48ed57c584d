"""doctor --security says when the secret-file globs protect less than the defaults."""

from __future__ import annotations

from bot.ops.security_audit import audit
from tests.conftest import make_config


def findings(tmp_path, overrides=None):
    return [f for f in audit(make_config(tmp_path, overrides)) if f.key == "security.secret_files"]


def test_the_default_secret_files_raise_no_finding(tmp_path):
    assert findings(tmp_path) == []


def test_no_secret_files_at_all_is_a_medium_finding(tmp_path):
    (finding,) = findings(tmp_path, {"security": {"secret_files": []}})
    assert finding.severity == "medium" and ".env" in finding.problem


def test_a_dropped_default_glob_is_named(tmp_path):
    (finding,) = findings(tmp_path, {"security": {"secret_files": [".env*", "*.vault"]}})
    assert finding.severity == "low" and "*.pem" in finding.problem
