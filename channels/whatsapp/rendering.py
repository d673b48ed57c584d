"""Model Markdown → WhatsApp's own formatting, and long replies split into messages it accepts.

WhatsApp formats `*bold*`, `_italic_`, `~strike~`, `` `code` `` and ```` ```blocks``` ````
itself; there is no markup to escape and nothing it rejects, so each part also carries the plain
text (no markers at all) that the sender falls back to when the API refuses a message.
Conversions: **x** → *x*, *x* or _x_ → _x_, ~~x~~ → ~x~, "# Title" → *Title*, "- item" →
"• item", [text](url) → "text (url)"; code (inline and fenced) is left exactly as written.

A text message holds 4,096 characters: parts break between paragraphs, else between lines,
else at a space; a code block cut in two is closed and reopened. Every pattern is linear in its
input (model output can be steered by a web page).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MESSAGE_LIMIT = 4096

_FENCE = re.compile(r"^\s*+```\s*+([\w+#.-]*+)\s*+$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s++(.*)$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(?=\S)")
_INLINE_CODE = re.compile(r"`[^`\n]+`")
_LINK = re.compile(r"\[([^\[\]\n]+)\]\(((?:https?://|mailto:)[^\s()<>]+)\)")
_BOLD = re.compile(r"\*\*(?=\S)((?:[^*\n]|\*(?!\*))+?)(?<=\S)\*\*")
_STRIKE = re.compile(r"~~(?=\S)((?:[^~\n]|~(?!~))+?)(?<=\S)~~")
_ITALIC = re.compile(r"(?<![\w*])\*(?=[^\s*])([^*\n]+?)(?<=\S)\*(?![\w*])")
_HOLE = re.compile(r"\x00(\d+)\x00")
_MARKERS = re.compile(r"(?<![\w*_~])([*_~])(?=\S)([^*_~\n]+?)(?<=\S)\1(?![\w*_~])")


@dataclass(frozen=True)
class Part:
    """One WhatsApp message: formatted text and its plain twin."""

    text: str
    plain: str


def _inline(line: str) -> tuple[str, str]:
    """One line of prose: (WhatsApp formatted, plain)."""
    holes: list[str] = []

    def hole(kept: str) -> str:
        holes.append(kept)
        return f"\x00{len(holes) - 1}\x00"

    line = line.replace("\x00", "")
    line = _INLINE_CODE.sub(lambda m: hole(m.group(0)), line)
    line = _LINK.sub(lambda m: hole(f"{m.group(1)} ({m.group(2)})"), line)
    heading = _HEADING.match(line)
    bullet = _BULLET.match(line)
    if heading is not None:
        title = heading.group(1).rstrip().rstrip("#").rstrip() or heading.group(1)
        formatted = f"*{title}*" if title.strip() else title
        plain = title
    else:
        if bullet:
            line = f"{bullet.group(1)}• {line[bullet.end():]}"
        formatted = _BOLD.sub(lambda m: f"\x01{m.group(1)}\x01", line)
        formatted = _STRIKE.sub(lambda m: f"~{m.group(1)}~", formatted)
        formatted = _ITALIC.sub(lambda m: f"_{m.group(1)}_", formatted).replace("\x01", "*")
        plain = _BOLD.sub(lambda m: m.group(1), line)
        plain = _STRIKE.sub(lambda m: m.group(1), plain)
        plain = _ITALIC.sub(lambda m: m.group(1), plain)
    def fill(text: str) -> str:
        return _HOLE.sub(lambda m: holes[int(m.group(1))], text)
    return fill(formatted), fill(plain)


def plain_of(text: str) -> str:
    """WhatsApp-formatted text without its markers (for texts written in that format)."""
    return _MARKERS.sub(lambda m: m.group(2), text)


@dataclass(frozen=True)
class _Block:
    lines: tuple[str, ...]
    code: bool = False
    language: str = ""


def _blocks(markdown: str) -> list[_Block]:
    """Paragraphs and fenced code blocks (an unclosed fence runs to the end)."""
    blocks: list[_Block] = []
    prose: list[str] = []
    code: list[str] | None = None
    language = ""

    def flush() -> None:
        if any(line.strip() for line in prose):
            blocks.append(_Block(tuple(prose)))
        prose.clear()

    for line in markdown.replace("\r\n", "\n").split("\n"):
        fence = _FENCE.match(line)
        if code is not None:
            if fence and not fence.group(1):
                blocks.append(_Block(tuple(code), True, language))
                code = None
            else:
                code.append(line)
        elif fence:
            flush()
            code, language = [], fence.group(1)
        elif not line.strip():
            flush()
        else:
            prose.append(line)
    if code is not None:
        blocks.append(_Block(tuple(code), True, language))
    flush()
    return blocks


def _hard_cut(line: str, budget: int) -> list[str]:
    """An over-long line cut at spaces when possible, else anywhere."""
    out = []
    while len(line) > budget:
        space = line.rfind(" ", 0, budget)
        cut = space + 1 if space > budget // 2 else budget
        out.append(line[:cut])
        line = line[cut:]
    out.append(line)
    return out


def _block_parts(block: _Block, limit: int) -> list[Part]:
    fence = "```"
    overhead = 2 * len(fence) + 2 if block.code else 0
    budget = max(limit - overhead, 64)
    units: list[tuple[str, str, bool]] = []   # (formatted, plain, glued to the previous)
    for raw in block.lines:
        for index, fragment in enumerate(_hard_cut(raw, budget)):
            text, plain = (fragment, fragment) if block.code else _inline(fragment)
            units.append((text[:budget], plain[:budget], index > 0))

    def wrap(body: str) -> str:
        return f"{fence}\n{body}\n{fence}" if block.code else body

    parts: list[Part] = []
    text_acc, plain_acc, size = "", "", 0
    for text, plain, glued in units:
        sep = "" if glued or not text_acc else "\n"
        if text_acc and size + len(sep) + len(text) > budget:
            parts.append(Part(wrap(text_acc), wrap(plain_acc)))
            text_acc, plain_acc, size, sep = "", "", 0, ""
        text_acc += sep + text
        plain_acc += sep + plain
        size += len(sep) + len(text)
    parts.append(Part(wrap(text_acc), wrap(plain_acc)))
    return parts


def split_message(markdown: str, limit: int = MESSAGE_LIMIT) -> list[Part]:
    """`markdown` rendered and packed into messages of at most `limit` characters each,
    breaking between paragraphs where possible."""
    parts: list[Part] = []
    text_acc: list[str] = []
    plain_acc: list[str] = []
    size = 0
    for block in _blocks(markdown):
        for piece in _block_parts(block, limit):
            cost = len(piece.text) + (2 if text_acc else 0)
            if text_acc and size + cost > limit:
                parts.append(Part("\n\n".join(text_acc), "\n\n".join(plain_acc)))
                text_acc, plain_acc, size, cost = [], [], 0, len(piece.text)
            text_acc.append(piece.text)
            plain_acc.append(piece.plain)
            size += cost
    if text_acc:
        parts.append(Part("\n\n".join(text_acc), "\n\n".join(plain_acc)))
    return parts


def chunks(text: str, limit: int) -> list[str]:
    """Plain text cut into pieces of at most `limit` characters, at line ends where possible
    (for previews, which are shown whole, never cut short)."""
    out: list[str] = []
    while len(text) > limit:
        cut = text.rfind("\n", 0, limit)
        cut = cut + 1 if cut > limit // 2 else limit
        out.append(text[:cut])
        text = text[cut:]
    if text or not out:
        out.append(text)
    return out
