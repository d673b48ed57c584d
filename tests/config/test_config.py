"""Configuration: defaults, validation with one precise line, secrets from the environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.config import settings as config_mod
from bot.core.errors import ConfigError


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
    ('[senders]\n"signal:1" = "full"\n', "[senders] 'signal:1': unknown key"),
    ('[senders]\n"whatsapp:1" = "full"\n', "[senders] 'whatsapp:1': can never match a sender"),
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


# --- every way reading the file can fail is one line, exit 2 ----------------------------------


@pytest.mark.parametrize(("content", "expected"), [
    ('[agent]\nmodel = "x"\n'.encode("utf-16"), 'UTF-16 text ("Unicode" in Notepad); save it as UTF-8'),
    ('[agent]\nmodel = "café"\n'.encode("latin-1"), "not UTF-8 text (byte 0xe9 on line 2)"),
    (b"a = " + b"[" * 5000 + b"]" * 5000, "nested too deeply"),
])
def test_a_file_that_is_not_utf8_toml_is_one_line(tmp_path, content, expected):
    path = tmp_path / "myclaw.toml"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        config_mod.load(str(path), env={})
    assert str(caught.value).startswith(str(path)) and expected in str(caught.value)


def test_an_endless_file_is_refused_after_a_bounded_read():
    with pytest.raises(ConfigError, match=r"/dev/zero: larger than 1 MB: not a config file"):
        config_mod.load("/dev/zero", env={})


def test_a_utf8_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "myclaw.toml"
    path.write_bytes(b"\xef\xbb\xbf" + b'[agent]\nmodel = "bom-model"\n')
    assert config_mod.load(str(path), env={})["agent"]["model"] == "bom-model"


def test_a_directory_or_an_unreadable_file_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match="is a directory, not a config file"):
        config_mod.load(str(tmp_path), env={})
    with pytest.raises(ConfigError, match="cannot read config: Not a directory"):
        config_mod.load(str(write(tmp_path, "") / "x.toml"), env={})


@pytest.mark.parametrize(("toml", "key"), [
    ('[agent]\nworkspace = "~nosuch-user-zz/ws"\n', "[agent] workspace = '~nosuch-user-zz/ws'"),
    ('[store]\npath = "a\\u0000b"\n', "[store] path = 'a\\x00b'"),
])
def test_a_path_that_cannot_be_resolved_is_one_line(tmp_path, toml, key):
    with pytest.raises(ConfigError) as caught:
        config_mod.load(str(write(tmp_path, toml)), env={"HOME": str(tmp_path)})
    assert key in str(caught.value) and "not a usable path" in str(caught.value)


@pytest.mark.parametrize("content", [
    "[agent]\nmodel = 'x'\n".encode("utf-16"), b"\xff\xfe\x00", b"[x\n", b"\x00\x01\x02"])
def test_myclaw_on_an_unreadable_config_exits_2_with_one_line(tmp_path, content):
    path = tmp_path / "myclaw.toml"
    path.write_bytes(content)
    proc = subprocess.run([sys.executable, "-m", "bot", "doctor", "--config", str(path)],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and str(path) in proc.stderr


def test_a_config_file_whose_read_fails_is_one_line(tmp_path):
    path = write(tmp_path, "")
    path.chmod(0)
    if os.geteuid() == 0:  # root reads a mode-0 file; reading this one fails for root too (EIO)
        path = Path("/proc/self/mem")
    with pytest.raises(ConfigError, match=r"cannot read config: (Permission denied|Input/output)"):
        config_mod.load(str(path), env={})


# --- sender keys that can never match --------------------------------------------------------


@pytest.mark.parametrize("key", ["telegram:@bob", "discord:alice", "telegram:", "telegram:12 34",
                                 "discord:1e5"])
def test_a_sender_key_that_can_never_match_is_refused_with_a_hint(tmp_path, key):
    path = write(tmp_path, f'[senders]\n"telegram:1" = "full"\n"{key}" = "full"\n')
    with pytest.raises(ConfigError) as caught:
        config_mod.load(str(path), env={})
    message = str(caught.value)
    assert f"[senders] {key!r}: can never match a sender" in message
    assert "numeric user ids" in message and "/whoami" in message and "myclaw pair list" in message


def test_numeric_sender_keys_and_cli_local_are_accepted(tmp_path):
    path = write(tmp_path, '[senders]\n"telegram:123456789" = "full"\n'
                           '"discord:222233334444555566" = "supervised"\n"cli:local" = "full"\n')
    assert config_mod.load(str(path), env={})["senders"]["telegram:123456789"] == "full"
