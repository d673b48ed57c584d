"""Seeded text that is not quite text, for the "any bytes in, valid text out" fuzz tests: random
bytes read the way Python reads undecodable input (lone surrogates), lone and paired
surrogates, NUL and other controls, right-to-left marks and text, combining marks, emoji — and
the checks that whatever came out is valid text.

The seed is random unless FUZZ_SEED is set; the tests put it in their failure message:
    FUZZ_SEED=<seed> .venv/bin/pytest -q tests/... -k fuzz
"""

from __future__ import annotations

import json
import os
import random
from typing import Any

PIECES = ("\x00", "\ud800", "\udfff", "\udce9", "\ud83d\ude00", "\u202e", "\u200f", "\u061c",
          "e\u0301", "\u0915\u094d\u0937", "\U0001f9d1\u200d\U0001f4bb", "שלום", "مرحبا",
          "\u0007", "\x1b[31m", "\ufeff", "\ufffd", "\u2028", "é", "a")


def fuzz_seed() -> int:
    return int(os.environ.get("FUZZ_SEED") or random.randrange(1 << 32))


def nasty_text(rng: random.Random, pieces: int = 12) -> str:
    """Random pieces, and random bytes as surrogateescape makes them; never blank."""
    parts = []
    for _ in range(pieces):
        if rng.random() < 0.3:
            raw = bytes(rng.randrange(256) for _ in range(rng.randint(1, 6)))
            parts.append(raw.decode("utf-8", "surrogateescape"))
        else:
            parts.append(rng.choice(PIECES))
    return "x \udcff " + "".join(parts)   # at least one thing to repair


def nasty_file_name(rng: random.Random) -> str:
    """A short nasty name ending in .txt, without path separators: the bot shows only a name's
    last path component, and the test looks for the repaired characters in it."""
    return nasty_text(rng, 4).replace("/", "").replace("\\", "") + ".txt"


def is_valid_text(value: str) -> bool:
    """Encodes as UTF-8 and has no NUL (what both stores and every platform accept)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in value


def invalid_strings(value: Any) -> list[str]:
    """Every string inside a JSON-like value (keys included) that is not valid text."""
    if isinstance(value, str):
        return [] if is_valid_text(value) else [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*invalid_strings(k), *invalid_strings(v))]
    if isinstance(value, list | tuple):
        return [s for v in value for s in invalid_strings(v)]
    return []


def to_wire(value: Any) -> Any:
    """`value` as a platform's JSON carries it (lone surrogates as \\uXXXX escapes) and as the
    platform's client library parses it back."""
    return json.loads(json.dumps(value))


async def stored_text_is_valid(store: Any) -> list[str]:
    """Problems in what the store holds: history and inbox rows that are not valid text."""
    problems = []
    for sql in ("SELECT content AS t FROM messages", "SELECT payload AS t FROM inbox"
                " WHERE payload IS NOT NULL", "SELECT detail AS t FROM audit"):
        for row in await store.fetchall(sql):
            if row["t"] is not None and not is_valid_text(str(row["t"])):
                problems.append(f"{sql}: {row['t']!r}")
    return problems
