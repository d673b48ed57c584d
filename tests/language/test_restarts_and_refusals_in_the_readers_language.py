"""What the bot says after a restart, about a job it could not run, about a message it could
not read whole, about a failure of its own and in a server it does not serve: each in the
reader's language, the names and details it reports shown as they are."""

from __future__ import annotations

from types import SimpleNamespace

from telegram import Update

from bot.core.events import REPAIRED_NOTICE
from bot.jobs.scheduler import _cut_off_text, _missed_text
from bot.language.phrase import Phrase
from bot.runtime.recovery import IN_DOUBT_NOTE, RAN_NOTES, user_notice
from channels.telegram import TelegramChannel
from tests.channels.discord.test_discord_channel import (  # noqa: F401 (fixtures)
    UNLISTED,
    USER,
    ScriptedAgent,
    discord_fake,
    start,
)
from tests.fakes.telegram_server import channel_overrides
from tests.language.test_walkthrough_in_italian import said_to
from tests.support.languages import EN, ES, IT, LANGUAGES, PSEUDO, unmarked_words
from tests.support.telegram_support import FAST

NOW = 1_796_212_800.0     # 2026-12-02 12:00 UTC
GIULIA = 4242


def test_calls_in_doubt_after_a_restart_are_reported_in_the_readers_language():
    calls = [{"tool": "fs_write", "ts": NOW, "detail": "approved by telegram:9"}]
    notice = user_notice(calls)
    assert str(notice).startswith("⚠️ I was restarted while working on this; the call to fs_write")
    assert IT.say(notice).startswith("⚠️ Sono stato riavviato mentre ci lavoravo; la chiamata a "
                                     "fs_write potrebbe essersi conclusa oppure no.")
    assert "• fs_write, avviato alle 12:00 UTC: approved by telegram:9" in IT.say(notice)
    two = user_notice([*calls, {**calls[0], "tool": "shell_run"}])
    assert "las llamadas a fs_write, shell_run" in ES.say(two)
    assert unmarked_words(PSEUDO.say(two), ("fs_write", "shell_run", "approved", "by",
                                            "telegram", "12:00", "PM", "UTC")) == []
    assert ES.say(IN_DOUBT_NOTE).startswith("⚠️ En duda:")
    assert IT.say(RAN_NOTES[True]) == "✅ Eseguita dopo un riavvio."


def test_a_missed_or_cut_off_job_run_is_told_to_its_owner_in_their_language():
    from bot.jobs.jobs import Job
    from bot.jobs.schedule import parse_cron

    job = Job(id="j1", owner="telegram:1", channel="telegram", chat="1", name="stretch",
              schedule=parse_cron("0 8 * * *", timezone="Europe/Rome"), level="full",
              message="stretch", next_run=NOW + 86_400)
    assert str(_missed_text(job)).startswith("⏰ stretch: a run was missed while I was offline")
    assert IT.say(_missed_text(job)).startswith("⏰ stretch: un'esecuzione è saltata mentre ero "
                                                "offline")
    assert "Prossima esecuzione: " in IT.say(_missed_text(job))
    assert ES.say(_cut_off_text(job)).startswith("⏰ stretch: la última ejecución se interrumpió")


def test_a_message_read_with_invalid_bytes_is_said_in_the_senders_language():
    assert EN.say(Phrase(REPAIRED_NOTICE)) == REPAIRED_NOTICE
    assert ES.say(Phrase(REPAIRED_NOTICE)).startswith("Algunos caracteres de tu mensaje")


async def test_a_failure_handling_a_telegram_update_is_told_in_the_senders_language(
        app_factory, tg):
    tg.language_codes[GIULIA] = "it"
    app = await app_factory({"senders": {f"telegram:{GIULIA}": "supervised"},
                             **channel_overrides(tg)}, env={"TELEGRAM_BOT_TOKEN": tg.token})
    channel = TelegramChannel(app.config, app.agent, settings=FAST)
    await channel.start()
    try:
        update = Update.de_json({"update_id": 1, **{"message": tg.make_message(
            {"id": GIULIA, "type": "private"}, GIULIA, "ciao")}}, channel._messenger.bot)
        await channel._on_error(update, SimpleNamespace(error=RuntimeError("boom")))
    finally:
        await channel.stop()
    assert ("⚠️ Qualcosa è andato storto da parte mia. Non si è perso nulla; riprova, per "
            "favore.") in said_to(tg, GIULIA)


class HintedAgent(ScriptedAgent):
    def translator(self, reader, hint=""):
        return LANGUAGES.get(hint[:2], EN)


async def test_a_slash_command_in_a_server_not_served_is_refused_in_the_users_language(
        start, discord_fake):  # noqa: F811
    await start(HintedAgent())
    slash = await discord_fake.slash(name="tools", user_id=USER, channel_id=UNLISTED.channel_ids[0],
                                     guild_id=UNLISTED.id, locale="es-ES")
    await discord_fake.wait_for(lambda: discord_fake.interaction_callbacks(slash["id"]))
    (callback,) = discord_fake.interaction_callbacks(slash["id"])
    assert callback.json["data"]["content"] == "En este servidor no respondo."


class DescribingAgent(ScriptedAgent):
    def command_descriptions(self, language=""):
        from bot.runtime.commands import descriptions

        return descriptions(LANGUAGES[language or "en"])


async def test_discords_slash_command_menu_is_in_each_clients_language(start, discord_fake):  # noqa: F811
    await start(DescribingAgent())
    synced = {c["name"]: c for c in discord_fake.commands}
    undo = synced["undo"]
    assert undo["description"] == "Revert the last change I made in this conversation"
    localized = undo["description_localizations"]
    assert localized["it"] == IT._("Revert the last change I made in this conversation")
    assert localized["it"] != undo["description"]
    assert localized["es-ES"] == localized["es-419"] == ES._(
        "Revert the last change I made in this conversation")
    assert "en-US" not in localized and "fr" not in localized


def test_a_jobs_last_outcome_reads_in_the_owners_language_its_own_details_as_they_are():
    from bot.jobs.outcomes import outcome_words

    assert IT.say(outcome_words("ok: answered")) == "ok: risposta data"
    assert ES.say(outcome_words("failed: over the owner's budget")) == \
        "falló: por encima del presupuesto del propietario"
    assert IT.say(outcome_words("failed: chat -100 cannot be reached on telegram")) == \
        "non riuscito: la chat -100 non è raggiungibile su telegram"
    assert IT.say(outcome_words("failed: the model said no")) == "non riuscito: the model said no"
    assert outcome_words("something else") == "something else"
