"""Signed receipts: proof that a tool call ran, with which args, for whom, approved by whom.

Every successful execution gets one row in `receipts`, signed with HMAC-SHA256 under a local key
(32 random bytes in `<data_dir>/receipt.key`, mode 0600, created on first start, or the
`MYCLAW_RECEIPT_KEY` environment variable). The signature covers every stored field including
the row id, so editing any field, or copying a row under another id, is detected by
`verify_all`. Denied, blocked and failed calls get audit rows, never receipts.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.core.errors import MyclawError
from bot.core.tool import args_hash
from bot.store.pg_dialect import next_id_sql
from bot.store.protocol import Row, Store, Transaction

if TYPE_CHECKING:
    from bot.config.settings import Config

KEY_BYTES = 32
KEY_ENV = "MYCLAW_RECEIPT_KEY"
MIN_ENV_KEY_CHARS = 16
# The order of the signed fields; changing it invalidates every stored receipt.
SIGNED_FIELDS = ("id", "session_id", "tool", "args_hash", "result_hash", "sender", "approver",
                 "started_at", "finished_at")


class ReceiptKeyError(MyclawError):
    """The receipt key is missing, unreadable or malformed."""


def load_or_create_key(path: Path) -> bytes:
    """The HMAC key at `path`, created (32 random bytes, mode 0600) if it does not exist yet.

    Creation is atomic: the bytes are written to a private temporary file which is then linked
    into place, so two processes starting at once agree on one key and nobody reads a half key.
    """
    key = read_key(path)
    if key is not None:
        return key
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, 0o600)  # os.open's mode is filtered by the umask; be exact
        os.write(fd, secrets.token_bytes(KEY_BYTES))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass  # another process won the race; use its key
    finally:
        tmp.unlink(missing_ok=True)
    key = read_key(path)
    if key is None:
        raise ReceiptKeyError(f"{path}: the receipt key vanished right after it was created")
    return key


def read_key(path: Path) -> bytes | None:
    """The key at `path`, or None when there is none yet (never creates one)."""
    try:
        key = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ReceiptKeyError(f"{path}: cannot read the receipt key: {exc.strerror}") from exc
    if len(key) != KEY_BYTES:
        raise ReceiptKeyError(f"{path}: the receipt key must be {KEY_BYTES} bytes, found {len(key)}")
    return key


def env_key(env: dict[str, str]) -> bytes | None:
    """The key from MYCLAW_RECEIPT_KEY (any string of 16+ characters), if set."""
    value = env.get(KEY_ENV, "").strip()
    if not value:
        return None
    if len(value) < MIN_ENV_KEY_CHARS:
        raise ReceiptKeyError(f"{KEY_ENV} is too short; use at least {MIN_ENV_KEY_CHARS} characters")
    return value.encode("utf-8")


def key_path(data_dir: Path) -> Path:
    return data_dir / "receipt.key"


def receipt_key(config: Config, *, create: bool = True) -> bytes | None:
    """The key the app signs with: MYCLAW_RECEIPT_KEY if set, else `<data_dir>/receipt.key`.

    With `create=False` (verification) a missing key file gives None instead of a new key, so a
    lost key is reported rather than silently replaced.
    """
    from_env = env_key(config.env)
    if from_env is not None:
        return from_env
    path = key_path(config.data_dir)
    return load_or_create_key(path) if create else read_key(path)


_INSERT_WITH_ID_SQL = ("INSERT INTO receipts(id, session_id, tool, args_hash, result_hash, sender,"
                       " approver, started_at, finished_at, signature)"
                       " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")


def _values(session_id: str, tool: str, args: dict[str, Any], result: Any, sender: str,
            approver: str | None, started_at: float, finished_at: float) -> list[Any]:
    return [session_id, tool, args_hash(args), result_hash(result), sender, approver,
            float(started_at), float(finished_at)]


def result_hash(result: Any) -> str:
    """sha256 hex of the canonical JSON of a tool result (non-JSON values by their str)."""
    canonical = json.dumps(result, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                           default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _signed_bytes(values: Sequence[Any]) -> bytes:
    # A JSON array: unambiguous field boundaries, floats round-trip through repr exactly.
    return json.dumps(list(values), separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class Receipts:
    def __init__(self, store: Store, key: bytes):
        if len(key) < MIN_ENV_KEY_CHARS:
            raise ReceiptKeyError("the receipt key is too short")
        self.store = store
        self._key = key

    def sign(self, fields: Sequence[Any]) -> str:
        return hmac.new(self._key, _signed_bytes(fields), hashlib.sha256).hexdigest()

    async def issue(self, tx: Transaction, *, session_id: str, tool: str, args: dict[str, Any],
                    result: Any, sender: str, approver: str | None, started_at: float,
                    finished_at: float) -> int:
        """Write a signed receipt inside the caller's transaction; returns its id."""
        values = _values(session_id, tool, args, result, sender, approver, started_at, finished_at)
        # The id is part of what is signed, so it is taken first (bot/store/pg_dialect.py).
        row = await tx.fetchone(next_id_sql("receipts", self.store.dialect))
        assert row is not None, "the next id is one row"
        receipt_id = int(row["id"])
        await tx.defer(_INSERT_WITH_ID_SQL, (receipt_id, *values, self.sign([receipt_id, *values])))
        return receipt_id

    async def verify_all(self) -> list[str]:
        """One line per receipt that does not verify (or id gap left by a deletion); [] if clean."""
        problems: list[str] = []
        expected_id = 1
        async for row in self._stored_rows():
            fields = [row[name] for name in SIGNED_FIELDS]
            if row["id"] > expected_id:
                problems.append(_gap_line(expected_id, row["id"] - 1))
            expected_id = row["id"] + 1
            if not _signature_matches(self.sign(fields), row["signature"]):
                problems.append(f"receipt {row['id']} ({row['tool']!r} by {row['sender']!r}): "
                                "signature does not match its fields (tampered)")
        return problems

    async def _stored_rows(self) -> AsyncIterator[dict[str, Any]]:
        """Every receipt in id order, read in pages through the store (PostgreSQL: its columns
        are typed, so a tampered value is still text or a number; SQLite: see _VERIFY_SQL)."""
        postgres = self.store.dialect == "postgresql"
        sql, decode = (_PAGE_SQL, dict) if postgres else (_VERIFY_SQL, _decode_row)
        after = 0
        while page := await self.store.fetchall(sql, (after, VERIFY_PAGE_ROWS)):
            for row in page:
                yield decode(row)
            after = page[-1]["page_key"]

    async def count(self) -> int:
        return await stored_receipts(self.store)


async def stored_receipts(store: Store) -> int:
    """How many receipts the store holds (no key needed to count them)."""
    row = await store.fetchone("SELECT COUNT(*) AS n FROM receipts")
    return int(row["n"]) if row else 0


async def latest_receipts(store: Store, limit: int) -> list[dict[str, Any]]:
    """The newest `limit` receipts' public fields, newest first."""
    rows = await store.fetchall("SELECT id, tool, sender, approver, args_hash, finished_at"
                                " FROM receipts ORDER BY id DESC LIMIT ?", (limit,))
    return [dict(row) for row in rows]


# A tampered row must be reported, not crash the check: text columns are read as hex (a byte
# that is not UTF-8 would make sqlite3 raise while fetching), numbers as numbers when they are.
_TEXT_FIELDS = ("session_id", "tool", "args_hash", "result_hash", "sender", "approver", "signature")
_VERIFY_SQL = "SELECT rowid AS page_key, " + ", ".join(
    [f"CASE WHEN {c} IS NULL THEN NULL ELSE hex(CAST({c} AS BLOB)) END AS {c}" for c in _TEXT_FIELDS]
    + [f"CASE WHEN typeof({c}) IN ('integer', 'real') THEN {c} ELSE 'x' || hex({c}) END AS {c}"
       for c in ("id", "started_at", "finished_at")]
) + " FROM receipts WHERE rowid > ? ORDER BY rowid LIMIT ?"  # rowid: a tampered id stays orderable


VERIFY_PAGE_ROWS = 1000
_PAGE_SQL = (f"SELECT id AS page_key, {', '.join(SIGNED_FIELDS)}, signature FROM receipts WHERE id > ?"
             " ORDER BY id LIMIT ?")


def _decode_row(raw: Row) -> dict[str, Any]:
    row = dict(raw)
    for name in _TEXT_FIELDS:
        if row[name] is not None:
            row[name] = bytes.fromhex(row[name]).decode("utf-8", "replace")
    return row


def _signature_matches(expected: str, stored: Any) -> bool:
    if not isinstance(stored, str):
        return False
    return hmac.compare_digest(expected.encode("ascii"), stored.encode("utf-8", "replace"))


def _gap_line(first: int, last: int) -> str:
    which = f"receipt {first} is" if first == last else f"receipts {first}-{last} are"
    return f"{which} missing (deleted?)"
