"""The catalogs: every message the source marks is in each language, with the same placeholders
and every plural form; they load once, from the compiled file or (without one) from the source."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from babel import Locale
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po

from bot.language.catalogs import LOCALE_DIR, Catalogs
from bot.language.names import SUPPORTED

ROOT = Path(__file__).resolve().parents[2]
# The keywords the Makefile's `catalogs-update` extracts with (besides Babel's defaults).
KEYWORDS = {"_": None, "gettext": None, "ngettext": (1, 2), "N_": None, "Phrase": None,
            "plural_phrase": (1, 2)}
PLACEHOLDER = re.compile(r"\{(\w*)[^{}]*\}")


def extracted() -> dict[str, str | None]:
    """Every message the source marks (the console's templates too): id -> plural id (None for
    a plain message)."""
    found: dict[str, str | None] = {}
    for folder in ("bot", "channels", "tools"):
        for _file, _line, message, _comments, _context in extract_from_dir(
                ROOT / folder, method_map=[("**.py", "python"), ("**/templates/**.html", "jinja2")],
                keywords=KEYWORDS):
            if isinstance(message, tuple):
                found[message[0]] = message[1]
            elif message:
                found[message] = None
    return found


def catalog(language: str):
    with (LOCALE_DIR / language / "LC_MESSAGES" / "myclaw.po").open("rb") as handle:
        return read_po(handle, locale=language)


def placeholders(text: str) -> set[str]:
    return set(PLACEHOLDER.findall(text))


@pytest.fixture(scope="module")
def messages() -> dict[str, str | None]:
    return extracted()


def test_the_source_marks_the_words_of_approval_cards_commands_and_notices(messages):
    assert {"Approve", "Deny", "Approval needed", "Requested by: {who}",
            "Started a fresh conversation."} <= set(messages)
    assert messages["Approval needed: {n} call"] == "Approval needed: {n} calls"


@pytest.mark.parametrize("language", SUPPORTED)
def test_no_message_of_the_source_is_missing_or_untranslated(language, messages):
    translations = catalog(language)
    missing = [m for m in messages if translations.get(m) is None]
    assert missing == []
    empty = [m.id for m in translations if m.id and not all(
        m.string if isinstance(m.string, tuple) else (m.string,))]
    assert empty == []
    assert not [m.id for m in translations if m.id and m.fuzzy]


@pytest.mark.parametrize("language", SUPPORTED)
def test_no_translation_drops_or_adds_a_placeholder(language, messages):
    wrong = []
    for message in catalog(language):
        if not message.id:
            continue
        if isinstance(message.id, tuple):
            expected = placeholders(message.id[1])
            for form in message.string:
                # the form for one may say "one" instead of {n} ("nel messaggio qui sopra")
                if placeholders(form) - {"n"} != expected - {"n"} or \
                        not placeholders(form) <= expected:
                    wrong.append((message.id[0], form))
        elif placeholders(message.string) != placeholders(message.id):
            wrong.append((message.id, message.string))
    assert wrong == []


@pytest.mark.parametrize("language", SUPPORTED)
def test_every_counted_message_has_each_plural_form_of_its_language(language):
    translations = catalog(language)
    # CLDR's categories for the language, plus "other"
    assert translations.num_plurals == len(Locale.parse(language).plural_form.tags) + 1
    plural = [m for m in translations if isinstance(m.id, tuple)]
    assert plural
    for message in plural:
        assert len(message.string) == translations.num_plurals and all(message.string)


def test_italian_and_spanish_count_one_and_many_differently():
    catalogs = Catalogs()
    one, many = "Approval needed: {n} call", "Approval needed: {n} calls"
    assert catalogs.translator("it").ngettext(one, many, 1) == "Approvazione richiesta: 1 chiamata"
    assert catalogs.translator("it").ngettext(one, many, 3) == "Approvazione richiesta: 3 chiamate"
    assert catalogs.translator("es").ngettext(one, many, 3) == "Se necesita aprobación: 3 llamadas"
    assert catalogs.translator("en").ngettext(one, many, 1) == "Approval needed: 1 call"


def test_english_is_the_source_so_its_catalog_gives_every_message_as_written():
    with (LOCALE_DIR / "en" / "LC_MESSAGES" / "myclaw.po").open("rb") as handle:
        english = read_po(handle)
    rewritten = [m.id for m in english if m.id and m.string not in ("", m.id, ("", ""))]
    assert rewritten == []   # an English rewording belongs in the source, not in the catalog


def test_a_language_is_loaded_once_and_an_unknown_one_falls_back_to_the_default():
    catalogs = Catalogs()
    assert catalogs.translator("it") is catalogs.translator("it-IT")
    assert catalogs.translator("de").language == "en"
    assert catalogs.translator(None)._("Approve") == "Approve"


def test_without_a_compiled_catalog_the_source_is_compiled_in_memory(tmp_path, caplog):
    folder = tmp_path / "it" / "LC_MESSAGES"
    folder.mkdir(parents=True)
    shutil.copy(LOCALE_DIR / "it" / "LC_MESSAGES" / "myclaw.po", folder)
    catalogs = Catalogs(tmp_path)
    assert catalogs.translator("it")._("Approve") == "Approva"
    assert "run `make`" in caplog.text


def test_the_compiled_catalogs_are_what_the_install_built_from_the_sources():
    for language in SUPPORTED:
        folder = LOCALE_DIR / language / "LC_MESSAGES"
        compiled, source = folder / "myclaw.mo", folder / "myclaw.po"
        assert compiled.exists(), "run `make catalogs`"
        assert compiled.stat().st_mtime >= source.stat().st_mtime
    assert "pybabel -q compile" in (ROOT / "Makefile").read_text()
    assert "*.mo" in (ROOT / ".gitignore").read_text().split()
