"""The README gives what the issues promise: the two commands, the channel guides, a custom
tool example that is the tested one, and the guides kept in step with docs/."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from bot.config import settings as config_mod
from tests.fakes.anthropic_server import FakeAnthropic, text, tool_use
from tests.fakes.telegram_server import FakeTelegram

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_quick_start_is_exactly_make_run_and_make_test():
    quick = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^(make \w+)", quick, flags=re.M)
    assert commands[:2] == ["make run", "make test"]


def test_the_readme_carries_each_guide_as_written_in_docs():
    for name, heading in (("telegram", "## Telegram in 3 minutes"),
                          ("discord", "## Discord in 5 minutes"),
                          ("slack", "## Slack in 5 minutes"),
                          ("whatsapp", "## WhatsApp in 10 minutes"),
                          ("extending", "## Extending myclaw")):
        assert heading in README
        section = README.split(f"<!-- BEGIN {name} -->", 1)[1].split(f"<!-- END {name} -->", 1)[0]
        doc = (ROOT / "docs" / f"{name}.md").read_text(encoding="utf-8")
        # Same text once headings are demoted one level (outside code blocks).
        normalise = lambda text: re.sub(r"^#+ ", "# ", text.strip(), flags=re.M)  # noqa: E731
        assert normalise(section) == normalise(doc), f"README's {name} guide differs from docs/"


def test_the_readme_shows_the_custom_tool_example_that_the_tests_load():
    example = (ROOT / "tests" / "data" / "custom_tool_example.py").read_text(encoding="utf-8")
    assert example.strip() in README


# --- every command the docs show, run as shown -----------------------------------------------
#
# Each command in a ```sh block of README.md, docs/*.md and deploy/README.md, and each synopsis
# in the README's command table, is either run below (RUN names the test that runs it) or listed
# in NOT_RUNNABLE with the reason. A command added to the docs without either fails the first
# test; nothing is skipped silently.

DOC_FILES = ("README.md", *(f"docs/{p.name}" for p in sorted((ROOT / "docs").glob("*.md"))),
             "deploy/README.md")

# `export NAME=placeholder`: the tests export the fakes' values for these names instead.
PLACEHOLDER_EXPORTS = {
    "export ANTHROPIC_API_KEY=sk-ant-...": "ANTHROPIC_API_KEY",
    "export TELEGRAM_BOT_TOKEN=123456789:AAH...": "TELEGRAM_BOT_TOKEN",
    "export DISCORD_BOT_TOKEN=...": "DISCORD_BOT_TOKEN",
    "export WHATSAPP_ACCESS_TOKEN=EAAG...": "WHATSAPP_ACCESS_TOKEN",
    "export WHATSAPP_APP_SECRET=...": "WHATSAPP_APP_SECRET",
    "export WHATSAPP_VERIFY_TOKEN=...": "WHATSAPP_VERIFY_TOKEN",
    "export OPENAI_API_KEY=sk-...": "OPENAI_API_KEY",
    "export SLACK_BOT_TOKEN=xoxb-...": "SLACK_BOT_TOKEN",
    "export SLACK_APP_TOKEN=xapp-...": "SLACK_APP_TOKEN",
}

RUN = {
    "make run": ("test_make_run_without_a_key_says_so_before_installing_anything",
                 "test_make_run_with_too_old_a_python_says_so_before_creating_the_venv",
                 "test_make_run_with_a_key_opens_the_terminal_chat"),
    "make install": "test_make_install_puts_myclaw_on_the_path_and_says_when_it_is_not",
    "chmod 600 myclaw.toml": "test_the_telegram_guide_runs_as_written_against_the_fake_bot_api",
    "myclaw doctor --telegram --security":
        "test_the_telegram_guide_runs_as_written_against_the_fake_bot_api",
    "myclaw run": ("test_the_telegram_guide_runs_as_written_against_the_fake_bot_api",
                   "test_the_slack_guide_runs_as_written_against_the_fake_slack"),
    "myclaw doctor --slack": "test_the_slack_guide_runs_as_written_against_the_fake_slack",
    "export TELEGRAM_WEBHOOK_SECRET=$(openssl rand -hex 32)":
        "test_the_webhook_secret_recipe_gives_a_secret_telegram_accepts",
    "cp deploy/myclaw.env.example deploy/myclaw.env && chmod 600 deploy/myclaw.env":
        "test_the_deploy_secrets_file_recipe_leaves_a_private_file",
    **{command: "test_placeholder_exports_name_variables_myclaw_reads"
       for command in PLACEHOLDER_EXPORTS},
    # the README's command table (synopses)
    "myclaw chat": "test_the_readme_command_table_runs_as_described",
    "myclaw tools --sender telegram:42": "test_the_readme_command_table_runs_as_described",
    "myclaw doctor [--security] [--telegram] [--whatsapp]":
        "test_the_readme_command_table_runs_as_described",
    "myclaw pair list | approve CODE [--level L] | deny CODE":
        "test_the_readme_command_table_runs_as_described",
    "myclaw receipts verify": "test_the_readme_command_table_runs_as_described",
    "myclaw audit [--sender S] [--since 2h]": "test_the_readme_command_table_runs_as_described",
    "myclaw usage": "test_the_readme_command_table_runs_as_described",
    "myclaw jobs list [--all] | cancel ID": "test_the_readme_command_table_runs_as_described",
    "myclaw console login": "test_the_readme_command_table_runs_as_described",
    "myclaw doctor": "test_the_readme_command_table_runs_as_described",
    "myclaw migrate": "test_the_readme_command_table_runs_as_described",
    "myclaw models": "test_the_other_models_guide_runs_as_written_against_a_fake_ollama",
    "myclaw doctor --online": "test_the_other_models_guide_runs_as_written_against_a_fake_ollama",
}

NOT_RUNNABLE = {
    "make test": "it is the command that runs this test; CI runs it on every push",
    "$EDITOR deploy/myclaw.env": "interactive editor",
    "docker compose -f deploy/compose.yaml up -d --build":
        "needs a Docker daemon; tests/test_deploy.py checks the Dockerfile and compose file",
    "docker compose -f deploy/compose.yaml exec myclaw myclaw doctor --security":
        "needs a Docker daemon; the same doctor --security runs in the Telegram guide test",
    "sudo useradd --system --home-dir /var/lib/myclaw --shell /usr/sbin/nologin myclaw":
        "creates a system user on the host",
    "sudo python3 -m venv /opt/myclaw/.venv": "installs into /opt on the host",
    "sudo /opt/myclaw/.venv/bin/pip install /path/to/myclaw":
        "installs into /opt on the host; tests/test_deploy.py runs the same `pip install .`",
    "sudo install -d -m 755 /etc/myclaw": "writes to /etc on the host",
    "sudo install -m 600 -o myclaw -g myclaw deploy/myclaw.example.toml /etc/myclaw/myclaw.toml":
        "writes to /etc on the host; tests/test_deploy.py loads that example config",
    "sudo install -m 600 -o root -g root deploy/myclaw.env.example /etc/myclaw/myclaw.env":
        "writes to /etc on the host",
    "sudoedit /etc/myclaw/myclaw.env": "interactive editor",
    "sudo install -m 644 deploy/myclaw.service /etc/systemd/system/myclaw.service":
        "installs a systemd unit on the host; tests/test_deploy.py checks the unit",
    "sudo systemctl daemon-reload && sudo systemctl enable --now myclaw":
        "starts a system service on the host",
    "sudo systemd-run --quiet --pipe --wait --collect -p User=myclaw "
    "-p EnvironmentFile=/etc/myclaw/myclaw.env -p Environment=HOME=/var/lib/myclaw "
    "-p Environment=XDG_DATA_HOME=/var/lib/myclaw -p Environment=MYCLAW_CONFIG=/etc/myclaw/myclaw.toml "
    "/opt/myclaw/.venv/bin/myclaw doctor --security": "needs systemd as PID 1 and the installed unit",
    "journalctl -u myclaw -f": "follows the journal of the installed service forever",
    ".venv/bin/pip install -e '.[postgres]'":
        "changes the checkout's venv; the postgres extra's driver is what tests/store/test_store_pg.py "
        "uses, and tests/test_deploy.py builds the editable install and checks it prints no warning",
    "export MYCLAW_DATABASE_URL='postgresql://myclaw:PASSWORD@db.internal:5432/myclaw'":
        "needs a PostgreSQL server; tests/store/test_store_pg.py and test_store_admin.py run against one",
    "myclaw store copy --from sqlite:~/.local/share/myclaw/myclaw.db --to env:MYCLAW_DATABASE_URL":
        "needs a PostgreSQL server; tests/store/test_store_admin.py copies between stores",
}


def shell_commands(text: str) -> list[str]:
    """The commands of the ```sh blocks: continuation lines joined, trailing comments dropped."""
    commands = []
    for block in re.findall(r"^```sh\n(.*?)^```", text, flags=re.M | re.S):
        for line in re.sub(r"\\\n\s*", "", block).splitlines():
            command = re.split(r"\s+#\s", line, maxsplit=1)[0].strip()
            if command and not command.startswith("#"):
                commands.append(command)
    return commands


def table_commands(text: str) -> list[str]:
    return [c.replace("\\|", "|") for c in re.findall(r"^\| `(myclaw [^`]*)` \|", text, flags=re.M)]


def documented_commands() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for name in DOC_FILES:
        text = (ROOT / name).read_text(encoding="utf-8")
        for command in shell_commands(text) + (table_commands(text) if name == "README.md" else []):
            found.setdefault(command, []).append(name)
    return found


def test_every_documented_command_is_run_here_or_says_why_not():
    found = documented_commands()
    unaccounted = {c: where for c, where in found.items() if c not in RUN and c not in NOT_RUNNABLE}
    assert unaccounted == {}, "add these to RUN (with a test) or NOT_RUNNABLE (with the reason)"
    assert set(RUN) | set(NOT_RUNNABLE) <= set(found), "stale entries: no longer in the docs"
    assert not set(RUN) & set(NOT_RUNNABLE)
    tests = {t for names in RUN.values() for t in ((names,) if isinstance(names, str) else names)}
    assert {test for test in tests if not callable(globals().get(test))} == set()



# --- the runs ----------------------------------------------------------------------------------

VENV_MYCLAW = ROOT / ".venv" / "bin" / "myclaw"
TIMEOUT = 120


def run(command: str | list[str], env: dict[str, str], cwd: Path = ROOT, stdin: str = ""):
    argv = ["sh", "-c", command] if isinstance(command, str) else command
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=TIMEOUT,
                          env=env, cwd=cwd)


def base_env(home: Path, bindir: Path | None = None, **extra: str) -> dict[str, str]:
    path = os.environ.get("PATH", "/usr/bin:/bin")
    return {"PATH": f"{bindir}:{path}" if bindir else path, "HOME": str(home), **extra}


@pytest.fixture(scope="module")
def bindir(tmp_path_factory) -> Path:
    """`make install` into a scratch bin directory (the README's step that puts `myclaw` on the
    PATH); the checkout's .venv must be installed and up to date, as `make test` leaves it."""
    home = tmp_path_factory.mktemp("home")
    fresh = run(["make", "-q", ".venv/.installed"], env=base_env(home))
    assert fresh.returncode == 0, "the checkout's .venv is missing or stale: run `make test`"
    target = home / ".local" / "bin"
    proc = run(["make", "--no-print-directory", "install"], env=base_env(home, BINDIR=str(target)))
    assert proc.returncode == 0, proc.stderr
    return target


def test_make_install_puts_myclaw_on_the_path_and_says_when_it_is_not(bindir, tmp_path):
    assert (bindir / "myclaw").resolve() == VENV_MYCLAW.resolve()
    elsewhere = tmp_path / "bin"
    proc = run(["make", "--no-print-directory", "install"], env=base_env(tmp_path, BINDIR=str(elsewhere)))
    assert proc.returncode == 0, proc.stderr
    assert f"{elsewhere} is not on your PATH" in proc.stdout
    on_path = run(["make", "--no-print-directory", "install"],
                  env=base_env(tmp_path, elsewhere, BINDIR=str(elsewhere)))
    assert "not on your PATH" not in on_path.stdout
    version = run("myclaw --version", env=base_env(tmp_path, elsewhere))
    assert version.returncode == 0 and version.stdout.startswith("myclaw ")


def test_make_run_without_a_key_says_so_before_installing_anything(tmp_path):
    (tmp_path / "Makefile").write_text((ROOT / "Makefile").read_text(encoding="utf-8"))
    proc = run(["make", "--no-print-directory", "run"], env=base_env(tmp_path), cwd=tmp_path)
    myclaw = run([sys.executable, "-m", "bot", "run"],
                 env={**base_env(tmp_path), "PYTHONPATH": str(ROOT)}, cwd=tmp_path)
    assert proc.returncode == 2 and myclaw.returncode == 2
    assert proc.stderr.splitlines()[0] == myclaw.stderr.strip()
    assert not (tmp_path / ".venv").exists()  # stopped before creating or installing anything


def test_make_run_with_too_old_a_python_says_so_before_creating_the_venv(tmp_path):
    (tmp_path / "Makefile").write_text((ROOT / "Makefile").read_text(encoding="utf-8"))
    old = tmp_path / "python3.9"
    old.write_text("#!/bin/sh\n[ \"$1\" = -V ] && { echo 'Python 3.9.18'; exit 0; }; exit 1\n")
    old.chmod(0o755)
    proc = run(["make", "--no-print-directory", "run", f"PYTHON={old}"],
               env=base_env(tmp_path, ANTHROPIC_API_KEY="test"), cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.splitlines()[0] == (
        f"myclaw: Python 3.11 or newer is needed ({old} is Python 3.9.18); "
        "run again with PYTHON=python3.11 (or newer)")
    assert not (tmp_path / ".venv").exists()


def test_make_run_with_a_key_opens_the_terminal_chat(bindir, tmp_path):
    other = tmp_path / "other.toml"
    other.write_text('[agent]\nmodel = "model-from-other-toml"\n')
    with FakeAnthropic.start_in_thread() as fake:
        env = base_env(tmp_path, ANTHROPIC_API_KEY="test", ANTHROPIC_BASE_URL=fake.base_url)
        proc = run(["make", "--no-print-directory", "run", f"ARGS=--config {other}"], env=env,
                   stdin="hello\n")
        model = fake.fake.requests[0].json["model"]
    assert proc.returncode == 0, proc.stderr
    assert "myclaw> ok: hello" in proc.stdout and "you> " not in proc.stdout   # answers alone
    assert model == "model-from-other-toml"
    assert "is up to date" not in proc.stdout + proc.stderr   # nothing to do says nothing


def _guide_blocks(name: str, language: str) -> list[str]:
    text_ = (ROOT / "docs" / name).read_text(encoding="utf-8")
    return re.findall(rf"^```{language}\n(.*?)^```", text_, flags=re.M | re.S)


async def test_the_telegram_guide_runs_as_written_against_the_fake_bot_api(bindir, tmp_path):
    config = _guide_blocks("telegram.md", "toml")[0]
    chmod, doctor, start = shell_commands(f"```sh\n{_guide_blocks('telegram.md', 'sh')[1]}```\n")
    async with FakeTelegram() as fake:
        (tmp_path / "myclaw.toml").write_text(config.replace(
            "[telegram]\n", f'[telegram]\nbase_url = "{fake.base_url}"\n'
                            f'base_file_url = "{fake.base_file_url}"\n'))
        env = base_env(tmp_path, bindir, ANTHROPIC_API_KEY="sk-ant-test",
                       ANTHROPIC_BASE_URL="http://127.0.0.1:9", TELEGRAM_BOT_TOKEN=fake.token)
        assert (await _sh(chmod, env, tmp_path))[0] == 0
        assert stat.S_IMODE((tmp_path / "myclaw.toml").stat().st_mode) == 0o600
        code, out = await _sh(doctor, env, tmp_path)
        assert code == 0, out
        assert f"token accepted (@{fake.bot_user['username']})" in out
        assert "security: no risky settings found" in out
        await _start_and_stop(start, env, tmp_path, b"telegram channel connected")


async def test_the_slack_guide_runs_as_written_against_the_fake_slack(bindir, tmp_path):
    from tests.fakes.slack_server import FakeSlack

    config = _guide_blocks("slack.md", "toml")[0]
    doctor, start = shell_commands(f"```sh\n{_guide_blocks('slack.md', 'sh')[1]}```\n")
    async with FakeSlack() as fake:
        (tmp_path / "myclaw.toml").write_text(config.replace(
            "[slack]\n", f'[slack]\nbase_url = "{fake.base_url}"\n'))
        env = base_env(tmp_path, bindir, ANTHROPIC_API_KEY="sk-ant-test",
                       ANTHROPIC_BASE_URL="http://127.0.0.1:9", SLACK_BOT_TOKEN=fake.bot_token,
                       SLACK_APP_TOKEN=fake.app_token)
        code, out = await _sh(doctor, env, tmp_path)
        assert code == 0, out
        for line in ("ok   slack auth.test: token accepted", "ok   slack scopes:",
                     "ok   slack socket mode: connected (Slack said hello)"):
            assert line in out, out
        await _start_and_stop(start, env, tmp_path, b"slack channel connected")
        assert fake.of("apps.connections.open")


async def _sh(command: str, env: dict[str, str], cwd: Path) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec("sh", "-c", command, cwd=cwd, env=env,
                                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), TIMEOUT)
    return proc.returncode, out.decode()


async def _start_and_stop(command: str, env: dict[str, str], cwd: Path, ready: bytes) -> None:
    proc = await asyncio.create_subprocess_exec(*command.split(), cwd=cwd, env=env,
                                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seen = b""
    try:
        async with asyncio.timeout(TIMEOUT):
            while ready not in seen:
                line = await proc.stderr.readline()
                assert line, f"exited before {ready!r}: {seen.decode()[-2000:]}"
                seen += line
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.communicate(), TIMEOUT)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0


def test_the_webhook_secret_recipe_gives_a_secret_telegram_accepts(tmp_path):
    recipe = "export TELEGRAM_WEBHOOK_SECRET=$(openssl rand -hex 32)"
    proc = run(f'{recipe}; printf %s "$TELEGRAM_WEBHOOK_SECRET"', env=base_env(tmp_path))
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,256}", proc.stdout), proc.stderr


def test_the_deploy_secrets_file_recipe_leaves_a_private_file(tmp_path):
    (tmp_path / "deploy").mkdir()
    example = (ROOT / "deploy" / "myclaw.env.example").read_text(encoding="utf-8")
    (tmp_path / "deploy" / "myclaw.env.example").write_text(example)
    command = "cp deploy/myclaw.env.example deploy/myclaw.env && chmod 600 deploy/myclaw.env"
    assert run(command, env=base_env(tmp_path), cwd=tmp_path).returncode == 0
    secrets = tmp_path / "deploy" / "myclaw.env"
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o600 and secrets.read_text() == example


def test_placeholder_exports_name_variables_myclaw_reads():
    for name in PLACEHOLDER_EXPORTS.values():
        assert name in config_mod.SECRET_ENV_VARS


def _seed_pairing_codes(home: Path, *senders: str) -> list[str]:
    from bot.access.senders import Senders
    from bot.store.sqlite import Store

    config = config_mod.load(None, env={"HOME": str(home)})

    async def seed() -> list[str]:
        async with Store(config.store_path) as store:
            return [await Senders(config, store).pairing_code(s) for s in senders]

    return asyncio.run(seed())


def test_the_readme_command_table_runs_as_described(bindir, tmp_path):
    with FakeAnthropic.start_in_thread() as fake:
        fake.script(tool_use("time_now", {}), text("It is now."),
                    tool_use("schedule", {"action": "create", "name": "tea", "at": "in 20 minutes",
                                          "message": "Tea time."}), text("Scheduled."))
        env = base_env(tmp_path, bindir, ANTHROPIC_API_KEY="test", ANTHROPIC_BASE_URL=fake.base_url)
        chat = run("myclaw chat", env=env, cwd=tmp_path, stdin="what time is it?\nremind me\n")
    assert chat.returncode == 0 and "myclaw> It is now." in chat.stdout, chat.stderr
    assert "myclaw> Scheduled." in chat.stdout
    tools = run("myclaw tools --sender telegram:42", env=env, cwd=tmp_path)
    assert "telegram:42: autonomy pairing" in tools.stdout
    for doctor in ("myclaw doctor", "myclaw doctor --security", "myclaw doctor --telegram"):
        proc = run(doctor, env=env, cwd=tmp_path)
        assert re.search(r"^\d+ checks, \d+ failed$", proc.stdout, flags=re.M), proc.stderr
    assert "FAIL telegram getMe: TELEGRAM_BOT_TOKEN is not set" in proc.stdout
    first, second = _seed_pairing_codes(tmp_path, "telegram:7", "telegram:8")
    listed = run("myclaw pair list", env=env, cwd=tmp_path).stdout
    assert first in listed and second in listed and "telegram:7" in listed
    approved = run(f"myclaw pair approve {first} --level read_only", env=env, cwd=tmp_path)
    assert approved.stdout.strip() == "Granted read_only to telegram:7."
    denied = run(f"myclaw pair deny {second}", env=env, cwd=tmp_path)
    assert denied.stdout.strip() == "Denied pairing for telegram:8."
    verified = run("myclaw receipts verify", env=env, cwd=tmp_path)
    assert verified.returncode == 0 and verified.stdout.strip() == "All 2 receipts verify."
    audit = run("myclaw audit --sender cli:local --since 2h", env=env, cwd=tmp_path).stdout
    assert "time_now" in audit.split("\n", 1)[1]
    usage = run("myclaw usage", env=env, cwd=tmp_path).stdout
    assert "cli:local" in usage and "claude-sonnet-5-5" in usage
    jobs = run("myclaw jobs list", env=env, cwd=tmp_path).stdout.splitlines()
    assert len(jobs) == 2 and " tea " in jobs[1] and " active " in jobs[1]
    job_id = jobs[1].split()[0]
    cancelled = run(f"myclaw jobs cancel {job_id}", env=env, cwd=tmp_path)
    assert cancelled.stdout.strip() == f"Cancelled job {job_id} (tea) of cli:local."
    assert run("myclaw jobs list", env=env, cwd=tmp_path).stdout.strip() == "No scheduled jobs."
    assert " cancelled " in run("myclaw jobs list --all", env=env, cwd=tmp_path).stdout
    migrated = run("myclaw migrate", env=env, cwd=tmp_path)
    assert re.search(r"myclaw\.db: schema version \d+ \(already up to date\)$", migrated.stdout)
    login = run("myclaw console login", env=env, cwd=tmp_path)
    assert re.fullmatch(r"http://127\.0\.0\.1:8765/login/\S+\n", login.stdout), login.stderr
    assert "Open this link within 5 minute(s); it works once." in login.stderr


def test_the_other_models_guide_runs_as_written_against_a_fake_ollama(bindir, tmp_path):
    """A newcomer with only an Ollama box: the guide's config (its base_url pointed at the fake
    OpenAI-compatible server), no Anthropic key, chat with a tool call, costs of zero."""
    section = README.split("## Other models", 1)[1].split("\n## ", 1)[0]
    config = section.split("```toml\n", 1)[1].split("```", 1)[0]
    proc = subprocess.Popen([sys.executable, "-m", "tests.fakes.openai_server",
                             "--responder", "tool-then-text"], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True)
    try:
        base = proc.stdout.readline().strip().split(" ", 1)[1]
        (tmp_path / "myclaw.toml").write_text(
            config.replace("http://127.0.0.1:11434/v1", base + "/v1"), encoding="utf-8")
        env = base_env(tmp_path, bindir)
        models = run("myclaw models", env=env, cwd=tmp_path).stdout
        assert "local: openai qwen3:14b" in models and "input 0, output 0" in models
        doctor = run("myclaw doctor --online", env=env, cwd=tmp_path)
        assert re.search(r"^ok   model local: answered in .* s; takes tools$", doctor.stdout,
                         flags=re.M), doctor.stdout
        assert "ANTHROPIC_API_KEY" not in doctor.stdout
        chat = run("myclaw chat", env=env, cwd=tmp_path, stdin="what time is it?\n")
        assert chat.returncode == 0 and "done: the tool answered" in chat.stdout, chat.stderr
        usage = run("myclaw usage --json", env=env, cwd=tmp_path).stdout
    finally:
        proc.terminate()
        proc.wait(10)
    import json

    assert json.loads(usage)["by_model"] == {"qwen3:14b": 0.0}


def test_the_readmes_sample_config_error_is_what_myclaw_prints(tmp_path):
    sample = README.split("A wrong key, type or level stops", 1)[1].split("```\n", 2)[1].strip()
    key, _, level = re.search(r"\[senders\] (\S+) = '(\w+)'", sample).group(1, 0, 2)
    (tmp_path / "myclaw.toml").write_text(f'[senders]\n"{key}" = "{level}"\n')
    proc = run([sys.executable, "-m", "bot", "doctor"],
               env={**base_env(tmp_path), "PYTHONPATH": str(ROOT)}, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip() == sample
