"""The operator's commands, through the real `myclaw` entry point (`bot.ops.cli.main`) with a config
file on disk: pair list/approve/deny, receipts verify, audit."""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from bot.access.senders import Senders
from bot.approvals.receipts import Receipts, load_or_create_key
from bot.config import settings as config_mod
from bot.ops import cli
from bot.ops.cli.safety import clean, parse_since
from bot.store.sqlite import Store
from tests.support.store_support import audit, execute

STRANGER = "telegram:4242"


@pytest.fixture
def config_file(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.delenv("MYCLAW_RECEIPT_KEY", raising=False)
    monkeypatch.delenv("MYCLAW_CONFIG", raising=False)
    path = tmp_path / "myclaw.toml"
    path.write_text(
        f'[agent]\nworkspace = "{tmp_path / "ws"}"\n'
        f'[store]\npath = "{tmp_path / "data" / "myclaw.db"}"\n'
        '[pairing]\ncode_ttl_seconds = 60\n', encoding="utf-8")
    return path


def myclaw(config_file: Path, *argv: str) -> int:
    return cli.main(["--config", str(config_file), *argv])


def with_store(config_file: Path, work: Any) -> Any:
    """Run `work(config, store)` on its own event loop, as a separate program would."""
    config = config_mod.load(str(config_file))

    async def main() -> Any:
        async with Store(config.store_path) as store:
            return await work(config, store)

    return asyncio.run(main())


def request_code(config_file: Path, sender: str = STRANGER) -> str:
    return with_store(config_file, lambda config, store: Senders(config, store).pairing_code(sender))


def autonomy(config_file: Path, sender: str = STRANGER) -> str:
    return with_store(config_file, lambda config, store: Senders(config, store).autonomy(sender))


# --- pair --------------------------------------------------------------------------------------


def test_an_unknown_sender_is_paired_from_the_command_line(config_file, capsys):
    assert autonomy(config_file) == "pairing"
    code = request_code(config_file)
    assert myclaw(config_file, "pair", "list") == 0
    listing = capsys.readouterr().out
    assert code in listing and STRANGER in listing
    assert myclaw(config_file, "pair", "approve", code, "--level", "full") == 0
    assert capsys.readouterr().out.strip() == f"Granted full to {STRANGER}."
    assert autonomy(config_file) == "full"
    assert myclaw(config_file, "pair", "list") == 0
    assert capsys.readouterr().out.strip() == "No pending pairing codes."


def test_a_wrong_code_on_the_command_line_grants_nothing(config_file, capsys):
    request_code(config_file)
    assert myclaw(config_file, "pair", "approve", "WRONGCOD", "--level", "full") == 1
    assert "unknown pairing code" in capsys.readouterr().err
    assert autonomy(config_file) == "pairing"


def test_an_expired_code_on_the_command_line_grants_nothing(config_file, capsys):
    code = request_code(config_file)

    async def age_codes(config, store):
        await execute(store, "UPDATE pairing_codes SET expires_at = ?", (time.time() - 1,))

    with_store(config_file, age_codes)
    assert myclaw(config_file, "pair", "approve", code) == 1
    assert "expired" in capsys.readouterr().err
    assert autonomy(config_file) == "pairing"


def test_a_denied_code_is_reported_and_grants_nothing(config_file, capsys):
    code = request_code(config_file)
    assert myclaw(config_file, "pair", "deny", code) == 0
    assert capsys.readouterr().out.strip() == f"Denied pairing for {STRANGER}."
    assert autonomy(config_file) == "pairing"


def test_an_unknown_level_is_a_usage_error(config_file, capsys):
    code = request_code(config_file)
    with pytest.raises(SystemExit) as exited:
        myclaw(config_file, "pair", "approve", code, "--level", "root")
    assert exited.value.code == 2
    assert autonomy(config_file) == "pairing"


def test_terminal_escapes_in_a_sender_id_are_neutralised(config_file, capsys):
    request_code(config_file, "telegram:\x1b[2J\x1b]0;pwned\x07")
    assert myclaw(config_file, "pair", "list") == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "telegram:?[2J?]0;pwned?" in out


# --- receipts verify -------------------------------------------------------------------------


def issue_receipts(config_file: Path, count: int) -> None:
    async def work(config, store):
        receipts = Receipts(store, load_or_create_key(config.data_dir / "receipt.key"))
        for n in range(count):
            async with store.transaction() as tx:
                await receipts.issue(tx, session_id="s", tool="fs_write", args={"n": n},
                                     result={"ok": n}, sender="telegram:1", approver=None,
                                     started_at=1.0, finished_at=2.0)

    with_store(config_file, work)


def test_receipts_verify_passes_on_untouched_receipts(config_file, capsys):
    issue_receipts(config_file, 3)
    assert myclaw(config_file, "receipts", "verify") == 0
    assert capsys.readouterr().out.strip() == "All 3 receipts verify."


def test_receipts_verify_fails_and_names_the_tampered_receipt(config_file, capsys):
    issue_receipts(config_file, 3)

    async def tamper(config, store):
        await execute(store, "UPDATE receipts SET tool = 'fs_delete' WHERE id = 2")

    with_store(config_file, tamper)
    assert myclaw(config_file, "receipts", "verify") == 1
    captured = capsys.readouterr()
    assert captured.out.startswith("receipt 2 ('fs_delete' by 'telegram:1')")
    assert "1 problem(s) in 3 receipts." in captured.err


def test_receipts_verify_reports_a_lost_key_instead_of_making_a_new_one(config_file, capsys):
    issue_receipts(config_file, 1)
    key = config_mod.load(str(config_file)).data_dir / "receipt.key"
    key.unlink()
    assert myclaw(config_file, "receipts", "verify") == 1
    assert "no receipt key" in capsys.readouterr().err
    assert not key.exists()


def test_receipts_verify_with_no_receipts_is_fine(config_file, capsys):
    assert myclaw(config_file, "receipts", "verify") == 0
    assert capsys.readouterr().out.strip() == "No receipts yet."


def test_receipts_verify_with_a_key_but_no_receipts_says_none_yet(config_file, capsys):
    from bot.approvals.receipts import receipt_key

    receipt_key(config_mod.load(str(config_file)))  # a run that executed nothing made the key
    assert myclaw(config_file, "receipts", "verify") == 0
    assert capsys.readouterr().out.strip() == "No receipts yet."


# --- audit -------------------------------------------------------------------------------------


def seed_audit(config_file: Path) -> None:
    async def work(config, store):
        await audit(store, sender="telegram:1", decision="allow", outcome="executed",
                                 tool="fs_read", detail="old one")
        await execute(store, "UPDATE audit SET ts = ts - 3 * 86400")
        await audit(store, sender="telegram:1", decision="ask", outcome="pending",
                                 tool="fs_write", detail="recent")
        await audit(store, sender="discord:2", decision="deny", outcome="blocked",
                                 tool="shell_run", detail="high risk at supervised autonomy")

    with_store(config_file, work)


def test_audit_lists_every_row_in_a_table(config_file, capsys):
    seed_audit(config_file)
    assert myclaw(config_file, "audit") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["TIME", "(UTC)", "SENDER", "TOOL", "DECISION", "OUTCOME", "DETAIL"]
    assert [line.split()[3] for line in lines[1:]] == ["fs_read", "fs_write", "shell_run"]


def test_audit_filters_by_sender_and_time(config_file, capsys):
    seed_audit(config_file)
    assert myclaw(config_file, "audit", "--sender", "telegram:1", "--since", "2d") == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert len(rows) == 1 and "fs_write" in rows[0] and "recent" in rows[0]
    assert myclaw(config_file, "audit", "--sender", "telegram:nobody") == 0
    assert capsys.readouterr().out.strip() == "No audit entries match."


def test_audit_rejects_a_since_it_cannot_read(config_file, capsys):
    with pytest.raises(SystemExit) as exited:
        myclaw(config_file, "audit", "--since", "last tuesday")
    assert exited.value.code == 2
    assert "neither an ISO date/time" in capsys.readouterr().err


def test_since_accepts_relative_and_iso_times():
    now = time.time()
    assert abs(parse_since("2h") - (now - 7200)) < 5
    assert abs(parse_since("3d") - (now - 3 * 86400)) < 5
    assert parse_since("2025-03-01") == 1740787200.0
    assert parse_since("2025-03-01T12:00+02:00") == 1740823200.0
    with pytest.raises(argparse.ArgumentTypeError):
        parse_since("2x")


def test_clean_keeps_one_printable_line():
    assert clean("a\nb\x1b[31m\u202e", 80) == "a b?[31m?"
    assert clean("x" * 100, 10) == "x" * 9 + "…"
