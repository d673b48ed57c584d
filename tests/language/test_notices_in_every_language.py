"""Budget, rate-limit, reminder and pairing notices in each language: made before anyone knows
who reads them (Phrases), rendered by the reader's translator with their money format, dates
and plurals, every word from the catalog."""

from __future__ import annotations

from bot.access.ratelimit import take
from bot.language.phrase import Amount, Phrase
from bot.money.budgets import resets_text, until
from bot.money.spend import Period
from tests.support.languages import ES, IT, PSEUDO, unmarked_words

NOW = 1_796_212_800.0     # 2026-12-02 12:00 UTC


def budget_warning() -> Phrase:
    return Phrase("Heads-up: {share} of your model budget for today is used ({spent} of "
                  "{limit}). It resets {resets}.", share="80%", spent=Amount(0.8, "EUR"),
                  limit=Amount(1.0, "EUR"), resets=resets_text("monthly", Period.at(NOW), NOW))


def test_a_budget_notice_reads_in_each_language_with_its_money_dates_and_plurals():
    warning = budget_warning()
    assert str(warning).startswith("Heads-up: 80% of your model budget")
    assert "0,80\xa0€ su 1,00\xa0€" in IT.say(warning) and "1 gen 2027" in IT.say(warning)
    assert "tra 30 giorni" in IT.say(warning)
    assert "0,80\xa0€ de 1,00\xa0€" in ES.say(warning) and "en 30 días" in ES.say(warning)
    assert unmarked_words(PSEUDO.say(warning), ("80%", "EUR", "€", "UTC", "00:00")) == []


def test_durations_count_in_the_readers_plural():
    assert IT.say(until(86_400 * 2.2)) == "tra 2 giorni"
    assert ES.say(until(90)) == "en 1 min"


def test_the_rate_limit_notice_is_in_the_readers_language():
    _bucket, decision = take(None, NOW, 1)
    _bucket, decision = take(_bucket, NOW, 1)
    assert "al massimo 1 al minuto" in IT.say(decision.notice)
    assert unmarked_words(PSEUDO.say(decision.notice)) == []


def test_a_reminder_and_a_pairing_notice_are_catalog_words_around_their_content():
    skipped = Phrase("⏰ {job}: skipped — {why}", job="stretch", why=budget_warning())
    paired = Phrase("✅ You're in! The operator let you in ({level}). Send /help to see what I "
                    "can do.", level="supervised")
    assert IT.say(skipped).startswith("⏰ stretch: saltato. Attenzione:")
    assert ES.say(paired).startswith("✅ ¡Ya estás dentro!")
    for said in (skipped, paired):
        assert unmarked_words(PSEUDO.say(said), ("stretch", "supervised", "/help", "80%", "EUR",
                                                 "UTC", "00:00")) == []


def test_a_schedule_in_words_reads_in_each_language():
    from bot.jobs.schedule import parse_cron

    weekly, often = parse_cron("0 8 * * 1", timezone="Europe/Rome"), parse_cron(
        "*/15 * * * *", timezone="UTC")
    assert str(weekly.describe()) == "every Monday at 08:00 (Europe/Rome)"
    assert IT.say(weekly.describe()) == "ogni lunedì alle 08:00 (Europe/Rome)"
    assert ES.say(often.describe()) == "cada 15 minutos (UTC)"
    assert weekly.describe().count("0") == 3   # still a str: str.count is not shadowed
    assert unmarked_words(PSEUDO.say(weekly.describe()), ("08:00", "Europe", "Rome")) == []


async def test_why_a_grant_a_job_or_a_pairing_code_cannot_be_changed_reads_in_each_language(store):
    import pytest

    from bot.access.senders import PairingError, _why_not_answerable
    from bot.approvals.grants import GrantError, Grants
    from bot.core.errors import reason_of
    from bot.jobs.jobs import JobError, JobLimits, Jobs
    from bot.jobs.schedule import parse_at

    with pytest.raises(GrantError) as refused:
        await Grants(store).revoke("g1", "telegram:1")
    assert str(refused.value) == "no grant 'g1' of yours; see /grants"
    assert IT.say(reason_of(refused.value)) == "nessun tuo permesso 'g1'; vedi /grants"
    with pytest.raises(JobError) as past:
        once = parse_at("in 1 minute", now=NOW, timezone="UTC")
        Jobs(store, JobLimits()).check(_job(once), NOW + 3600)   # its one run is past by now
    assert ES.say(reason_of(past.value)) == "esa hora ya pasó; elige una en el futuro"
    expired = PairingError(_why_not_answerable({"status": "pending", "expires_at": 0,
                                                "code": "AB12CD34", "sender": "telegram:5"}, NOW))
    assert IT.say(reason_of(expired)).startswith("il codice di abbinamento AB12CD34 è scaduto")


def _job(schedule):
    from bot.jobs.jobs import Job

    return Job(id="", owner="telegram:1", channel="telegram", chat="1", name="x",
               schedule=schedule, level="full", message="hi")


def test_a_model_account_error_and_an_attachment_refusal_read_in_each_language():
    from bot.llm.errors import translate
    from bot.media.documents import prepare_document
    from bot.media.limits import MediaLimits, MediaRefused

    class RateLimitError(Exception):
        status_code = 429

    error = translate(RateLimitError("slow down"), "claude-sonnet-5-5")
    assert str(error.user_message).endswith("Please try again in a minute. Your message is saved.")
    assert IT.say(error.user_message).endswith("Riprova tra un minuto. Il tuo messaggio è salvato.")
    try:
        prepare_document(b"", "nota.txt", MediaLimits())
    except MediaRefused as refused:
        assert ES.say(refused.message) == "nota.txt está vacío (0 bytes)."
    else:
        raise AssertionError("an empty document was accepted")


def test_a_refused_photo_or_a_full_inbox_is_explained_in_each_language(tmp_path):
    import pytest

    from bot.media.images import prepare_image
    from bot.media.limits import MediaLimits, MediaRefused

    with pytest.raises(MediaRefused) as empty:
        prepare_image(b"", MediaLimits())
    assert str(empty.value.message) == "This image is empty (0 bytes)."
    assert IT.say(empty.value.message) == "Questa immagine è vuota (0 byte)."
    with pytest.raises(MediaRefused) as large:
        prepare_image(b"x" * 2_500_000, MediaLimits(max_image_bytes=1_000_000))
    assert ES.say(large.value.message) == ("Esta imagen es demasiado grande (2,5 MB; el límite "
                                           "es 1 MB).")
    with pytest.raises(MediaRefused) as text:
        prepare_image(b"plain text, not a picture", MediaLimits())
    assert IT.say(text.value.message).startswith("Questo file non è un'immagine che so leggere")
    assert unmarked_words(PSEUDO.say(text.value.message), ("JPEG", "PNG", "GIF", "WebP")) == []


async def test_everyones_usage_reads_in_the_approvers_language():
    from bot.money.budgets import Budgets, everyone_report

    class Limits:
        daily, monthly, global_daily = 1.0, 0.0, 20.0

    class Fixed(Budgets):
        def __init__(self):
            self.currency = "EUR"

        def limits(self, sender, level):
            return Limits()

    report = await everyone_report(Fixed(), {}, {"telegram:1": (1.2, 1.2), "telegram:3": (0.2, 0.2)})
    assert str(report).splitlines()[1] == "• telegram:1: €1.20 / €1.20 — at the daily limit"
    assert IT.say(report).splitlines() == [
        "Spesa del modello per mittente (EUR), oggi / questo mese:",
        "• telegram:1: 1,20\xa0€ / 1,20\xa0€ — al limite giornaliero",
        "• telegram:3: 0,20\xa0€ / 0,20\xa0€",
        "Tutti oggi: 1,40\xa0€ su 20,00\xa0€ (7%)"]
    assert ES.say(await everyone_report(Fixed(), {}, {})) == \
        "No hay gasto del modelo registrado este mes."
