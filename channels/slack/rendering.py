"""Model Markdown → Slack mrkdwn, and splitting long replies into messages Slack shows whole.

Slack's mrkdwn is not Markdown: bold is `*x*`, italic `_x_`, strike `~x~`, links `<url|text>`,
no headings, and `&`, `<`, `>` must always be escaped (an unescaped `<` could otherwise form a
link or a mention such as `<!channel>`). Code spans and fenced blocks are kept (their contents
escaped, never formatted). Each part has a plain twin (the Markdown as written, escaped) that the
sender falls back to when Slack refuses the formatted one, so a reply is never dropped.

Every pattern runs over model output (which a web page can steer), so each is linear: content
classes that stop at the next opener, no nested quantifiers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Slack shows up to about 4,000 characters of a message before "Show more"; a part stays below,
# with room for the code fence a split reopens.
MESSAGE_LIMIT = 3900
SECTION_LIMIT = 3000    # a section block's text, a rich_text element's text (Block Kit)

_FENCE = re.compile(r"^\s*+```\s*+([\w+#.-]*+)\s*+$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(\S.*)$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(?=\S)")
_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\[([^\[\]\n]+)\]\(((?:https?://|mailto:)[^\s()<>|]+)\)")
_BOLD = re.compile(r"\*\*(?=\S)([^*\n]+?)(?<=\S)\*\*")
_STRIKE = re.compile(r"~~(?=\S)([^~\n]+?)(?<=\S)~~")
_ITALIC = re.compile(r"(?<![\w*])\*(?=[^\s*])([^*\n]+?)(?<=\S)\*(?![\w*])")
_HOLE = re.compile(r"\x00(\d+)\x00")
_BOLD_MARK = "\x01"


def escape(text: str) -> str:
    """The three characters Slack's message parser gives a meaning to."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


@dataclass(frozen=True)
class Part:
    """One Slack message: the mrkdwn to send and the plain text to fall back to."""

    mrkdwn: str
    plain: str


def plain(text: str) -> Part:
    """A line that is not Markdown (a status line, an error): the same text both ways."""
    escaped = escape(text)
    return Part(escaped, escaped)


def _inline(line: str) -> str:
    holes: list[str] = []

    def hole(rendered: str) -> str:
        holes.append(rendered)
        return f"\x00{len(holes) - 1}\x00"

    line = line.replace("\x00", "").replace(_BOLD_MARK, "")
    line = _INLINE_CODE.sub(lambda m: hole(f"`{escape(m.group(1))}`"), line)
    line = _LINK.sub(lambda m: hole(f"<{escape(m.group(2))}|{escape(m.group(1))}>"), line)
    heading = _HEADING.match(line)
    if heading is not None:
        line = f"**{heading.group(1).strip()}**"
    line = escape(line)
    line = _BULLET.sub(lambda m: f"{m.group(1)}• ", line, count=1)
    line = _BOLD.sub(lambda m: f"{_BOLD_MARK}{m.group(1)}{_BOLD_MARK}", line)
    line = _STRIKE.sub(lambda m: f"~{m.group(1)}~", line)
    line = _ITALIC.sub(lambda m: f"_{m.group(1)}_", line)
    line = line.replace(_BOLD_MARK, "*")
    return _HOLE.sub(lambda m: holes[int(m.group(1))], line)


def to_mrkdwn(markdown: str) -> str:
    """The whole text converted (no splitting)."""
    out: list[str] = []
    in_code = False
    for line in markdown.split("\n"):
        if _FENCE.match(line):
            in_code = not in_code
            out.append("```")
        elif in_code:
            out.append(escape(line))
        else:
            out.append(_inline(line))
    if in_code:
        out.append("```")
    return "\n".join(out)


def _chunks(lines: list[str], limit: int) -> list[list[str]]:
    """Lines grouped so each group joined by newlines is at most `limit` characters; a longer
    line is cut into pieces of `limit`."""
    groups: list[list[str]] = [[]]
    size = 0
    for line in lines:
        pieces = [line[i:i + limit] for i in range(0, len(line), limit)] or [""]
        for piece in pieces:
            extra = len(piece) + (1 if groups[-1] else 0)
            if groups[-1] and size + extra > limit:
                groups.append([])
                size, extra = 0, len(piece)
            groups[-1].append(piece)
            size += extra
    return [g for g in groups if any(s.strip() for s in g)]


def split_message(markdown: str, limit: int = MESSAGE_LIMIT) -> list[Part]:
    """The reply as messages: split at line boundaries (a fenced block cut in two is closed and
    reopened), each converted on its own and paired with its plain twin."""
    parts: list[Part] = []
    reopen = False
    for group in _chunks(markdown.split("\n"), limit - 8):
        fences = sum(1 for line in group if _FENCE.match(line))
        lines = (["```"] if reopen else []) + group
        ends_open = (fences % 2 == 1) != reopen
        if ends_open:
            lines.append("```")
        text = "\n".join(lines)
        parts.append(Part(to_mrkdwn(text), escape(text)))
        reopen = ends_open
    return parts


def cut(text: str, limit: int) -> list[str]:
    """`text` in consecutive pieces of at most `limit` characters (nothing dropped), cut at a
    newline where one is near the end of a piece."""
    pieces: list[str] = []
    rest = text
    while len(rest) > limit:
        at = rest.rfind("\n", limit // 2, limit)
        at = limit if at < 0 else at + 1
        pieces.append(rest[:at])
        rest = rest[at:]
    if rest or not pieces:
        pieces.append(rest)
    return pieces


def shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"
