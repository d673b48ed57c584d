"""Each table has one owner module that holds its SQL; everything else asks the owner.

The store's own modules (backends, dialect, migrations, copy, invalidation) work on every table
and may name any. Anywhere else in bot/, channels/ and tools/, a string that is an SQL statement
may only name the tables its module owns.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STORE_PACKAGE = "bot/store/"
TABLE_OWNERS = {
    "approvals": "bot/approvals/service.py",
    "approval_messages": "bot/approvals/service.py",
    "grants": "bot/approvals/grants.py",
    "receipts": "bot/approvals/receipts.py",
    "undo_log": "bot/approvals/undo.py",
    "granted_senders": "bot/access/senders.py",
    "pairing_codes": "bot/access/senders.py",
    "rate_buckets": "bot/access/ratelimit.py",
    "sender_settings": "bot/access/preferences.py",
    "attachments": "bot/media/attachments.py",
    "inbox_files": "bot/media/received.py",
    "messages": "bot/conversation/journal.py",
    "sessions": "bot/conversation/journal.py",
    "memories": "bot/conversation/memory.py",
    "memories_fts": "bot/conversation/memory.py",
    "inbox": "bot/conversation/inbox.py",
    "turns": "bot/conversation/turns.py",
    "held_messages": "bot/conversation/outbound.py",
    "whatsapp_sent": "bot/conversation/outbound.py",
    "jobs": "bot/jobs/jobs.py",
    "job_runs": "bot/jobs/jobs.py",
    "usage": "bot/money/spend.py",
    "tool_quota": "bot/money/quota.py",
    "console_logins": "bot/ops/console/auth.py",
    "console_sessions": "bot/ops/console/auth.py",
    "audit": "bot/store/audit.py",
    "notices_sent": "bot/store/notices.py",
    "session_auto_approve": "bot/store/migrations.py",  # superseded by grants; nothing reads it
    "doctor_write_probe": "bot/ops/cli/doctor.py",   # a scratch table the doctor's write check drops
}
# Statements are written in capitals here, which keeps prose ("Select a file from...") out.
STATEMENT = re.compile(r"^\s*\(?\s*(SELECT|INSERT|UPDATE|DELETE|WITH|CREATE|DROP|ALTER|REPLACE)\s")
NAMED_TABLE = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\s+([A-Za-z_][A-Za-z0-9_]*)",
                         re.IGNORECASE)
NOT_A_TABLE = {"set", "select", "values", "exists", "if", "only", "lateral"}


def statements(source: str) -> list[str]:
    """The string literals (f-strings with their holes filled) that are SQL statements."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        elif isinstance(node, ast.JoinedStr):
            text = "".join(part.value if isinstance(part, ast.Constant) else " x "
                           for part in node.values)
        else:
            continue
        if STATEMENT.match(text):
            found.append(text)
    return found


def tables_named(sql: str) -> set[str]:
    return {name.lower() for name in NAMED_TABLE.findall(sql)} - NOT_A_TABLE


def trespasses(root: Path) -> list[str]:
    """'module: table' for each table a module names without owning it."""
    found = []
    for package in ("bot", "channels", "tools"):
        for path in sorted((root / package).rglob("*.py")):
            module = path.relative_to(root).as_posix()
            if module.startswith(STORE_PACKAGE):
                continue
            for sql in statements(path.read_text(encoding="utf-8")):
                found += [f"{module}: {table}" for table in sorted(tables_named(sql))
                          if TABLE_OWNERS.get(table) != module]
    return sorted(set(found))


def test_no_module_outside_the_store_writes_sql_for_a_table_it_does_not_own():
    assert trespasses(ROOT) == []


def test_every_table_the_migrations_create_has_an_owner():
    from bot.store.migrations import MIGRATIONS

    created = {name.lower() for _, _, script in MIGRATIONS
               for name in re.findall(r"CREATE (?:VIRTUAL )?TABLE (?:IF NOT EXISTS )?(\w+)", script)}
    assert created - {"migrations"} - set(TABLE_OWNERS) == set()


def test_a_console_page_reading_a_table_itself_is_found(tmp_path):
    page = tmp_path / "bot" / "ops" / "console" / "pages" / "spend.py"
    page.parent.mkdir(parents=True)
    page.write_text('ROWS = "SELECT * FROM usage u JOIN receipts r ON r.id = u.id"\n'
                    'TOLD = f"UPDATE {\'x\'} SET a = 1"\n'
                    'PROSE = "Select a file from the list"\n')
    (tmp_path / "channels").mkdir()
    (tmp_path / "tools").mkdir()
    assert trespasses(tmp_path) == ["bot/ops/console/pages/spend.py: receipts",
                                    "bot/ops/console/pages/spend.py: usage",
                                    "bot/ops/console/pages/spend.py: x"]
