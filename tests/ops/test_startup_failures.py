"""Start-up failures are one line: every way `myclaw run` can fail before it is ready (a
workspace or store path that cannot be made, a port in use, an unreadable key file, a store of a
newer schema, a malformed token) ends with one line naming the thing and what to do, exit 2 —
and `myclaw doctor` runs the same checks and says FAIL for each, without asking any service."""

from __future__ import annotations

import asyncio
import io
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from bot.config.settings import from_dict
from bot.ops.cli.doctor import run_doctor
from tests.conftest import FAKE_ENV, make_config
from tests.support.pg_support import on_both_backends

ROOT = Path(__file__).resolve().parents[2]
backend_name = on_both_backends()


def write_config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "myclaw.toml"
    path.write_text(body)
    return path


def a_setup(tmp_path: Path, *, workspace: str = "", store: str = "", extra: str = "") -> Path:
    return write_config(tmp_path, f'[agent]\nworkspace = "{workspace or tmp_path / "ws"}"\n'
                                  f'[store]\npath = "{store or tmp_path / "data" / "m.db"}"\n'
                                  f"{extra}")


def myclaw(tmp_path: Path, config: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bot", *args], cwd=ROOT, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT),
             "ANTHROPIC_API_KEY": "sk-ant-test", "MYCLAW_CONFIG": str(config), **env})


def refused_in_one_line(done: subprocess.CompletedProcess, *words: str) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, f"exit {done.returncode}:\n{done.stderr}"
    assert "Traceback" not in done.stderr and all(w in lines[0] for w in words), lines[0]
    return lines[0]


@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    path = tmp_path / "a-file"
    path.write_text("not a directory")
    return path


@pytest.fixture
def port_in_use():
    taken = socket.socket()
    taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    yield taken.getsockname()[1]
    taken.close()


@pytest.mark.parametrize("where", ["under a file", "under /proc"])
def test_a_workspace_that_cannot_be_made_is_one_line_naming_it(tmp_path, a_file, where):
    workspace = f"{a_file}/ws" if where == "under a file" else "/proc/myclaw-test/ws"
    done = myclaw(tmp_path, a_setup(tmp_path, workspace=workspace), "run")
    line = refused_in_one_line(done, "workspace", workspace, "set [agent] workspace")
    assert line.startswith("myclaw: workspace: ")


@pytest.mark.parametrize("where", ["under a file", "under /proc"])
def test_a_store_path_that_cannot_be_made_is_one_line_naming_it(tmp_path, a_file, where):
    store = f"{a_file}/data/m.db" if where == "under a file" else "/proc/myclaw-test/m.db"
    done = myclaw(tmp_path, a_setup(tmp_path, store=store), "run")
    refused_in_one_line(done, "data directory", "set [store] path")


def test_a_port_in_use_is_one_line_naming_the_section_and_port(tmp_path, port_in_use):
    config = a_setup(tmp_path, extra=f'[health]\nenabled = true\nlisten = "127.0.0.1"\n'
                                     f"port = {port_in_use}\n")
    done = myclaw(tmp_path, config, "run")
    refused_in_one_line(done, "[health] port", str(port_in_use), "set [health] port")


def test_an_unreadable_receipt_key_is_one_line_and_the_process_ends(tmp_path):
    (tmp_path / "data" / "receipt.key").mkdir(parents=True)   # unreadable as a file, even by root
    done = myclaw(tmp_path, a_setup(tmp_path), "run")
    refused_in_one_line(done, "receipt key", "receipt.key", "MYCLAW_RECEIPT_KEY")


def test_a_malformed_bot_token_is_refused_by_run_and_failed_by_doctor_without_asking_telegram(
        tmp_path):
    config = a_setup(tmp_path)
    done = myclaw(tmp_path, config, "run", TELEGRAM_BOT_TOKEN="notatoken")
    refused_in_one_line(done, "TELEGRAM_BOT_TOKEN", "does not look like a bot token")
    doctor = myclaw(tmp_path, config, "doctor", TELEGRAM_BOT_TOKEN="notatoken")
    (line,) = [t for t in doctor.stdout.splitlines() if "TELEGRAM_BOT_TOKEN" in t]
    assert doctor.returncode == 1 and line.startswith("FAIL TELEGRAM_BOT_TOKEN: ")
    assert "does not look like a bot token" in line


def test_a_malformed_discord_token_is_refused_by_run_and_failed_by_doctor_without_asking_discord(
        tmp_path):
    token = "0123456789abcdef0123456789abcdef"   # the application's client secret, pasted
    config = a_setup(tmp_path)
    done = myclaw(tmp_path, config, "run", DISCORD_BOT_TOKEN=token)
    refused = refused_in_one_line(done, "DISCORD_BOT_TOKEN", "does not look like a bot token",
                                  "Developer Portal")
    doctor = myclaw(tmp_path, config, "doctor", DISCORD_BOT_TOKEN=token)
    (line,) = [t for t in doctor.stdout.splitlines() if "DISCORD_BOT_TOKEN" in t]
    assert doctor.returncode == 1 and line.startswith("FAIL DISCORD_BOT_TOKEN: ")
    assert "does not look like a bot token" in line and "Reset Token" in line
    assert token not in refused and token not in doctor.stdout + doctor.stderr


async def test_a_store_of_a_newer_schema_is_one_line_and_doctor_fails_it(
        tmp_path, store_backend, backend_name, _pg_schema_if_needed):
    async with store_backend.open() as store:
        await from_the_future(store, backend_name)
    try:
        store_path = (Path(store_backend.location.removeprefix("sqlite:"))
                      if backend_name == "sqlite" else tmp_path / "unused.db")
        config = a_setup(tmp_path, store=str(store_path))
        done = await asyncio.to_thread(myclaw, tmp_path, config, "run", **store_backend.env)
        refused_in_one_line(done, "schema version 999", "newer than this myclaw", "upgrade myclaw")
        out = io.StringIO()
        doctored = make_config(tmp_path, {"store": {"path": str(store_path)}},
                               env={**FAKE_ENV, **store_backend.env})
        assert await run_doctor(doctored, out=out) == 1
        assert any(t.startswith("FAIL store") and "999" in t for t in out.getvalue().splitlines())
    finally:   # the PostgreSQL schema is shared with the tests that follow
        if _pg_schema_if_needed is not None:
            import asyncpg

            schema = _pg_schema_if_needed
            conn = await asyncpg.connect(schema.url, server_settings={"search_path": schema.name})
            try:
                await conn.execute("DELETE FROM migrations WHERE number = 999")
            finally:
                await conn.close()


async def from_the_future(store, backend_name: str) -> None:
    """Mark the store as written by a myclaw that knows migration 999."""
    if backend_name == "sqlite":
        await store.fetchall("PRAGMA user_version = 999")
        return
    async with store.transaction() as tx:
        await tx.execute("INSERT INTO migrations(number, description, applied_at)"
                         " VALUES (999, 'from the future', 0)")


async def test_doctor_fails_what_run_refuses_paths_and_ports(tmp_path, a_file, port_in_use):
    config = from_dict({
        "agent": {"workspace": "/proc/myclaw-test/ws"},
        "store": {"path": f"{a_file}/data/m.db"},
        "console": {"enabled": True, "listen": "127.0.0.1", "port": port_in_use}},
        env=dict(FAKE_ENV))
    out = io.StringIO()
    assert await run_doctor(config, out=out) == 1
    failed = {t.split(":")[0] for t in out.getvalue().splitlines() if t.startswith("FAIL")}
    assert {"FAIL workspace", "FAIL data directory", "FAIL [console] port"} <= failed


def test_an_sqlite_file_of_a_newer_schema_is_not_written_to(tmp_path):
    path = tmp_path / "data" / "m.db"
    path.parent.mkdir()
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 999")
    done = myclaw(tmp_path, a_setup(tmp_path, store=str(path)), "run")
    refused_in_one_line(done, "999")
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT name FROM sqlite_master").fetchall() == []
