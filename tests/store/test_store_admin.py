"""Operating the PostgreSQL store: `myclaw doctor` (reachable, migrated, clock skew),
`myclaw migrate`, and `myclaw store copy` round-tripping a populated SQLite store through
PostgreSQL and back with receipts that still verify (`myclaw receipts verify` on the copy)."""

from __future__ import annotations

import argparse
import io
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bot.access.senders import Senders
from bot.approvals.receipts import Receipts, receipt_key
from bot.approvals.service import Approvals
from bot.conversation.journal import Journal
from bot.core.errors import StoreError
from bot.ops.cli.doctor import LATEST_SCHEMA, run_doctor, store_checks
from bot.ops.cli.store_admin import cmd_migrate, cmd_store_copy, open_location
from bot.store.copy import count_rows, describe
from tests.conftest import FAKE_ENV, make_config
from tests.support.pg_support import PgTestSchema, database_url_for_tests
from tests.support.store_support import audit

ROOT = Path(__file__).resolve().parents[2]
ENV = {**FAKE_ENV, "MYCLAW_RECEIPT_KEY": "receipt-key-for-the-copy-tests-000"}


@pytest.fixture
async def fresh_schema(pg_schema):
    """A new, empty, unmigrated schema of its own (dropped afterwards)."""
    schema = PgTestSchema(database_url_for_tests())
    await schema.create(migrate=False)
    yield schema
    await schema.drop()


def pg_config(tmp_path: Path, schema: PgTestSchema) -> Any:
    return make_config(tmp_path, env={**ENV, "MYCLAW_DATABASE_URL": schema.store_url})


def line(lines: list[str], name: str) -> str:
    matches = [text for text in lines if text[5:].startswith(f"{name}:")]
    assert len(matches) == 1, "\n".join(lines)
    return matches[0]


async def doctor_lines(config: Any) -> tuple[int, list[str]]:
    out = io.StringIO()
    code = await run_doctor(config, out=out)
    return code, out.getvalue().splitlines()


# --- doctor and migrate --------------------------------------------------------------------

async def test_doctor_only_looks_at_an_unmigrated_database_and_migrate_applies_everything(
        tmp_path, fresh_schema, capsys):
    config = pg_config(tmp_path, fresh_schema)
    code, lines = await doctor_lines(config)
    assert code == 1
    assert line(lines, "store schema") == (f"FAIL store schema: version 0, this myclaw needs "
                                           f"{LATEST_SCHEMA}: run `myclaw migrate`")
    again = (await doctor_lines(config))[1]  # doctor migrated nothing
    assert line(again, "store schema") == line(lines, "store schema")

    assert await cmd_migrate(argparse.Namespace(), config) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("applied 1: ")
    assert printed[-1].endswith(f"schema version {LATEST_SCHEMA} ({LATEST_SCHEMA} migration(s) "
                                f"applied)")
    assert await cmd_migrate(argparse.Namespace(), config) == 0
    assert capsys.readouterr().out.endswith("(already up to date)\n")

    code, lines = await doctor_lines(config)
    assert line(lines, "store").startswith("ok   store: postgresql://postgres@127.0.0.1")
    assert line(lines, "store writable").startswith("ok")
    assert line(lines, "store clock").startswith("ok   store clock: this machine is 0.0")
    assert line(lines, "replica name").startswith("warn replica name: none set")
    assert not [text for text in lines if text.startswith("FAIL")]


async def test_doctor_is_content_with_a_replica_that_has_a_stable_name(tmp_path, pg_schema):
    config = make_config(tmp_path, {"inbox": {"replica": "replica-a"}},
                         env={**ENV, "MYCLAW_DATABASE_URL": pg_schema.store_url})
    checks = {c.name: c for c in await store_checks(config)}
    assert checks["replica name"].status == "ok" and "'replica-a'" in checks["replica name"].detail
    sqlite = {c.name for c in await store_checks(make_config(tmp_path / "lite", env=ENV))}
    assert "replica name" not in sqlite   # one process per SQLite store: nothing to name


@pytest.mark.parametrize(("offset", "status"), [(5.0, "warn"), (-120.0, "FAIL")])
async def test_doctor_reports_a_clock_that_disagrees_with_the_database_server(
        tmp_path, pg_schema, offset, status):
    checks = await store_checks(pg_config(tmp_path, pg_schema), clock=lambda: time.time() + offset)
    clock_check = next(c for c in checks if c.name == "store clock")
    assert clock_check.status == status
    assert ("ahead of" if offset > 0 else "behind") in clock_check.detail


async def test_doctor_names_an_unreachable_database_without_its_password(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = make_config(tmp_path, env={
        **ENV, "MYCLAW_DATABASE_URL": f"postgresql://bot:hunter22@127.0.0.1:{port}/myclaw"})
    code, lines = await doctor_lines(config)
    assert code == 1
    store_line = line(lines, "store")
    assert store_line.startswith("FAIL store: cannot open the store at postgresql://bot:***@")
    assert "hunter22" not in "\n".join(lines)


# --- store copy ------------------------------------------------------------------------------

async def populate(store: Any, config: Any) -> None:
    """A store as a month of use leaves it: every kind of row, through the domain code."""
    journal = Journal(store)
    receipts = Receipts(store, receipt_key(config))
    approvals = Approvals(store, approvers=["telegram:99"])
    senders = Senders(config, store)
    for chat in range(3):
        session = await journal.new_session(f"telegram:{chat}", str(chat), "telegram")
        async with store.transaction() as tx:
            await journal.append(tx, session, [
                {"role": "user", "content": [{"type": "text", "text": f"hello {chat} ✓"}]},
                {"role": "assistant", "content": [{"type": "text", "text": "hi"}]}])
            for n in range(2):
                await receipts.issue(tx, session_id=session, tool="fs_write",
                                     args={"path": f"n{n}.md"}, result={"written": n},
                                     sender=f"telegram:{chat}", approver="telegram:99",
                                     started_at=1_700_000_000.123456789 + n, finished_at=1.7e9 + n)
            await tx.execute(
                "INSERT INTO usage(ts, session_id, sender, model, input_tokens, output_tokens,"
                " cache_read_tokens, cache_write_tokens) VALUES (?, ?, ?, 'm', 10, 5, 0, 0)",
                (1_700_000_000.5, session, f"telegram:{chat}"))
            await tx.execute("INSERT INTO memories(sender, text, created_at) VALUES (?, ?, ?)",
                             (f"telegram:{chat}", f"the blue bicycle number {chat}", 1.5))
        request = await approvals.create(
            session_id=session, sender=f"telegram:{chat}", chat=str(chat), channel="telegram",
            tool="shell_run", tool_use_id=f"toolu_{chat}", args={"command": "ls"}, risk="high",
            summary="Run ls")
        if chat == 0:
            await approvals.resolve(request.id, "telegram:99", "approve")
    await audit(store, sender="telegram:1", decision="allow", outcome="ok", tool="fs_write")
    code = await senders.pairing_code("telegram:555")
    await senders.approve(code, "supervised")
    await senders.pairing_code("discord:777")


async def contents(store: Any) -> dict[str, list[tuple]]:
    """Every copied table's rows with the columns both backends have, in key order."""
    tables = await describe(store)
    out = {}
    for name, table in tables.items():
        if name in ("migrations", "id_counters"):
            continue
        columns = [c for c in table.columns if c != "search"]
        rows = await store.fetchall(f"SELECT {', '.join(columns)} FROM {name}"
                                    f" ORDER BY {', '.join(table.key or columns)}")
        out[name] = [tuple(r) for r in rows]
    return out


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bot", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**env, "PYTHONPATH": str(ROOT)})


async def test_a_populated_store_round_trips_sqlite_to_postgresql_and_back_with_valid_receipts(
        tmp_path, fresh_schema, capsys):
    config = make_config(tmp_path, env=ENV)
    original_path, back_path = config.store_path, tmp_path / "back" / "myclaw.db"
    async with open_location(f"sqlite:{original_path}") as original:
        await populate(original, config)
        before = await contents(original)
    assert all(before[t] for t in ("sessions", "messages", "approvals", "receipts", "audit",
                                   "memories", "pairing_codes", "granted_senders", "usage"))

    to_pg = argparse.Namespace(source=f"sqlite:{original_path}", destination=fresh_schema.store_url)
    assert await cmd_store_copy(to_pg, config) == 0
    assert "copied " in capsys.readouterr().out
    async with fresh_schema.store() as copy:
        assert await contents(copy) == before
        assert await Receipts(copy, receipt_key(config)).verify_all() == []
        # New rows continue after the copied ids, and receipts keep verifying.
        async with copy.transaction() as tx:
            assert await Receipts(copy, receipt_key(config)).issue(
                tx, session_id="s", tool="t", args={}, result={}, sender="cli:local",
                approver=None, started_at=1.0, finished_at=2.0) == len(before["receipts"]) + 1
            row = await tx.fetchone("INSERT INTO memories(sender, text, created_at)"
                                    " VALUES ('cli:local', 'later', 3) RETURNING id")
            assert row["id"] == len(before["memories"]) + 1
            await tx.execute("DELETE FROM memories WHERE id = ?", (row["id"],))
        assert await Receipts(copy, receipt_key(config)).verify_all() == []
        search = await copy.fetchall("SELECT text FROM memories WHERE search @@ to_tsquery('simple',"
                                     " 'bicycle') AND sender = 'telegram:2'")
        assert [r["text"] for r in search] == ["the blue bicycle number 2"]

    verified = run_cli("receipts", "verify", env={**ENV, "HOME": str(tmp_path),
                                                  "MYCLAW_DATABASE_URL": fresh_schema.store_url})
    assert verified.returncode == 0, verified.stderr
    assert f"{len(before['receipts']) + 1} receipts" in verified.stdout

    back = argparse.Namespace(source=fresh_schema.store_url, destination=f"sqlite:{back_path}")
    assert await cmd_store_copy(back, config) == 0
    async with open_location(f"sqlite:{back_path}") as returned:
        after = await contents(returned)
        assert after["receipts"][:-1] == before["receipts"]
        assert {t: rows for t, rows in after.items() if t != "receipts"} == {
            t: rows for t, rows in before.items() if t != "receipts"}
        assert await Receipts(returned, receipt_key(config)).verify_all() == []
        hits = await returned.fetchall("SELECT rowid FROM memories_fts WHERE memories_fts MATCH"
                                       " 'bicycle'")  # the FTS5 index was rebuilt by its triggers
        assert len(hits) == 3


async def test_copying_into_a_store_that_holds_data_is_refused_and_changes_nothing(
        tmp_path, fresh_schema):
    config = make_config(tmp_path, env=ENV)
    async with open_location(f"sqlite:{config.store_path}") as source:
        await populate(source, config)
    async with fresh_schema.store() as destination:
        await audit(destination, sender="cli:local", decision="allow", outcome="ok")
    with pytest.raises(StoreError, match="destination is not empty"):
        await cmd_store_copy(argparse.Namespace(source=f"sqlite:{config.store_path}",
                                                destination=fresh_schema.store_url), config)
    async with fresh_schema.store() as destination:
        assert await count_rows(destination, "audit") == 1
        assert await count_rows(destination, "sessions") == 0


async def test_a_missing_sqlite_source_is_refused_rather_than_created_empty(tmp_path, fresh_schema):
    missing = tmp_path / "nowhere" / "myclaw.db"
    with pytest.raises(StoreError, match="no such store"):
        await cmd_store_copy(argparse.Namespace(source=f"sqlite:{missing}",
                                                destination=fresh_schema.store_url),
                             make_config(tmp_path, env=ENV))
    assert not missing.exists()


@pytest.mark.parametrize("location", ["mysql://db/x", "sqlite:", "env:NOT_SET_ANYWHERE"])
def test_a_location_that_is_not_a_store_is_a_clear_error(location):
    with pytest.raises(StoreError, match=r"sqlite|NOT_SET_ANYWHERE"):
        open_location(location, env={})


def test_env_location_reads_the_url_from_the_environment_so_it_stays_off_the_command_line():
    store = open_location("env:TARGET_DB", env={"TARGET_DB": "postgresql://u:pw1234@db/x"})
    assert store.dialect == "postgresql" and "pw1234" not in store.location
    assert os.environ.get("TARGET_DB") is None
