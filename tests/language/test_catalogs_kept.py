"""A catalog loaded for a one-off use (a start-up command menu) is not kept."""

from __future__ import annotations

from bot.language.catalogs import Catalogs


def test_a_one_off_translator_is_not_kept_and_a_kept_one_is_reused():
    catalogs = Catalogs()
    once = catalogs.translator("es", keep=False)
    assert once.language == "es" and catalogs._translators == {}
    kept = catalogs.translator("es")
    assert catalogs.translator("es") is kept
    assert catalogs.translator("es", keep=False) is kept   # loaded already: the same one
