"""Configuration: defaults, validation with one precise line, secrets from the environment."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bot import config as config_mod
from bot.errors import ConfigError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "myclaw.toml"
    path.write_text(text)
    return path


def test_no_file_means_the_built_in_defaults(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = config_mod.load(None, env={"HOME": str(tmp_path)})
    assert cfg.source is None
    assert cfg["agent"]["model"] == "claude-sonnet-5-5"
    assert cfg["senders"]["unknown"] == "pairing"
    assert cfg.store_path == tmp_path / ".local" / "share" / "myclaw" / "myclaw.db"


def test_the_file_comes_from_the_flag_then_the_environment_then_the_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    local = write(tmp_path, '[agent]\nmodel = "local-model"\n')
    other = tmp_path / "other.toml"
    other.write_text('[agent]\nmodel = "env-model"\n')
    assert config_mod.load(None, env={}).source == Path("myclaw.toml")
    assert config_mod.load(None, env={"MYCLAW_CONFIG": str(other)})["agent"]["model"] == "env-model"
    assert config_mod.load(str(local), env={"MYCLAW_CONFIG": str(other)})["agent"]["model"] == "local-model"


@pytest.mark.parametrize(("toml", "expected"), [
    ('[agent]\nmodle = "x"\n', "[agent] 'modle': unknown key"),
    ('[senders]\n"telegram:1" = "god"\n',
     "[senders] telegram:1 = 'god': expected one of 'read_only', 'supervised', 'full'"),
    ('[senders]\nunknown = "everyone"\n', "[senders] unknown = 'everyone': expected one of"),
    ('[agent]\nmax_steps = "ten"\n', "[agent] max_steps = 'ten': expected integer"),
    ('[telegrm]\n', "'telegrm': unknown section"),
    ('[senders]\n"whatsapp:1" = "full"\n', "[senders] 'whatsapp:1': unknown key"),
    ('[agent\n', "not valid TOML"),
])
def test_a_bad_config_stops_with_one_line_naming_file_key_and_expectation(tmp_path, toml, expected):
    path = write(tmp_path, toml)
    with pytest.raises(ConfigError) as caught:
        config_mod.load(str(path), env={})
    message = str(caught.value)
    assert message.startswith(str(path)) and expected in message and "\n" not in message


def test_a_missing_config_file_named_explicitly_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        config_mod.load(str(tmp_path / "nope.toml"), env={})


def test_secrets_come_only_from_the_environment(tmp_path):
    cfg = config_mod.from_dict({}, env={"ANTHROPIC_API_KEY": " sk-x-123 ", "TELEGRAM_BOT_TOKEN": ""})
    assert cfg.secret("ANTHROPIC_API_KEY") == "sk-x-123"
    assert cfg.secret("TELEGRAM_BOT_TOKEN") is None
    assert not cfg.telegram_enabled
    assert cfg.secret_values() == ["sk-x-123"]


def test_a_missing_profile_is_refused():
    with pytest.raises(ConfigError, match=r"no \[profiles.strict\]"):
        config_mod.from_dict({"agent": {"profile": "strict"}}, env={})


@pytest.mark.parametrize("toml", ['[agent]\nmodle = "x"\n', '[senders]\n"telegram:1" = "god"\n'])
def test_myclaw_refuses_to_start_on_a_bad_config_with_exit_2_and_no_traceback(tmp_path, toml):
    path = write(tmp_path, toml)
    proc = subprocess.run([sys.executable, "-m", "bot", "--config", str(path), "run"],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and str(path) in proc.stderr
