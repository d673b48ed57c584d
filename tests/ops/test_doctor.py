"""`myclaw doctor`: one line per check, FAIL (exit 1) only for what blocks start-up or a high
security finding, and never a secret value on screen. `--telegram` talks to the fake Bot API."""

from __future__ import annotations

import io
import logging
import socket
from pathlib import Path

import pytest

from bot.core import logs
from bot.ops import cli
from bot.ops.cli.doctor import LATEST_SCHEMA, run_doctor
from bot.store.sqlite import Store
from tests.conftest import FAKE_ENV, make_config
from tests.fakes.telegram_server import FakeTelegram, channel_overrides

TOKEN = "123456:TEST-token_abc"


async def doctor(config, **flags) -> tuple[int, list[str]]:
    out = io.StringIO()
    code = await run_doctor(config, out=out, **flags)
    return code, out.getvalue().splitlines()


def line(lines: list[str], name: str) -> str:
    matches = [text for text in lines if text[5:].startswith(f"{name}:")]
    assert len(matches) == 1, f"expected one {name!r} line in:\n" + "\n".join(lines)
    return matches[0]


async def test_a_ready_setup_reports_every_check_and_exits_zero(tmp_path):
    config = make_config(tmp_path)
    code, lines = await doctor(config)
    assert code == 0
    assert all(text.split()[0] in ("ok", "warn", "FAIL") for text in lines[:-1])
    assert not [text for text in lines if text.startswith("FAIL")]
    assert line(lines, "store") == (f"ok   store: {config.store_path} opens "
                                    f"(schema version {LATEST_SCHEMA}, created now)")
    assert line(lines, "store writable").startswith("ok")
    assert line(lines, "ANTHROPIC_API_KEY").startswith("ok")
    assert line(lines, "TELEGRAM_BOT_TOKEN") == ("warn TELEGRAM_BOT_TOKEN: not set: the Telegram "
                                                 "channel stays off")
    assert line(lines, "tools").startswith("ok   tools: ")
    assert lines[-1] == f"{len(lines) - 1} checks, 0 failed"


async def test_the_write_probe_leaves_the_store_unchanged(tmp_path, config):
    await doctor(config)
    code, lines = await doctor(config)  # the second run finds the store the first one created
    assert code == 0
    assert line(lines, "store").endswith(f"(schema version {LATEST_SCHEMA})")
    async with Store(config.store_path) as store:
        tables = await store.fetchall("SELECT name FROM sqlite_master WHERE name LIKE 'doctor%'")
    assert tables == []


async def test_without_an_anthropic_key_start_up_is_blocked(tmp_path):
    env = {k: v for k, v in FAKE_ENV.items() if k != "ANTHROPIC_API_KEY"}
    code, lines = await doctor(make_config(tmp_path, env=env))
    assert code == 1
    assert line(lines, "ANTHROPIC_API_KEY") == ("FAIL ANTHROPIC_API_KEY: not set: needed to chat "
                                                "on any channel")
    assert lines[-1].endswith("1 failed")


async def test_a_store_that_cannot_be_opened_is_a_failure_with_the_reason(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the data directory should be")
    config = make_config(tmp_path, {"store": {"path": str(blocker / "myclaw.db")}})
    code, lines = await doctor(config)
    assert code == 1
    store_line = line(lines, "store")
    assert store_line.startswith("FAIL store: cannot open the store at ")
    assert str(blocker / "myclaw.db") in store_line


async def test_secrets_are_named_never_shown(tmp_path):
    env = {**FAKE_ENV, "TELEGRAM_BOT_TOKEN": "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ",
           "DISCORD_BOT_TOKEN": "MTA1ODk0NjA3MjQ1OTQ1NjY0Mg.GhX2qN.discord-token-value-abcdefghij",
           "BRAVE_API_KEY": "brave-key-value-0001"}
    code, lines = await doctor(make_config(tmp_path, env=env))
    output = "\n".join(lines)
    assert code == 0
    for value in (env["ANTHROPIC_API_KEY"], env["TELEGRAM_BOT_TOKEN"], env["DISCORD_BOT_TOKEN"],
                  env["BRAVE_API_KEY"]):
        assert value not in output
    assert line(lines, "TELEGRAM_BOT_TOKEN") == "ok   TELEGRAM_BOT_TOKEN: set: the Telegram channel starts"
    assert line(lines, "DISCORD_BOT_TOKEN") == "ok   DISCORD_BOT_TOKEN: set: the Discord channel starts"
    assert line(lines, "BRAVE_API_KEY").startswith("ok")


async def test_a_channel_disabled_in_the_config_is_not_a_warning(tmp_path):
    config = make_config(tmp_path, {"telegram": {"enabled": False}, "discord": {"enabled": False}})
    _, lines = await doctor(config)
    assert line(lines, "TELEGRAM_BOT_TOKEN") == "ok   TELEGRAM_BOT_TOKEN: Telegram is disabled in [telegram]"
    assert line(lines, "DISCORD_BOT_TOKEN").startswith("ok")


async def test_webhook_mode_without_its_secret_is_a_failure(tmp_path):
    env = {**FAKE_ENV, "TELEGRAM_BOT_TOKEN": TOKEN}
    config = make_config(tmp_path, {"telegram": {"mode": "webhook",
                                                 "webhook_url": "https://bot.example.org/tg"}}, env)
    code, lines = await doctor(config)
    assert code == 1
    assert line(lines, "TELEGRAM_WEBHOOK_SECRET").startswith("FAIL")
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    webhook = {"mode": "webhook", "webhook_url": "https://bot.example.org/tg",
               "listen": "127.0.0.1", "port": port}
    config = make_config(tmp_path, {"telegram": webhook},
                         {**env, "TELEGRAM_WEBHOOK_SECRET": "s3cret-webhook-value"})
    code, lines = await doctor(config)
    assert code == 0 and line(lines, "TELEGRAM_WEBHOOK_SECRET").startswith("ok")
    # Without its public URL, `run` refuses webhook mode: so does doctor.
    config = make_config(tmp_path, {"telegram": {**webhook, "webhook_url": ""}},
                         {**env, "TELEGRAM_WEBHOOK_SECRET": "s3cret-webhook-value"})
    code, lines = await doctor(config)
    assert code == 1 and "needs webhook_url" in line(lines, "TELEGRAM_BOT_TOKEN")


async def test_tools_that_are_not_registered_and_modules_that_fail_are_listed(tmp_path):
    custom = tmp_path / "custom-tools"
    custom.mkdir()
    (custom / "needs_key.py").write_text(
        "from bot.core.tool import ToolUnavailable\n\n"
        "def build():\n    raise ToolUnavailable('set WEATHER_API_KEY to enable weather')\n")
    (custom / "broken.py").write_text("def build(:\n")
    config = make_config(tmp_path, {"tools": {"custom_paths": [str(custom)]}})
    code, lines = await doctor(config)
    assert code == 0  # the bot still starts without them
    assert line(lines, f"tool {custom / 'needs_key.py'}") == (
        f"warn tool {custom / 'needs_key.py'}: not registered: set WEATHER_API_KEY to enable weather")
    broken = line(lines, str(custom / "broken.py"))
    assert broken.startswith("warn ") and "failed to load: syntax error at line 1" in broken


async def test_security_findings_of_high_severity_fail_the_run(tmp_path):
    config = make_config(tmp_path, {"senders": {"unknown": "full"},
                                    "profiles": {"default": {"always_ask": ["shell_run"]}}})
    code, lines = await doctor(config)
    assert code == 0  # without --security the audit does not run
    code, lines = await doctor(config, security=True)
    assert code == 1
    finding = line(lines, "security [high] senders.unknown")
    assert finding.startswith("FAIL ") and "Fix: " in finding and "pairing" in finding


async def test_medium_findings_warn_without_failing(tmp_path):
    config = make_config(tmp_path, {"senders": {"telegram:42": "full"}})
    code, lines = await doctor(config, security=True)
    assert code == 0
    assert line(lines, "security [medium] profiles.default.always_ask").startswith("warn ")


async def test_a_clean_configuration_says_so(tmp_path):
    _, lines = await doctor(make_config(tmp_path), security=True)
    assert line(lines, "security") == "ok   security: no risky settings found"


async def test_security_says_what_each_workspace_mode_means_for_a_group(tmp_path):
    _, lines = await doctor(make_config(tmp_path), security=True)
    shared = line(lines, "security groups")
    assert 'workspace_mode is "shared"' in shared and "one workspace everybody shares" in shared
    assert "count as leaving" in shared
    per_sender = make_config(tmp_path, {"agent": {"workspace_mode": "per_sender",
                                                  "session_scope": "chat"}})
    _, lines = await doctor(per_sender, security=True)
    text = line(lines, "security groups")
    assert "the group's own folder and memory, never a member's private one" in text
    assert "members share one conversation" in text and "share_private" in text


async def test_telegram_check_reports_the_bot_when_the_token_works(tmp_path):
    async with FakeTelegram(token=TOKEN) as fake:
        config = make_config(tmp_path, channel_overrides(fake),
                             {**FAKE_ENV, "TELEGRAM_BOT_TOKEN": TOKEN})
        code, lines = await doctor(config, telegram=True)
        assert fake.of("getMe")
    assert code == 0
    assert line(lines, "telegram getMe") == "ok   telegram getMe: token accepted (@myclaw_test_bot)"


async def test_telegram_check_fails_cleanly_on_a_rejected_token(tmp_path):
    wrong = "123456:WRONG-token_xyz"
    async with FakeTelegram(token=TOKEN) as fake:
        config = make_config(tmp_path, channel_overrides(fake),
                             {**FAKE_ENV, "TELEGRAM_BOT_TOKEN": wrong})
        code, lines = await doctor(config, telegram=True)
    assert code == 1
    check = line(lines, "telegram getMe")
    assert check.startswith("FAIL ") and "rejected" in check
    assert wrong not in "\n".join(lines)


async def test_telegram_check_without_a_token_fails_without_calling_anyone(tmp_path):
    code, lines = await doctor(make_config(tmp_path), telegram=True)
    assert code == 1
    assert line(lines, "telegram getMe") == "FAIL telegram getMe: TELEGRAM_BOT_TOKEN is not set"


async def test_telegram_check_says_so_when_the_channel_module_is_missing(tmp_path):
    def no_channels(name: str):
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    config = make_config(tmp_path, env={**FAKE_ENV, "TELEGRAM_BOT_TOKEN": TOKEN})
    out = io.StringIO()
    code = await run_doctor(config, telegram=True, out=out, import_module=no_channels)
    check = line(out.getvalue().splitlines(), "telegram getMe")
    assert check.startswith("warn ") and "not available" in check
    # `run` could not start the channel either: the token's line says so.
    token = line(out.getvalue().splitlines(), "TELEGRAM_BOT_TOKEN")
    assert code == 1 and token.startswith("FAIL ") and "cannot be loaded" in token


# --- through the real command line ---------------------------------------------------------------


@pytest.fixture
def cli_env(tmp_path, monkeypatch):
    for name in ("TELEGRAM_BOT_TOKEN", "DISCORD_BOT_TOKEN", "BRAVE_API_KEY", "MYCLAW_CONFIG",
                 "TELEGRAM_WEBHOOK_SECRET", "MYCLAW_RECEIPT_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_ENV["ANTHROPIC_API_KEY"])
    yield tmp_path
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, logs.MyclawHandler)]:
        root.removeHandler(handler)


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "etc" / "myclaw.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'[agent]\nworkspace = "{tmp_path / "workspace"}"\n' + text)
    path.chmod(0o600)
    return path


def test_myclaw_doctor_security_exits_non_zero_on_a_high_finding(cli_env, capsys):
    path = write_config(cli_env, '[senders]\nunknown = "supervised"\n')
    assert cli.main(["--config", str(path), "doctor", "--security"]) == 1
    out = capsys.readouterr().out
    assert "FAIL security [high] senders.unknown" in out
    assert f"ok   config: {path} is valid" in out


def test_myclaw_doctor_exits_zero_for_a_safe_config(cli_env, capsys):
    path = write_config(cli_env, "")
    assert cli.main(["--config", str(path), "doctor", "--security"]) == 0
    assert "security: no risky settings found" in capsys.readouterr().out


def test_an_invalid_config_stops_doctor_with_the_key_and_a_non_zero_exit(cli_env, capsys):
    path = write_config(cli_env, '[senders]\nunknown = "everyone"\n')
    assert cli.main(["--config", str(path), "doctor"]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "unknown" in err and "'pairing'" in err


@pytest.mark.parametrize(("workspace", "why"), [
    ("/", "is the filesystem root"),
    ("~", "is the home directory"),
    ("{tmp}", "contains the home directory"),
    ("{tmp}/home/.local", "contains myclaw's own data"),
])
def test_doctor_fails_on_a_workspace_that_reaches_beyond_a_dedicated_directory(
        cli_env, capsys, workspace, why):
    path = cli_env / "myclaw.toml"
    path.write_text(f'[agent]\nworkspace = "{workspace.format(tmp=cli_env)}"\n'
                    f'[store]\npath = "{cli_env}/home/.local/share/myclaw/myclaw.db"\n')
    assert cli.main(["doctor", "--config", str(path)]) == 1
    out = capsys.readouterr().out
    assert "FAIL workspace: the workspace " in out and why in out and "start-up refuses it" in out


def test_doctor_only_warns_about_a_broad_workspace_that_is_explicitly_allowed(cli_env, capsys):
    path = cli_env / "myclaw.toml"
    path.write_text('[agent]\nworkspace = "~"\nallow_broad_workspace = true\n')
    cli.main(["doctor", "--config", str(path)])
    out = capsys.readouterr().out
    assert "warn workspace: the workspace" in out and "allowed by [agent] allow_broad_workspace" in out


async def test_app_open_refuses_a_root_workspace_and_accepts_it_when_forced(tmp_path):
    from bot.app import App
    from bot.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"\[agent\] workspace: the workspace / is the filesystem"):
        await App.open(make_config(tmp_path, {"agent": {"workspace": "/"}}))
    app = await App.open(make_config(tmp_path, {"agent": {"workspace": "/",
                                                          "allow_broad_workspace": True}}))
    await app.close()


def test_without_a_search_key_doctor_gives_one_web_search_hint(cli_env, capsys):
    path = write_config(cli_env, "")
    cli.main(["--config", str(path), "doctor"])
    out = capsys.readouterr().out
    hints = [line for line in out.splitlines() if "web_search" in line or "BRAVE" in line]
    assert hints == ["warn tool web_search: not registered: set BRAVE_API_KEY or configure "
                     "[tools.web_search] searxng_url"]
