"""HTML reduced to readable text for the model, with the standard library's html.parser.

Scripts, styles, navigation and other chrome are dropped; headings become `#` lines, list items
`- ` lines, links `[text](absolute url)`, and block elements paragraph breaks. The parser never
fetches anything and never executes anything: it only reads the bytes it is given.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

# Content of these elements is never text for a reader.
SKIPPED = frozenset({"script", "style", "nav", "noscript", "template", "svg", "iframe", "object",
                     "head", "select", "button", "form", "canvas", "math"})
BLOCKS = frozenset({"p", "div", "section", "article", "main", "header", "footer", "aside", "ul",
                    "ol", "table", "tr", "blockquote", "figure", "figcaption", "dl", "dt", "dd",
                    "address", "details", "summary", "hr", "pre", "body"})
HEADINGS = {f"h{level}": level for level in range(1, 7)}
VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
                  "source", "track", "wbr"})
_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")
_BLANK_LINES = re.compile(r"\n{3,}")
_LINE_EDGES = re.compile(r" *\n *")
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([\w.:-]+)""", re.I)
# The standard library's parser is quadratic on some malformed input: every '<' that cannot end
# (no '>' after it: "<a<a<a…") and every marked section without "]]>" ("<![CDATA[ >…") makes
# it scan to the end of the document again. 400 KB of "<a" took 77 s, all in one web_fetch, and
# `<![ ` made it raise AssertionError. Such '<' are text anyway, so they are escaped first, and a
# time budget bounds whatever shape is left.
DEFAULT_BUDGET_SECONDS = 5.0


class _OverBudget(Exception):
    pass


class _Reducer(HTMLParser):
    def __init__(self, base_url: str, deadline: float = float("inf")):
        super().__init__(convert_charrefs=True)
        self.base_url = base_url
        self.deadline = deadline
        self.out: list[tuple[bool, str]] = []  # (preformatted?, text)
        self.skip_depth = 0
        self.pre_depth = 0
        self.in_title = False
        self.title: list[str] = []
        self.link_href: str | None = None
        self.link_text: list[str] = []

    def _check_budget(self) -> None:
        if time.monotonic() > self.deadline:
            raise _OverBudget

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._check_budget()
        if tag == "title":
            self.in_title = True
        if tag in SKIPPED and tag not in VOID:
            self.skip_depth += 1
        if self.skip_depth:
            return
        if tag in HEADINGS:
            self._break("\n\n" + "#" * HEADINGS[tag] + " ")
        elif tag == "li":
            self._break("\n- ")
        elif tag in BLOCKS:
            self._break("\n\n")
        elif tag == "br":
            self._emit("\n")
        elif tag in ("td", "th"):
            self._emit(" | ")
        elif tag == "a":
            self.link_href = _absolute(self.base_url, dict(attrs).get("href"))
            self.link_text = []
        elif tag == "img":
            alt = (dict(attrs).get("alt") or "").strip()
            if alt:
                self._text(f"[image: {alt}]")
        if tag == "pre":
            self.pre_depth += 1

    def handle_endtag(self, tag: str) -> None:
        self._check_budget()
        if tag == "title":
            self.in_title = False
        if tag in SKIPPED and tag not in VOID:
            self.skip_depth = max(0, self.skip_depth - 1)
            return
        if self.skip_depth:
            return
        if tag == "a" and self.link_href is not None:
            text = " ".join("".join(self.link_text).split())
            self._emit(f"[{text}]({self.link_href})" if text else "")
            self.link_href = None
        elif tag in HEADINGS or tag in BLOCKS:
            self._break("\n\n")
        if tag == "pre":
            self.pre_depth = max(0, self.pre_depth - 1)

    def handle_data(self, data: str) -> None:
        self._check_budget()
        if self.in_title:
            self.title.append(data)
        if self.skip_depth:
            return
        self._text(data)

    def _text(self, data: str) -> None:
        if self.link_href is not None:
            self.link_text.append(data)
        elif self.pre_depth:
            self.out.append((True, data))
        else:
            self._emit(_SPACES.sub(" ", data.replace("\n", " ")))

    def _emit(self, text: str) -> None:
        self.out.append((False, text))

    def _break(self, marker: str) -> None:
        if self.link_href is None:
            self._emit(marker)

    def text(self) -> str:
        """Join the pieces: tidy whitespace in flowing text, keep <pre> blocks as they are."""
        pieces: list[str] = []
        flowing: list[str] = []
        for preformatted, text in self.out:
            if not preformatted:
                flowing.append(text)
                continue
            pieces.append(_tidy("".join(flowing)))
            flowing = []
            pieces.append(text)
        pieces.append(_tidy("".join(flowing)))
        return _BLANK_LINES.sub("\n\n", "".join(pieces)).strip()


def _tidy(text: str) -> str:
    return _LINE_EDGES.sub("\n", _SPACES.sub(" ", text))


def _absolute(base_url: str, href: str | None) -> str | None:
    """Only http(s) links are kept as links; javascript:, data: and friends become plain text."""
    if not href:
        return None
    joined = urljoin(base_url, href.strip())
    return joined if urlsplit(joined).scheme in ("http", "https") else None


@dataclass(frozen=True)
class Reduced:
    title: str
    text: str
    complete: bool   # False when the page was cut (too costly or too broken to parse whole)


def defuse(html: str) -> str:
    """Escape the '<' that cannot start a complete construct (see DEFAULT_BUDGET_SECONDS)."""
    last = html.rfind(">")
    if last < len(html) - 1:
        html = html[:last + 1] + html[last + 1:].replace("<", "&lt;")
    return html.replace("<![", "&lt;![")


def reduce_html(html: str, base_url: str = "", *,
                budget_seconds: float = DEFAULT_BUDGET_SECONDS) -> Reduced:
    """The title and readable text of an HTML document, within a CPU time budget."""
    reducer = _Reducer(base_url, time.monotonic() + budget_seconds)
    complete = True
    try:
        reducer.feed(defuse(html))
        reducer.close()
    except _OverBudget:
        complete = False
    except Exception:  # the parser asserts on some broken markup: keep what was read
        complete = False
    title = " ".join("".join(reducer.title).split())
    return Reduced(title, reducer.text(), complete)


def html_to_text(html: str, base_url: str = "") -> tuple[str, str]:
    """Return (title, readable text) of an HTML document."""
    reduced = reduce_html(html, base_url)
    return reduced.title, reduced.text


def sniff_charset(head: bytes) -> str | None:
    """The charset a page declares in a <meta> tag within its first bytes, if any."""
    match = _META_CHARSET.search(head[:4096])
    return match.group(1).decode("ascii", "replace") if match else None
