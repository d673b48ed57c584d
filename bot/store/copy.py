"""Copy a whole store into an empty one, across backends (SQLite ⇄ PostgreSQL).

Every table both stores have is copied with the columns both have, rows verbatim, ids kept:
history, sessions, approvals, receipts (their signatures cover the id and the fields, so they
still verify with the same receipt key), audit, pairings and grants, memories, undo log, usage.
What one backend derives by itself is not copied but rebuilt by the destination: SQLite's FTS5
index (its triggers fill it) and PostgreSQL's tsvector column (generated).

The destination is written in one transaction: a copy that fails half-way leaves it empty. It
must be empty to begin with (nothing is merged or overwritten), and both stores are migrated to
this version of myclaw first, so their schemas agree.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from bot.core.errors import StoreError
from bot.store.pg_dialect import GAPLESS_IDS, reseed_id_sql

BATCH_ROWS = 1000
# Tables other tables reference (messages.session_id → sessions.id): copied first.
PARENT_TABLES = ("sessions",)
# Each store's own bookkeeping: its migrations, and PostgreSQL's id counters (reseeded instead).
NOT_COPIED = ("migrations", "id_counters")
# SQLite-internal and FTS5 tables: derived, rebuilt by the destination's own triggers.
_DERIVED_PREFIXES = ("sqlite_", "memories_fts")


class StoreCopyError(StoreError):
    pass


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[str, ...]  # insertable columns (generated ones left out)
    key: tuple[str, ...]      # primary key, the order rows are read in
    identity: str | None = None  # PostgreSQL: the identity column to restart after the copy


@dataclass(frozen=True)
class Copied:
    table: str
    rows: int


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


async def describe(store: Any) -> dict[str, Table]:
    """The store's tables, by name."""
    if store.dialect == "postgresql":
        return await _describe_postgres(store)
    return await _describe_sqlite(store)


async def _describe_sqlite(store: Any) -> dict[str, Table]:
    tables = {}
    for row in await store.fetchall("SELECT name FROM sqlite_master WHERE type = 'table'"):
        name = row["name"]
        if name.startswith(_DERIVED_PREFIXES):
            continue
        info = await store.fetchall(f"PRAGMA table_info({_quote(name)})")
        key = tuple(r["name"] for r in sorted(info, key=lambda r: r["pk"]) if r["pk"])
        tables[name] = Table(name, tuple(r["name"] for r in info), key)
    return tables


_PG_COLUMNS = """
SELECT table_name, column_name, is_generated, is_identity FROM information_schema.columns
WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position
"""
_PG_KEYS = """
SELECT k.table_name, k.column_name FROM information_schema.table_constraints AS c
JOIN information_schema.key_column_usage AS k
  ON k.constraint_name = c.constraint_name AND k.table_schema = c.table_schema
WHERE c.constraint_type = 'PRIMARY KEY' AND c.table_schema = current_schema()
ORDER BY k.table_name, k.ordinal_position
"""


async def _describe_postgres(store: Any) -> dict[str, Table]:
    columns: dict[str, list[str]] = {}
    identity: dict[str, str] = {}
    for row in await store.fetchall(_PG_COLUMNS):
        if row["is_generated"] == "NEVER":
            columns.setdefault(row["table_name"], []).append(row["column_name"])
        if row["is_identity"] == "YES":
            identity[row["table_name"]] = row["column_name"]
    keys: dict[str, list[str]] = {}
    for row in await store.fetchall(_PG_KEYS):
        keys.setdefault(row["table_name"], []).append(row["column_name"])
    return {name: Table(name, tuple(cols), tuple(keys.get(name, cols)), identity.get(name))
            for name, cols in columns.items()}


async def count_rows(store: Any, table: str) -> int:
    row = await store.fetchone(f"SELECT count(*) AS n FROM {_quote(table)}")
    return int(row["n"])


async def _plan(source: Any, destination: Any) -> list[tuple[Table, Table]]:
    src, dst = await describe(source), await describe(destination)
    lost = sorted(set(src) - set(dst) - set(NOT_COPIED))
    if lost:
        raise StoreCopyError(f"the destination has no table {', '.join(lost)}: "
                             f"both stores must be migrated by the same myclaw version")
    names = [n for n in src if n not in NOT_COPIED]
    ordered = [n for n in PARENT_TABLES if n in names] + sorted(set(names) - set(PARENT_TABLES))
    for name in ordered:
        if await count_rows(destination, name):
            raise StoreCopyError(f"the destination is not empty (table {name} has rows); "
                                 f"copy into a new database")
    return [(src[n], dst[n]) for n in ordered]


async def _batches(store: Any, table: Table, columns: list[str]) -> AsyncIterator[list[tuple]]:
    select = (f"SELECT {', '.join(_quote(c) for c in columns)} FROM {_quote(table.name)}"
              f" ORDER BY {', '.join(_quote(c) for c in table.key or columns)} LIMIT ? OFFSET ?")
    offset = 0
    while True:
        rows = await store.fetchall(select, (BATCH_ROWS, offset))
        if not rows:
            return
        yield [tuple(r) for r in rows]
        offset += len(rows)


async def copy_store(source: Any, destination: Any) -> list[Copied]:
    """Copy every row of `source` into the empty `destination` (both open); per-table counts."""
    plan = await _plan(source, destination)
    copied: list[Copied] = []
    async with destination.transaction() as tx:
        for src, dst in plan:
            columns = [c for c in src.columns if c in dst.columns]
            insert = (f"INSERT INTO {_quote(src.name)}({', '.join(_quote(c) for c in columns)})"
                      f" VALUES ({', '.join('?' for _ in columns)})")
            rows = 0
            async for batch in _batches(source, src, columns):
                try:
                    await tx.executemany(insert, batch)
                except Exception as exc:  # the driver's own error types: name the table
                    raise StoreCopyError(f"copying table {src.name} failed: "
                                         f"{type(exc).__name__}: {exc}") from exc
                rows += len(batch)
            if dst.identity:  # ids were given explicitly: new rows must continue after them
                await tx.fetchall(
                    f"SELECT setval(pg_get_serial_sequence(?, ?),"
                    f" coalesce(max({_quote(dst.identity)}), 0) + 1, false) FROM {_quote(dst.name)}",
                    (_quote(dst.name), dst.identity))
            copied.append(Copied(src.name, rows))
        if destination.dialect == "postgresql":
            for table in GAPLESS_IDS:
                await tx.execute(reseed_id_sql(table))
    for entry in copied:
        if await count_rows(destination, entry.table) != entry.rows:
            raise StoreCopyError(f"table {entry.table}: {entry.rows} rows read but "
                                 f"{await count_rows(destination, entry.table)} in the destination")
    return copied
