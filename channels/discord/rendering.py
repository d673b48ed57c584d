"""Splitting long answers into Discord-sized messages without breaking code blocks.

Discord rejects a message over 2000 characters. A plain cut could leave a ``` fence open in one
message and a stray closing fence in the next, which renders the rest of the answer as code. So
the text is split at line boundaries (long lines are cut at a space where possible); a chunk that
ends inside a code block is closed with ``` and the next one reopens it with the same language.
"""

from __future__ import annotations

import re

DISCORD_LIMIT = 2000
_FENCE = "```"
_CLOSER = "\n" + _FENCE
# Only the language tag of an opening fence is carried over, so a reopened fence stays short.
_FENCE_LINE = re.compile(r"^\s*```([\w+#.-]{0,20})")
_MAX_REOPEN = len(_FENCE) + 20 + 1
_OVERHEAD = _MAX_REOPEN + len(_CLOSER)


def split_message(text: str, limit: int = DISCORD_LIMIT) -> list[str]:
    """Chunks of at most `limit` characters whose code fences are balanced; none is blank."""
    if limit <= _OVERHEAD * 2:
        raise ValueError(f"limit {limit} is too small to split code blocks safely")
    if len(text) <= limit and text.count(_FENCE) % 2 == 0:
        return [text] if text.strip() else []
    chunks: list[str] = []
    current = ""
    fence: str | None = None            # the opening fence of the code block `current` is in
    for piece in _pieces(text, limit - _OVERHEAD):
        after = _fence_after(piece, fence)
        reserve = len(_CLOSER) if after else 0
        if current and len(current) + len(piece) + reserve > limit:
            chunks.append(_closed(current, fence))
            current = fence + "\n" if fence else ""
        current += piece
        fence = after
    if current.strip() and current != (fence or "") + "\n":
        chunks.append(_closed(current, fence))
    return [c for c in chunks if c.strip()]


def _fence_after(line: str, fence: str | None) -> str | None:
    """The open fence after `line`, given the one open before it."""
    match = _FENCE_LINE.match(line)
    if match is None:
        return fence
    if fence is not None:
        return None                     # a fence line inside a block closes it
    return _FENCE + match.group(1)


def _closed(chunk: str, fence: str | None) -> str:
    chunk = chunk.rstrip("\n")
    return chunk + _CLOSER if fence else chunk


def _pieces(text: str, width: int) -> list[str]:
    """The lines of `text` (with their newlines), any longer than `width` cut into parts."""
    pieces: list[str] = []
    for line in text.splitlines(keepends=True):
        start = 0   # an index, not repeated slicing: a huge line is copied once, not per piece
        while len(line) - start > width:
            cut = line.rfind(" ", start + width // 2, start + width)
            cut = cut + 1 if cut > 0 else start + width
            pieces.append(line[start:cut])
            start = cut
        if start < len(line):
            pieces.append(line[start:])
    return pieces
