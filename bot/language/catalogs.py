"""The compiled message catalogs, each read once, on first use, and kept for the process.

`make` (and the package build) compiles `locale/<lang>/LC_MESSAGES/myclaw.po` into `myclaw.mo`
beside it (gitignored). An install that skipped that step still speaks every language: the
`.po` source is compiled in memory once, and the log says to run `make`.

The messages are written in English, so English is never read from a catalog: its translator
gives each message as written (ngettext's one-or-many is English's rule). Its catalog only lists
them for translators' tools, every entry its own msgid (tests/language/test_catalogs.py).
"""

from __future__ import annotations

import functools
import gettext
import io
import logging
import threading
from pathlib import Path

from bot.language.names import DEFAULT, SOURCE, supported
from bot.language.translator import Translator

log = logging.getLogger(__name__)

DOMAIN = "myclaw"
LOCALE_DIR = Path(__file__).parent / "locale"


def N_(message: str) -> str:
    """Marks a message for the catalog where it is defined (a table of command descriptions);
    it is translated where it is shown, with the reader's translator."""
    return message


class Catalogs:
    def __init__(self, directory: Path = LOCALE_DIR):
        self.directory = directory
        self._translators: dict[str, Translator] = {}
        self._lock = threading.Lock()

    def translator(self, language: str | None, keep: bool = True) -> Translator:
        """The translator of a supported language (the default one for anything else).
        `keep=False`: for a one-off use (a command menu set at start-up): a catalog not loaded
        yet is loaded for it and not kept — languages nobody reads in cost nothing."""
        language = supported(language) or DEFAULT
        found = self._translators.get(language)
        if found is None and not keep:
            return Translator(language, self._load(language))
        if found is None:
            with self._lock:
                found = self._translators.get(language)
                if found is None:
                    found = Translator(language, self._load(language))
                    self._translators[language] = found
        return found

    def _load(self, language: str) -> gettext.NullTranslations:
        if language == SOURCE:
            return gettext.NullTranslations()
        folder = self.directory / language / "LC_MESSAGES"
        compiled, source = folder / f"{DOMAIN}.mo", folder / f"{DOMAIN}.po"
        if compiled.exists() and (not source.exists()
                                  or compiled.stat().st_mtime >= source.stat().st_mtime):
            with compiled.open("rb") as handle:
                return gettext.GNUTranslations(handle)
        if not source.exists():
            log.warning("language %s: no catalog in %s; English is shown", language, folder)
            return gettext.NullTranslations()
        log.warning("language %s: %s is missing or older than its .po source; compiled in "
                    "memory (run `make` to compile the catalogs once)", language, compiled.name)
        return gettext.GNUTranslations(io.BytesIO(compile_po(source)))


def compile_po(source: Path) -> bytes:
    """The .mo bytes of a .po file (what `pybabel compile` writes)."""
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    with source.open("rb") as handle:
        catalog = read_po(handle)
    out = io.BytesIO()
    write_mo(out, catalog)
    return out.getvalue()


@functools.cache
def catalogs() -> Catalogs:
    """The process's catalogs (one set, loaded lazily)."""
    return Catalogs()


def translator(language: str | None, keep: bool = True) -> Translator:
    return catalogs().translator(language, keep)
