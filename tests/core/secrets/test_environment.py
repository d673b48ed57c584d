"""Secrets in the environment beyond the bot's own list: a variable whose name says it holds
one, and the password of any URL. Each is redacted from tool results; plain settings are not."""

from __future__ import annotations

import pytest

from bot.core.secrets import redaction as secret_redaction
from bot.core.secrets.redaction import SecretRedaction
from tests.conftest import make_config

# (variable, value, the part that must never be shown)
SECRET = [
    ("GITHUB_TOKEN", "ghp_Zz9Yy8Xx7Ww6Vv5Uu4", "ghp_Zz9Yy8Xx7Ww6Vv5Uu4"),
    ("DATABASE_URL", "postgres://app:Hunter2Secret@db/x", "Hunter2Secret"),
    ("SENTRY_DSN", "https://abc123def456@o1.ingest.sentry.io/1", "abc123def456"),
    ("MYSQL_PWD", "Tr0ub4dor&3", "Tr0ub4dor&3"),
    ("HTTPS_PROXY", "http://bob:Pr0xyPassw0rd@proxy.internal:3128", "Pr0xyPassw0rd"),
    ("GH_PAT", "github_pat_11ABCDEFG0123", "github_pat_11ABCDEFG0123"),
    ("REDIS_URL", "redis://:R3disPassw0rd@cache:6379/0", "R3disPassw0rd"),
    ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCY"),
    ("STRIPE_APIKEY", "rk_live_51Habc", "rk_live_51Habc"),
    ("DB_PASSWORD", "correct horse", "correct horse"),
    ("SMTP_PASS", "mailpass99", "mailpass99"),
    ("npm_config__authToken", "npm_AbCdEf123456", "npm_AbCdEf123456"),
    ("GIT_REMOTE", "https://x-access-token:ghs_16C7e42F292c@github.com/o/r", "ghs_16C7e42F292c"),
    ("CI_JOB_URL", "https://ghp_AAAA1111bbbb@github.com/o/r.git", "ghp_AAAA1111bbbb"),
]
# Named like a secret word only by accident, or not a secret at all: shown as they are.
PLAIN = [
    ("PATH", "/usr/local/bin:/usr/bin:/bin"),
    ("PWD", "/srv/project-folder"),
    ("OLDPWD", "/srv/previous-folder"),
    ("GIT_AUTHOR_NAME", "Ada Lovelace"),
    ("DESKTOP_SESSION", "ubuntu"),
    ("XDG_SESSION_CLASS", "user"),
    ("SSL_CERT_FILE", "/"),
    ("TOKENIZERS_PARALLELISM", "false"),
    ("KEYBOARD_LAYOUT", "dvorak"),
    ("TOKEN_TTL", "3600"),
    ("SERVICE_URL", "https://deploy@internal.example/"),
    ("LANG", "en_US.UTF-8"),
]


def redacted(env: dict[str, str]) -> SecretRedaction:
    return SecretRedaction(make_config_for(env).secret_values())


def make_config_for(env: dict[str, str]):
    import tempfile
    from pathlib import Path

    return make_config(Path(tempfile.mkdtemp()), env={"PATH": "/usr/bin:/bin", **env})


@pytest.mark.parametrize(("name", "value", "hidden"), SECRET, ids=[row[0] for row in SECRET])
async def test_a_secret_named_or_carried_in_a_url_is_redacted_from_a_tool_result(
        tmp_path, name, value, hidden):
    redaction = redacted({name: value})
    out = await redaction.scrub((tmp_path,), {"content": f"env says {value} and {hidden} alone"})
    assert hidden not in out["content"], out


async def test_plain_settings_of_the_environment_are_left_as_they_are(tmp_path):
    env = dict(PLAIN)
    shown = " | ".join(value for _, value in PLAIN)
    out = await redacted(env).scrub((tmp_path,), {"content": shown})
    assert out["content"] == shown


def test_the_environment_is_judged_once_not_on_every_call(monkeypatch):
    config = make_config_for({"GITHUB_TOKEN": "ghp_Zz9Yy8Xx7Ww6Vv5Uu4"})
    calls = []
    real = secret_redaction.environment_secrets

    def counting(env):
        calls.append(1)
        return real(env)
    monkeypatch.setattr("bot.config.settings.environment_secrets", counting)
    assert "ghp_Zz9Yy8Xx7Ww6Vv5Uu4" in config.secret_values()
    assert config.secret_values() == config.secret_values()
    assert len(calls) == 1


def test_names_are_read_as_words_not_letters():
    assert all(secret_redaction.secret_name(n) for n in (
        "GITHUB_TOKEN", "GH_PAT", "MYSQL_PWD", "SENTRY_DSN", "DB_PW", "CLIENTSECRET",
        "API_KEYS", "OAUTH_CREDENTIALS", "MY_PASSPHRASE", "DBPASSWORD"))
    assert not any(secret_redaction.secret_name(n) for n in (
        "PATH", "PWD", "OLDPWD", "GIT_AUTHOR_EMAIL", "XDG_SESSION_TYPE", "SSL_CERT_FILE",
        "TOKENIZERS_PARALLELISM", "KEYBOARD", "HOME", "SPATIAL_INDEX"))
