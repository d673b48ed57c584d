"""Translators for tests: each real language, and a pseudo-language that marks every catalog
message, so a test can see which words of a rendered message did not come from the catalog."""

from __future__ import annotations

import gettext
import re

from bot.language.catalogs import translator
from bot.language.translator import Translator

EN = translator("en")
IT = translator("it")
ES = translator("es")
LANGUAGES = {"en": EN, "it": IT, "es": ES}

OPEN, CLOSE = "⟦", "⟧"


class _Marked(gettext.NullTranslations):
    """Every message comes back inside ⟦…⟧ (placeholders still filled by the Translator)."""

    def gettext(self, message: str) -> str:
        return f"{OPEN}{message}{CLOSE}"

    def ngettext(self, singular: str, plural: str, n: int) -> str:
        return f"{OPEN}{singular if n == 1 else plural}{CLOSE}"


PSEUDO = Translator("en", _Marked())

# A span a label cut short ("⟦Always 1: `x`…") runs to the end of the text.
_MARKED = re.compile(f"{OPEN}[^{OPEN}{CLOSE}]*({CLOSE}|$)")


def unmarked_words(text: str, allowed: tuple[str, ...] = ()) -> list[str]:
    """The English words of `text` outside every ⟦…⟧ span and outside `allowed` content (tool
    names, ids, previews, senders): each one is a word that bypassed the catalog."""
    for _ in range(4):   # spans nest when a message's value is itself a message
        text = _MARKED.sub(" ", text)
    for content in sorted(allowed, key=len, reverse=True):
        text = text.replace(content, " ")
    return re.findall(r"[A-Za-z]{3,}", text)
