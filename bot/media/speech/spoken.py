"""What is said aloud of a written answer.

Code blocks, tables and URLs read out are noise: each becomes a short phrase ("code, see the
text", "a link") and the text message, always sent too, holds them. Markdown marks are dropped,
a link keeps its label. An answer longer than `max_chars` is spoken up to the last sentence end
that fits (the rest is in the text only). The phrases are said in the answer's language; the
three languages here are the ones both engines have voices for.
"""

from __future__ import annotations

import re

PHRASES = {
    "en": {"code": "Code, see the text.", "table": "A table, see the text.", "link": "a link"},
    "it": {"code": "Codice, vedi il testo.", "table": "Una tabella, vedi il testo.",
           "link": "un link"},
    "es": {"code": "Código, mira el texto.", "table": "Una tabla, mira el texto.",
           "link": "un enlace"},
}
_FENCED = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n.*?(?:^[ \t]*\1[ \t]*$|\Z)", re.S | re.M)
_TABLE = re.compile(r"(?:^[ \t]*\|.*\|[ \t]*(?:\n|\Z))+", re.M)
_ONE_LINE_FENCE = re.compile(r"```[^`\n]{0,2000}```")
_INLINE_CODE = re.compile(r"`([^`\n]{1,200})`")
_MD_LINK = re.compile(r"!?\[([^\]\n]{0,200})\]\(\s*[^)\s]{1,2000}\s*\)")
_URL = re.compile(r"\b(?:https?://|www\.)[^\s<>()\]]{0,2000}[^\s<>()\].,;:!?'\"]", re.I)
_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+", re.M)
_QUOTE_OR_BULLET = re.compile(r"^[ \t]*(?:>+|[-*+•]|\d{1,3}[.)])[ \t]+", re.M)
_EMPHASIS = re.compile(r"(\*\*|__|\*|_|~~)(?=\S)(.{1,300}?)(?<=\S)\1")
_RULE = re.compile(r"^[ \t]*(?:[-*_][ \t]*){3,}$", re.M)
_SPACES = re.compile(r"[ \t]+")
_BLANKS = re.compile(r"\n\s*\n+")
_SENTENCE_END = re.compile(r"[.!?…](?=\s|$)")


def phrases(language: str) -> dict[str, str]:
    return PHRASES.get(language, PHRASES["en"])


def spoken_text(answer: str, language: str, max_chars: int) -> str:
    """The part of `answer` to say aloud; '' when nothing is worth saying."""
    said = phrases(language)
    # Only the start can be spoken: the rest is never scanned (each pattern is linear in it).
    text = answer[:max(4 * max_chars, 4000)]
    text = _FENCED.sub(f"\n{said['code']}\n", text)
    text = _ONE_LINE_FENCE.sub(said["code"], text)
    text = _TABLE.sub(f"{said['table']}\n", text)
    text = _MD_LINK.sub(lambda m: m.group(1) or said["link"], text)
    text = _URL.sub(said["link"], text)
    text = _INLINE_CODE.sub(lambda m: m.group(1) if len(m.group(1)) <= 40 else said["code"], text)
    text = _RULE.sub("", text)
    text = _HEADING.sub("", text)
    text = _QUOTE_OR_BULLET.sub("", text)
    text = _EMPHASIS.sub(r"\2", text)
    text = _SPACES.sub(" ", text)
    text = _BLANKS.sub("\n", text).strip()
    return _first_part(text, max_chars)


def _first_part(text: str, max_chars: int) -> str:
    """At most `max_chars`: up to the last sentence end that fits, else the last word."""
    if len(text) <= max_chars:
        return text
    head = text[:max_chars]
    ends = [m.end() for m in _SENTENCE_END.finditer(head)]
    if ends and ends[-1] >= max_chars // 3:
        return head[:ends[-1]].strip()
    cut = head.rfind(" ")
    return (head[:cut] if cut > max_chars // 3 else head).strip()


_WORDS = {
    "it": {"il", "che", "di", "non", "per", "una", "sono", "della", "questo", "anche", "ciao",
           "grazie", "gli", "perché", "è"},
    "es": {"el", "que", "de", "los", "las", "una", "por", "para", "es", "está", "hola",
           "gracias", "pero", "también", "muy"},
    "en": {"the", "and", "is", "are", "you", "that", "this", "for", "with", "not", "hello",
           "thanks", "it's", "of", "to"},
}
_WORD = re.compile(r"[^\W\d_]+(?:'[a-z]+)?", re.U)


def guess_language(text: str, default: str = "en") -> str:
    """Which of the spoken languages `text` is written in (common words counted), else
    `default`. Looks at the first 2,000 characters: enough for a verdict, bounded in cost."""
    words = [w.lower() for w in _WORD.findall(text[:2000])]
    scores = {lang: sum(w in common for w in words) for lang, common in _WORDS.items()}
    best = max(scores, key=lambda lang: scores[lang])
    return best if scores[best] >= 2 and scores[best] > scores.get(default, 0) else default
