"""Health tells the truth: every channel running in the process, the terminal included, with
its state — `/healthz` and the console's Health page show the same (a real `myclaw chat` on a
pseudo-terminal, the probe and a browser's requests over HTTP)."""

from __future__ import annotations

import http.cookiejar
import json
import os
import urllib.request

from tests.channels.cli.test_cli_prompts import exit_code, terminal
from tests.channels.cli.test_terminal_as_typed import free_port
from tests.fakes.anthropic_server import FakeAnthropic
from tests.ops.test_cli import base_env, run_cli, write_config


def test_the_terminal_is_a_running_channel_on_healthz_and_on_the_console_health_page(tmp_path):
    health, console = free_port(), free_port()
    write_config(tmp_path, f'[health]\nenabled = true\nlisten = "127.0.0.1"\nport = {health}\n'
                           f'[console]\nenabled = true\nport = {console}\n')
    with FakeAnthropic.start_in_thread() as fake:
        env = base_env(tmp_path, ANTHROPIC_API_KEY="test", ANTHROPIC_BASE_URL=fake.base_url)
        with terminal(env) as (pid, fd, screen):
            screen.expect(b"you> ")
            with urllib.request.urlopen(f"http://127.0.0.1:{health}/healthz", timeout=30) as probe:
                body = json.loads(probe.read())
            assert probe.status == 200 and body["channels"] == {"cli": True}
            link = run_cli("console", "login", env=env).stdout.strip()
            browser = urllib.request.build_opener(
                urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
            browser.open(link, timeout=30).read()
            page = browser.open(f"{link.split('/login/')[0]}/health", timeout=30).read().decode()
            assert "terminal (cli): <b>connected</b>" in page
            assert "No chat channel is running" not in page
            os.write(fd, b"\x04")
            screen.expect(b"bye")
            assert exit_code(pid) == 0
