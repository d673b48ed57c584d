"""The one resolver of a person's language: their /language choice, else the platform's hint
(this message's, else the last one seen), else `[agent] language`; both stored per sender and
read once at start, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from bot.access.languages import Languages
from bot.access.preferences import Preferences
from tests.support.pg_support import on_both_backends

backend_name = on_both_backends()

GIULIA, DIEGO = "telegram:1", "discord:2"


async def test_a_choice_beats_the_platforms_hint_which_beats_the_default(store):
    languages = Languages(Preferences(store), "es")
    assert languages.language_of(GIULIA) == "es"
    assert languages.language_of(GIULIA, "it-IT") == "it"
    await languages.choose(GIULIA, "en")
    assert languages.language_of(GIULIA, "it-IT") == "en"
    assert await languages.choose(GIULIA, "auto") == "es"
    assert languages.language_of(GIULIA, "pt-BR") == "es"     # a language the bot does not speak


async def test_the_last_hint_is_remembered_for_copies_sent_without_one(store):
    languages = Languages(Preferences(store))
    await languages.heard(DIEGO, "es-419")
    assert languages.language_of(DIEGO) == "es"
    assert languages.translator(DIEGO)._("Approve") == "Aprobar"


async def test_choices_and_hints_survive_a_restart_and_a_hint_is_written_only_when_it_changes(
        store):
    languages = Languages(Preferences(store))
    await languages.choose(GIULIA, "it")
    await languages.heard(DIEGO, "es")
    before = await store.fetchall("SELECT * FROM sender_settings ORDER BY sender")
    await languages.heard(DIEGO, "es-ES")     # same language: nothing written
    assert await store.fetchall("SELECT * FROM sender_settings ORDER BY sender") == before
    again = Languages(Preferences(store), "en")
    await again.load()
    assert (again.language_of(GIULIA), again.language_of(DIEGO)) == ("it", "es")
    assert again.chosen(GIULIA) == "it" and again.chosen(DIEGO) == ""


async def test_a_language_the_bot_does_not_speak_is_refused_and_nothing_is_stored(store):
    languages = Languages(Preferences(store))
    with pytest.raises(ValueError):
        await languages.choose(GIULIA, "klingon")
    assert await store.fetchall("SELECT * FROM sender_settings") == []


async def test_times_are_shown_in_the_persons_time_zone(store):
    languages = Languages(Preferences(store), "it", "UTC")
    languages.zone_changed(GIULIA, "Europe/Rome")
    noon_utc = 1_796_212_800.0      # 2026-12-02 12:00 UTC
    assert languages.translator(GIULIA).clock(noon_utc) == "13:00 CET"
    assert languages.translator(DIEGO).clock(noon_utc) == "12:00 UTC"
