"""Receipts: signed on issue, verified later, any edit of a stored field reported."""

from __future__ import annotations

import os
import stat

import pytest

from bot.approvals.receipts import (
    KEY_BYTES,
    ReceiptKeyError,
    Receipts,
    load_or_create_key,
    read_key,
    receipt_key,
    result_hash,
)
from bot.store.sqlite import Store
from tests.conftest import FAKE_ENV, make_config
from tests.support.pg_support import on_both_backends
from tests.support.store_support import execute

backend_name = on_both_backends()


@pytest.fixture
def key(tmp_path) -> bytes:
    return load_or_create_key(tmp_path / "keys" / "receipt.key")


@pytest.fixture
def receipts(store: Store, key: bytes) -> Receipts:
    return Receipts(store, key)


async def issue(receipts: Receipts, tool: str = "fs_write", approver: str | None = "telegram:9") -> int:
    async with receipts.store.transaction() as tx:
        return await receipts.issue(
            tx, session_id="s1", tool=tool, args={"path": "notes/a.md", "text": "ciao"},
            result={"written": 4, "path": "notes/a.md"}, sender="telegram:1", approver=approver,
            started_at=1_700_000_000.123456789, finished_at=1_700_000_000.5)


# --- the key -------------------------------------------------------------------------------


def test_the_key_file_is_created_private_and_reused(tmp_path):
    path = tmp_path / "data" / "receipt.key"
    first = load_or_create_key(path)
    assert len(first) == KEY_BYTES
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create_key(path) == first
    assert [p.name for p in path.parent.iterdir()] == ["receipt.key"]  # no temporary left behind


def test_the_key_mode_is_exactly_0600_whatever_the_umask(tmp_path):
    old = os.umask(0o277)  # would leave 0o400 if the mode were left to os.open
    try:
        load_or_create_key(tmp_path / "receipt.key")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "receipt.key").stat().st_mode) == 0o600


def test_a_truncated_key_file_is_an_error_not_a_silent_new_key(tmp_path):
    path = tmp_path / "receipt.key"
    path.write_bytes(b"short")
    with pytest.raises(ReceiptKeyError, match="32 bytes"):
        load_or_create_key(path)
    assert path.read_bytes() == b"short"


def test_verification_never_creates_a_key(tmp_path):
    config = make_config(tmp_path)
    assert receipt_key(config, create=False) is None
    assert read_key(config.data_dir / "receipt.key") is None
    created = receipt_key(config)
    assert receipt_key(config, create=False) == created


def test_the_environment_key_wins_over_the_file_and_must_be_long_enough(tmp_path):
    config = make_config(tmp_path, env={**FAKE_ENV, "MYCLAW_RECEIPT_KEY": "a-long-enough-secret"})
    assert receipt_key(config) == b"a-long-enough-secret"
    assert not (config.data_dir / "receipt.key").exists()
    weak = make_config(tmp_path, env={**FAKE_ENV, "MYCLAW_RECEIPT_KEY": "short"})
    with pytest.raises(ReceiptKeyError, match="too short"):
        receipt_key(weak)


# --- issue and verify ------------------------------------------------------------------------


async def test_issued_receipts_verify(receipts, store):
    first, second = await issue(receipts), await issue(receipts, "shell_run", approver=None)
    assert (first, second) == (1, 2)
    assert await receipts.verify_all() == []
    row = await store.fetchone("SELECT * FROM receipts WHERE id = 1")
    assert row["result_hash"] == result_hash({"path": "notes/a.md", "written": 4})
    assert row["started_at"] == 1_700_000_000.123456789 and row["approver"] == "telegram:9"
    assert len(row["signature"]) == 64


@pytest.mark.parametrize("field", ["session_id", "tool", "args_hash", "result_hash", "sender",
                                   "approver", "signature"])
async def test_flipping_one_byte_of_a_text_field_is_reported(receipts, store, field):
    await issue(receipts)
    target = await issue(receipts)
    await issue(receipts)
    # Replace the first character with another one: exactly one byte differs.
    await execute(store,
        f"UPDATE receipts SET {field} = (CASE substr({field}, 1, 1) WHEN 'a' THEN 'b' ELSE 'a' END)"
        f" || substr({field}, 2) WHERE id = ?", (target,))
    problems = await receipts.verify_all()
    assert len(problems) == 1 and problems[0].startswith(f"receipt {target} ")
    assert "tampered" in problems[0]


@pytest.mark.parametrize("field", ["started_at", "finished_at"])
async def test_moving_a_timestamp_is_reported(receipts, store, field):
    target = await issue(receipts)
    await execute(store, f"UPDATE receipts SET {field} = {field} + 0.000001 WHERE id = ?", (target,))
    assert len(await receipts.verify_all()) == 1


async def test_bytes_that_are_not_utf8_in_a_sqlite_store_are_reported_not_a_crash(tmp_path, key):
    # SQLite stores any bytes in any column; PostgreSQL's typed columns cannot hold these.
    async with Store(tmp_path / "sqlite" / "myclaw.db") as store:
        await _tamper_with_bytes(Receipts(store, key), store)


async def _tamper_with_bytes(receipts: Receipts, store: Store) -> None:
    target = await issue(receipts)
    await execute(store, "UPDATE receipts SET sender = CAST(X'FFFE41' AS TEXT) WHERE id = ?", (target,))
    await execute(store, "UPDATE receipts SET started_at = X'FF' WHERE id = ?", (target,))
    problems = await receipts.verify_all()
    assert len(problems) == 1 and problems[0].startswith(f"receipt {target} ")


async def test_a_deleted_receipt_leaves_a_reported_gap(receipts, store):
    for _ in range(4):
        await issue(receipts)
    await execute(store, "DELETE FROM receipts WHERE id IN (2, 3)")
    assert await receipts.verify_all() == ["receipts 2-3 are missing (deleted?)"]


async def test_verification_reads_in_pages_and_still_reports_each_problem_once(
        receipts, store, monkeypatch):
    monkeypatch.setattr("bot.approvals.receipts.VERIFY_PAGE_ROWS", 2)
    for _ in range(7):
        await issue(receipts)
    await execute(store, "DELETE FROM receipts WHERE id = 3")
    await execute(store, "UPDATE receipts SET tool = 'shell_run' WHERE id = 6")
    problems = await receipts.verify_all()
    assert len(problems) == 2 and problems[0] == "receipt 3 is missing (deleted?)"
    assert problems[1].startswith("receipt 6 ") and "tampered" in problems[1]


async def test_receipts_signed_under_another_key_do_not_verify(receipts, store):
    await issue(receipts)
    impostor = Receipts(store, b"k" * 32)
    assert len(await impostor.verify_all()) == 1


async def test_a_receipt_written_inside_a_rolled_back_transaction_never_exists(receipts, store):
    class Abort(Exception):
        pass

    with pytest.raises(Abort):
        async with store.transaction() as tx:
            await receipts.issue(tx, session_id="s1", tool="fs_write", args={}, result={},
                                 sender="telegram:1", approver=None, started_at=1.0,
                                 finished_at=2.0)
            raise Abort
    assert await receipts.count() == 0
    assert await issue(receipts) == 1  # no id was burnt, so no false "missing" report
    assert await receipts.verify_all() == []
