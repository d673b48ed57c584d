"""Model Markdown → Telegram HTML, and splitting long replies into messages Telegram accepts.

Telegram's HTML mode knows a handful of tags (b, i, s, code, pre, a) and rejects anything else,
so the model's Markdown is converted and every other character is escaped (&, <, >). Inline
formatting is matched inside one line only and the tags produced are always well nested, so a
part cut at a line boundary is still valid HTML. Whatever Telegram still refuses is resent as
plain text by the caller, using the `plain` twin of each part.

Lengths are counted in UTF-16 code units, which is how Telegram counts its 4096 limit.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

MESSAGE_LIMIT = 4096

# Every pattern here runs over model output (which a web page can steer), so each is linear:
# possessive quantifiers where two runs of the same class would meet, content classes that stop
# at the next opener, and no lazy scan that can cross an opener. "# x", 5,000 spaces, "y",
# 5,000 spaces, "!" took the old heading pattern minutes; tests/support/looplag.py has the other shapes.
_FENCE = re.compile(r"^\s*+```\s*+([\w+#.-]*+)\s*+$")
_HEADING_START = re.compile(r"^\s{0,3}#{1,6}\s+")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(?=\S)")
_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\[([^\[\]\n]+)\]\(((?:https?://|tg://|mailto:)[^\s()<>]+)\)")
# Only ** makes bold: __x__ is left alone so Python dunders (__init__) survive. The content of
# bold and strike cannot contain their own delimiter pair.
_BOLD = re.compile(r"\*\*(?=\S)((?:[^<>*]|\*(?!\*))+?)(?<=\S)\*\*")
_STRIKE = re.compile(r"~~(?=\S)((?:[^<>~]|~(?!~))+?)(?<=\S)~~")
_ITALIC = re.compile(r"(?<![\w*])\*(?=[^\s*])([^<>*]+?)(?<=\S)\*(?![\w*])"
                     r"|(?<![\w_])_(?=[^\s_])([^<>_]+?)(?<=\S)_(?![\w_])")
# Placeholders for already-rendered inline code and links; \x00 is removed from input first,
# so the text cannot forge one.
_HOLE = re.compile(r"\x00(\d+)\x00")


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def escape(text: str) -> str:
    """Escape text for Telegram HTML (the three characters its parser cares about)."""
    return html.escape(text, quote=False)


@dataclass(frozen=True)
class Part:
    """One Telegram message: the HTML to send and the plain text to fall back to."""

    html: str
    plain: str


@dataclass(frozen=True)
class _Block:
    lines: tuple[str, ...]
    code: bool = False
    language: str = ""


# --- inline -----------------------------------------------------------------------------------


def _inline(line: str) -> str:
    holes: list[str] = []

    def hole(rendered: str) -> str:
        holes.append(rendered)
        return f"\x00{len(holes) - 1}\x00"

    line = line.replace("\x00", "").replace("\x01", "").replace("\x02", "")
    line = _INLINE_CODE.sub(lambda m: hole(f"<code>{escape(m.group(1))}</code>"), line)
    line = _LINK.sub(lambda m: hole(f'<a href="{html.escape(m.group(2), quote=True)}">'
                                    f"{escape(m.group(1))}</a>"), line)
    heading = _heading(line)
    bullet = _BULLET.match(line)
    if heading is not None:
        line = f"\x01{heading}\x02"
    elif bullet:
        line = f"{bullet.group(1)}• {line[bullet.end():]}"
    out = escape(line)
    out = _BOLD.sub(lambda m: f"<b>{m.group(1)}</b>", out)
    out = _STRIKE.sub(lambda m: f"<s>{m.group(1)}</s>", out)
    out = _ITALIC.sub(lambda m: f"<i>{m.group(1) or m.group(2)}</i>", out)
    out = out.replace("\x01", "<b>").replace("\x02", "</b>")
    return _HOLE.sub(lambda m: holes[int(m.group(1))], out)


def _heading(line: str) -> str | None:
    """The text of an ATX heading ("## Title ##" -> "Title"), or None; in linear time."""
    start = _HEADING_START.match(line)
    if start is None:
        return None
    rest = line[start.end():]
    text = rest.rstrip().rstrip("#").rstrip()
    return text or rest[:1] or None


def _code_html(body_html: str, language: str) -> str:
    if language:
        return f'<pre><code class="language-{escape(language)}">{body_html}</code></pre>'
    return f"<pre>{body_html}</pre>"


def _code_plain(body: str, language: str) -> str:
    return f"```{language}\n{body}\n```"


# --- blocks -----------------------------------------------------------------------------------


def _blocks(markdown: str) -> list[_Block]:
    """Cut the text into paragraphs and fenced code blocks (an unclosed fence runs to the end)."""
    blocks: list[_Block] = []
    text_lines: list[str] = []
    code_lines: list[str] | None = None
    language = ""

    def flush_text() -> None:
        if any(line.strip() for line in text_lines):
            blocks.append(_Block(tuple(text_lines)))
        text_lines.clear()

    for line in markdown.replace("\r\n", "\n").split("\n"):
        fence = _FENCE.match(line)
        if code_lines is not None:
            if fence and not fence.group(1):
                blocks.append(_Block(tuple(code_lines), code=True, language=language))
                code_lines = None
            else:
                code_lines.append(line)
        elif fence:
            flush_text()
            code_lines, language = [], fence.group(1)
        elif not line.strip():
            flush_text()
        else:
            text_lines.append(line)
    if code_lines is not None:
        blocks.append(_Block(tuple(code_lines), code=True, language=language))
    flush_text()
    return blocks


def to_html(markdown: str) -> str:
    """The whole text as one Telegram HTML string (no length limit applied)."""
    return "\n\n".join(part.html for part in _pieces(markdown, limit=None))


# --- splitting --------------------------------------------------------------------------------


def _fit(text: str, start: int, budget: int) -> int:
    """An end such that text[start:end] is at most `budget` UTF-16 units (and, for a budget of
    two or more, longer than nothing); a few encodings of one slice, not one per character."""
    end = min(len(text), start + budget)
    while (excess := utf16_len(text[start:end]) - budget) > 0:
        end -= max(excess // 2, 1)   # each character is one or two units
    return end


def _hard_cut(line: str, budget: int) -> list[str]:
    """Cut one over-long line at spaces when possible, else anywhere."""
    out: list[str] = []
    start = 0
    while utf16_len(line[start:start + 2 * budget]) > budget:
        cut = _fit(line, start, budget)
        space = line.rfind(" ", start, cut)
        cut = space + 1 if space - start > budget // 2 else max(cut, start + 1)
        out.append(line[start:cut])
        start = cut
    out.append(line[start:])
    return out


@dataclass(frozen=True)
class _Unit:
    """One line (or a fragment of an over-long one) of a block, rendered and raw."""

    html: str
    plain: str
    continues: bool = False   # a fragment glued to the previous one, no newline between


def _units(block: _Block, budget: int) -> list[_Unit]:
    units: list[_Unit] = []
    for raw in block.lines:
        rendered = escape(raw) if block.code else _inline(raw)
        if utf16_len(rendered) <= budget:
            units.append(_Unit(rendered, raw))
            continue
        # Escaping may grow a fragment up to five times (& -> &amp;); cut small enough.
        for index, fragment in enumerate(_hard_cut(raw, max(budget // 5, 1))):
            html_fragment = escape(fragment) if block.code else _inline(fragment)
            units.append(_Unit(html_fragment, fragment, continues=index > 0))
    return units


def _block_pieces(block: _Block, limit: int) -> list[Part]:
    """A block cut at line boundaries; a code block is closed and reopened in every piece."""
    def wrap_html(body: str) -> str:
        return _code_html(body, block.language) if block.code else body

    def wrap_plain(body: str) -> str:
        return _code_plain(body, block.language) if block.code else body

    overhead = utf16_len(_code_html("", block.language)) if block.code else 0
    budget = max(limit - overhead, 64)
    pieces: list[Part] = []
    html_acc, plain_acc = "", ""
    size = 0
    for unit in _units(block, budget):
        sep = "" if unit.continues or not html_acc else "\n"
        cost = utf16_len(unit.html) + len(sep)
        if html_acc and size + cost > budget:
            pieces.append(Part(wrap_html(html_acc), wrap_plain(plain_acc)))
            html_acc, plain_acc, size, sep = "", "", 0, ""
        html_acc += sep + unit.html
        plain_acc += sep + unit.plain
        size += cost
    pieces.append(Part(wrap_html(html_acc), wrap_plain(plain_acc)))
    return pieces


def _pieces(markdown: str, limit: int | None) -> list[Part]:
    big = limit if limit is not None else 1 << 30
    return [piece for block in _blocks(markdown) for piece in _block_pieces(block, big)]


def split_message(markdown: str, limit: int = MESSAGE_LIMIT) -> list[Part]:
    """Render `markdown` and pack it into messages of at most `limit` UTF-16 units each.

    Parts break between paragraphs when they can, else between lines; a code block that does not
    fit is closed at the end of one part and reopened at the start of the next.
    """
    parts: list[Part] = []
    html_acc: list[str] = []
    plain_acc: list[str] = []
    size = 0
    for piece in _pieces(markdown, limit):
        cost = utf16_len(piece.html) + 2
        if html_acc and size + cost > limit:
            parts.append(Part("\n\n".join(html_acc), "\n\n".join(plain_acc)))
            html_acc, plain_acc, size = [], [], 0
        html_acc.append(piece.html)
        plain_acc.append(piece.plain)
        size += cost
    if html_acc:
        parts.append(Part("\n\n".join(html_acc), "\n\n".join(plain_acc)))
    return parts


def truncate(text: str, limit: int, marker: str = "…") -> str:
    """Cut plain text to `limit` UTF-16 units (used while a reply is still streaming)."""
    if utf16_len(text[:limit + 1]) <= limit and len(text) <= limit:
        return text
    return text[:_fit(text, 0, limit - utf16_len(marker))] + marker
