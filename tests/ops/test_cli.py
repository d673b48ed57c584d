"""The `myclaw` command line and the terminal channel, driven as a user would."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.anthropic_server import FakeAnthropic, reply, text, tool_use

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str, env: dict[str, str], stdin: str = "", timeout: float = 60):
    return subprocess.run([sys.executable, "-m", "bot", *args], input=stdin, capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=ROOT)


def base_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT),
            "MYCLAW_CONFIG": str(write_config(tmp_path)), **extra}


def write_config(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "myclaw.toml"
    if not path.exists():
        path.write_text(f'[agent]\nworkspace = "{tmp_path / "ws"}"\nllm_max_retries = 0\n'
                        f'[store]\npath = "{tmp_path / "data" / "myclaw.db"}"\n{extra}')
    return path


def test_run_without_an_api_key_says_what_to_set_instead_of_crashing(tmp_path):
    proc = run_cli("run", env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode == 2
    assert "ANTHROPIC_API_KEY is not set" in proc.stderr and "export ANTHROPIC_API_KEY" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_argument_errors_print_usage_not_a_traceback(tmp_path):
    proc = run_cli("frobnicate", env=base_env(tmp_path))
    assert proc.returncode == 2 and "usage: myclaw" in proc.stderr and "Traceback" not in proc.stderr


def test_usage_refuses_a_negative_or_zero_number_of_days(tmp_path):
    for days in ("-1", "0", "x"):
        proc = run_cli("usage", "--days", days, env=base_env(tmp_path))
        assert proc.returncode == 2 and "--days" in proc.stderr and "Traceback" not in proc.stderr
    assert "give at least 1" in run_cli("usage", "--days", "-1", env=base_env(tmp_path)).stderr


def test_tools_for_an_unknown_telegram_sender_says_they_must_pair(tmp_path):
    proc = run_cli("tools", "--sender", "telegram:42", env=base_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "telegram:42: autonomy pairing" in proc.stdout and "must pair first" in proc.stdout


def test_tools_for_a_supervised_sender_lists_offered_and_hidden_tools_with_reasons(tmp_path):
    write_config(tmp_path, '[senders]\n"telegram:42" = "supervised"\n'
                           '[profiles.default]\nexcluded_tools = ["time_now"]\n')
    proc = run_cli("tools", "--sender", "telegram:42", env=base_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    offered, _, hidden = proc.stdout.partition("Hidden")
    assert "fs_read" in offered
    assert "time_now" in hidden and "excluded from non-CLI channels" in hidden
    cli = run_cli("tools", "--sender", "cli:local", env=base_env(tmp_path))
    assert "time_now" in cli.stdout.partition("Hidden")[0]


def test_chat_on_a_pipe_answers_and_asks_for_approval(tmp_path):
    with FakeAnthropic.start_in_thread() as fake:
        fake.script(text("Hello from the model."),
                    reply(text("Writing."), tool_use("fs_write", {"path": "a.txt", "content": "hi"})),
                    text("Done."))
        write_config(tmp_path, '[senders]\n"cli:local" = "supervised"\n')
        env = base_env(tmp_path, ANTHROPIC_API_KEY="test", ANTHROPIC_BASE_URL=fake.base_url)
        proc = run_cli("chat", env=env, stdin="hello\nwrite a file\ny\n")
    assert proc.returncode == 0, proc.stderr
    assert "myclaw> Hello from the model." in proc.stdout
    assert "Approval needed — fs_write" in proc.stdout and "Create a.txt" in proc.stdout
    assert "Done." in proc.stdout
    assert (tmp_path / "ws" / "a.txt").read_text() == "hi"


def test_usage_lists_the_recorded_tokens_and_cost_as_a_table_and_as_json(tmp_path):
    with FakeAnthropic.start_in_thread() as fake:
        env = base_env(tmp_path, ANTHROPIC_API_KEY="test", ANTHROPIC_BASE_URL=fake.base_url)
        fake.script(reply(text("hi"), usage={"input_tokens": 1000, "output_tokens": 100,
                                             "cache_creation_input_tokens": 0,
                                             "cache_read_input_tokens": 0}))
        run_cli("chat", env=env, stdin="hello\n")
    proc = run_cli("usage", env=env)
    assert "cli:local" in proc.stdout and "claude-sonnet-5-5" in proc.stdout
    assert "cost USD" in proc.stdout and "Total: 0.0045 USD" in proc.stdout
    report = json.loads(run_cli("usage", "--json", env=env).stdout)
    (row,) = report["rows"]
    assert (row["sender"], row["model"], row["calls"]) == ("cli:local", "claude-sonnet-5-5", 1)
    assert row["cost"] == pytest.approx((1000 * 3 + 100 * 15) / 1e6)
    assert report["by_sender"] == {"cli:local": pytest.approx(0.0045)}


class _Terminal:
    """Reads a pty up to a needle in what a person would read (escape sequences left out);
    what came after the needle stays for the next read (the prompt often arrives in the same
    chunk as the answer before it)."""

    def __init__(self, fd: int):
        from tests.channels.cli.test_cli_prompts import Screen

        self.screen = Screen(fd)

    def read_until(self, needle: bytes, timeout: float = 60) -> bytes:
        return self.screen.expect(needle, timeout)


def test_ctrl_c_in_a_terminal_stops_the_turn_and_a_second_one_in_a_row_exits(tmp_path):
    with FakeAnthropic.start_in_thread() as fake:
        fake.script(text("too slow to ever arrive", delay=30), text("after stop"))
        env = base_env(tmp_path, ANTHROPIC_API_KEY="test", ANTHROPIC_BASE_URL=fake.base_url)
        pid, fd = pty.fork()
        if pid == 0:  # child: the CLI on a real terminal
            from tests.channels.cli.test_cli_prompts import tty_env

            os.chdir(ROOT)
            os.execve(sys.executable, [sys.executable, "-m", "bot", "chat"], tty_env(env))
        terminal = _Terminal(fd)
        try:
            terminal.read_until(b"Ctrl-D to quit")
            os.write(fd, b"think for a long time\n")
            fake.wait_for_requests(1)
            os.kill(pid, signal.SIGINT)
            assert b"too slow" not in terminal.read_until(b"Stopped.")
            os.write(fd, b"are you there?\n")
            terminal.read_until(b"after stop")
            terminal.read_until(b"you> ")  # the turn is over: nothing runs now
            os.kill(pid, signal.SIGINT)  # idle: the first Ctrl-C only says how to quit
            terminal.read_until(b"press Ctrl-C again or Ctrl-D to quit")
            os.kill(pid, signal.SIGINT)
            terminal.read_until(b"bye")
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0
        finally:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.close(fd)


def test_the_running_bot_hides_its_secrets_from_the_commands_it_runs(tmp_path):
    with FakeAnthropic.start_in_thread() as fake:
        fake.script(tool_use("shell_run", {"command": "env"}), text("listed"))
        env = base_env(tmp_path, ANTHROPIC_API_KEY="sk-ant-secret-for-this-test",
                       ANTHROPIC_BASE_URL=fake.base_url)
        proc = run_cli("chat", env=env, stdin="list the environment\ny\n")
        assert proc.returncode == 0, proc.stderr
        result = fake.fake.requests[-1].json["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and "PATH=" in result["content"]
    assert "sk-ant-secret-for-this-test" not in result["content"]


def test_the_bot_process_is_not_dumpable():
    probe = ("import ctypes, bot.ops.process as a; a.harden_process(); "
             "print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))")  # 3 = PR_GET_DUMPABLE
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert proc.stdout.strip() == "0", proc.stderr


def test_chat_answers_no_and_always_at_the_approval_prompt(tmp_path):
    with FakeAnthropic.start_in_thread() as fake:
        fake.script(tool_use("fs_write", {"path": "no.txt", "content": "x"}), text("Not written."),
                    tool_use("fs_write", {"path": "a.txt", "content": "1"}), text("Written once."),
                    tool_use("fs_write", {"path": "b.txt", "content": "2"}), text("Written again."))
        write_config(tmp_path, '[senders]\n"cli:local" = "supervised"\n')
        env = base_env(tmp_path, ANTHROPIC_API_KEY="test", ANTHROPIC_BASE_URL=fake.base_url)
        proc = run_cli("chat", env=env, stdin="write no\nn\nwrite a\na\nwrite b\n")
    assert proc.returncode == 0, proc.stderr
    workspace = tmp_path / "ws"
    assert not (workspace / "no.txt").exists()
    assert (workspace / "a.txt").read_text() == "1" and (workspace / "b.txt").read_text() == "2"
    assert proc.stdout.count("Approval needed") == 2  # "always" covered the third call
    assert "Not written." in proc.stdout and "Written again." in proc.stdout


def test_config_is_accepted_before_and_after_the_subcommand(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    path = write_config(tmp_path)
    for argv in (("--config", str(path), "doctor"), ("doctor", "--config", str(path)),
                 ("pair", "list", "--config", str(path))):
        proc = run_cli(*argv, env=env)
        assert "unrecognized arguments" not in proc.stderr and "Traceback" not in proc.stderr
        assert f"{path} is valid" in proc.stdout or "No pending pairing codes." in proc.stdout
    after_wins = run_cli("--config", "/nonexistent/a.toml", "doctor", "--config", str(path), env=env)
    assert f"{path} is valid" in after_wins.stdout


def test_myclaw_alone_lists_the_commands(tmp_path):
    proc = run_cli(env=base_env(tmp_path))
    assert proc.returncode == 2 and "required" not in proc.stderr
    for command in ("run", "chat", "tools", "doctor", "pair", "receipts", "audit", "usage"):
        assert f"    {command} " in proc.stderr


def test_the_terminal_chat_shows_no_log_lines(tmp_path):
    with FakeAnthropic.start_in_thread() as fake:
        env = base_env(tmp_path, ANTHROPIC_API_KEY="test", ANTHROPIC_BASE_URL=fake.base_url)
        proc = run_cli("chat", env=env, stdin="hello\n")
    assert proc.returncode == 0 and "myclaw> ok: hello" in proc.stdout
    assert proc.stderr == ""


def test_version_prints_the_version(tmp_path):
    from bot.ops.cli.main import version

    proc = run_cli("--version", env=base_env(tmp_path))
    assert proc.returncode == 0 and proc.stdout.strip() == f"myclaw {version()}"
    assert version()[0].isdigit()


def test_tools_for_a_sender_that_is_not_an_id_is_an_error_on_stderr(tmp_path):
    for sender in ("bob", "telegram:@bob"):
        proc = run_cli("tools", "--sender", sender, env=base_env(tmp_path))
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr.startswith(f"myclaw: --sender {sender!r} is not a sender id")
        assert len(proc.stderr.strip().splitlines()) == 1


def test_audit_refuses_a_limit_of_zero_rows(tmp_path):
    proc = run_cli("audit", "--limit", "0", env=base_env(tmp_path))
    assert proc.returncode == 2 and proc.stdout == ""
    assert "argument --limit: 0 rows would show nothing: give 1 or more" in proc.stderr


def test_run_refuses_a_workspace_that_is_the_home_directory_unless_allowed(tmp_path):
    (tmp_path / "myclaw.toml").write_text(
        f'[agent]\nworkspace = "~"\n[store]\npath = "{tmp_path / "data" / "myclaw.db"}"\n')
    env = base_env(tmp_path, ANTHROPIC_API_KEY="test")
    proc = run_cli("chat", env=env)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert f"the workspace {tmp_path} is the home directory" in proc.stderr
    assert "allow_broad_workspace = true" in proc.stderr


def test_each_command_module_adds_the_commands_the_parser_picks_it_for():
    import argparse
    import importlib

    from bot.ops.cli.main import COMMAND_MODULES

    for module_name, commands in COMMAND_MODULES.items():
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers()
        importlib.import_module(module_name).add_commands(sub)
        assert tuple(sub.choices) == commands, module_name


def test_a_command_line_parses_with_only_its_commands_module():
    from bot.ops.cli.main import COMMAND_MODULES, build_parser, command_modules

    assert command_modules(["run"]) == ["bot.ops.cli.core"]
    assert command_modules(["--config", "doctor", "--log-level", "INFO", "pair", "list"]) == [
        "bot.ops.cli.safety"]
    assert command_modules(["--help"]) == command_modules([]) == list(COMMAND_MODULES)
    assert command_modules(["rnu"]) == list(COMMAND_MODULES)   # a typo: every command listed
    args = build_parser(["--log-level", "INFO", "run"]).parse_args(["--log-level", "INFO", "run"])
    assert args.command == "run" and args.log_level == "INFO"
