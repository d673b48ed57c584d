"""Each person hears the bot in their own language on Slack (the one they chose with /language,
else their Slack language, asked once with users.info): an Italian requester's card, the
Spanish approver's copy of it, the outcome redrawn on each in its reader's words, what a tapper
alone is told, a file refused and an error line. The real App and slack-bolt/slack-sdk in Socket
Mode against the fake Slack and the fake Anthropic API."""

from __future__ import annotations

from bot.core.events import ErrorEvent
from bot.language.phrase import Phrase
from tests.channels.slack.test_slack_approvals import cards, said, tap
from tests.fakes.anthropic_server import reply, text, tool_use
from tests.fakes.slack_server import TEAM, FakeSlack, buttons_of, visible_text
from tests.language.test_progress_in_the_readers_language import SUPRA, answering_after
from tests.support.slack_support import ADA, BOB, dm_of

SENDERS = {f"slack:{ADA}": "supervised", f"slack:{BOB}": "supervised"}
APPROVER = {"approvals": {"approvers": [f"slack:{BOB}"]}}


async def speak(slack: FakeSlack, user: str, language: str, answer: str) -> None:
    """`user` chooses `language` with /language and reads the answer in it."""
    await slack.send("events_api", slack.dm_event(user, f"/language {language}"))
    await slack.wait_until(lambda: said(slack, dm_of(user), answer))


async def test_an_italian_card_the_spanish_approvers_copy_and_each_outcome_in_its_readers_words(
        bot, slack, fake_anthropic):
    app, _ = await bot(senders=SENDERS, overrides=APPROVER)
    await speak(slack, ADA, "it", "Con te parlo Italiano")
    await speak(slack, BOB, "es", "Contigo hablo Español")
    fake_anthropic.script(reply(tool_use("fs_write", {"path": "nota.txt", "content": "latte"})))
    await slack.send("events_api", slack.dm_event(ADA, "scrivi nota.txt"))
    await slack.wait_until(lambda: cards(slack, dm_of(ADA)) and cards(slack, dm_of(BOB)))
    (mine,), (copy,) = cards(slack, dm_of(ADA)), cards(slack, dm_of(BOB))
    shown = visible_text(mine)
    assert "🔐 *Approvazione richiesta*" in shown and "Strumento: `fs_write`" in shown
    assert "Rischio: 🟠 medio" in shown and f"Richiesta da: <@{ADA}> (slack:{ADA})" in shown
    assert "Scade alle " in shown and "Crea nota.txt" in shown
    labels = list(buttons_of(mine))
    assert labels[:2] == ["Approva", "Nega"] and labels[2].startswith("Sempre: ")
    assert "Se necesita aprobación" in visible_text(copy) and "Caduca a las " in visible_text(copy)
    assert list(buttons_of(copy))[:2] == ["Aprobar", "Denegar"]
    ids = [[b["action_id"] for b in buttons_of(card).values()] for card in (mine, copy)]
    assert ids[0] == ids[1]      # the action ids never follow the language
    where = (mine["channel"], mine["ts"])
    fake_anthropic.script(text("Fatto."))
    await tap(slack, BOB, copy, "Aprobar")

    def now(card: dict) -> str:
        return visible_text(slack.message(card["channel"], card["ts"]))
    await slack.wait_until(lambda: f"✅ Approvata da <@{BOB}> alle " in now(mine)
                           and f"✅ Aprobada por <@{BOB}> a las " in now(copy))
    await slack.wait_until(lambda: said(slack, dm_of(ADA), "Fatto."))
    assert (app.config.workspace / "nota.txt").read_text() == "latte"
    # A late tap on her own copy (pressed before it was redrawn) is refused in Italian.
    await slack.send("interactive", slack.forged_tap(ADA, *where, ids[0][0]))
    refusal = await slack.wait_for("chat.postEphemeral")
    assert refusal.params["text"] == f"Questa richiesta è già stata approvata da slack:{BOB}."


async def test_a_spanish_batch_card_and_an_english_one_side_by_side(bot, slack, fake_anthropic):
    await bot(senders=SENDERS)
    await speak(slack, ADA, "es", "Contigo hablo Español")
    fake_anthropic.script(reply(tool_use("fs_write", {"path": "a.txt", "content": "A"}),
                                tool_use("fs_write", {"path": "b.txt", "content": "B"})))
    await slack.send("events_api", slack.dm_event(ADA, "escribe dos"))
    await slack.wait_until(lambda: cards(slack, dm_of(ADA)))
    (card,) = cards(slack, dm_of(ADA))
    assert "🔐 *Se necesita aprobación: 2 llamadas*" in visible_text(card)
    assert "Solicitada por: slack:" in visible_text(card)
    assert list(buttons_of(card))[:4] == ["Aprobar todas", "Denegar todas", "Aprobar 1",
                                          "Denegar 1"]
    fake_anthropic.script(reply(tool_use("fs_write", {"path": "c.txt", "content": "C"}),
                                tool_use("fs_write", {"path": "d.txt", "content": "D"})))
    await slack.send("events_api", slack.dm_event(BOB, "write two"))
    await slack.wait_until(lambda: cards(slack, dm_of(BOB)))
    (english,) = cards(slack, dm_of(BOB))
    assert "🔐 *Approval needed: 2 calls*" in visible_text(english)
    assert list(buttons_of(english))[:3] == ["Approve all", "Deny all", "Approve 1"]


async def test_not_here_a_file_too_large_and_an_error_line_speak_the_persons_language(
        bot, slack, fake_anthropic):
    _, channel = await bot(senders=SENDERS, overrides={"media": {"max_document_bytes": 1000}})
    await speak(slack, ADA, "it", "Con te parlo Italiano")
    big = slack.add_file("grande.txt", b"x" * 5000, "text/plain")
    fake_anthropic.script(text("Capito."))
    await slack.send("events_api", slack.dm_event(ADA, "leggilo", files=[big]))
    await slack.wait_until(lambda: said(slack, dm_of(ADA), "Capito."))
    assert said(slack, dm_of(ADA),
                "⚠️ Non sono riuscito a scaricare grande.txt: pesa 5 KB; il limite è 1 KB")
    assert "could not be used" in str(fake_anthropic.last_request.json)   # the model's is English
    tapped = {"type": "block_actions", "trigger_id": "trig-x", "team": {"id": TEAM},
              "user": {"id": ADA, "team_id": TEAM}, "channel": {"id": "C0ELSEWHERE"},
              "container": {"type": "message", "message_ts": "1.1", "channel_id": "C0ELSEWHERE"},
              "message": {"ts": "1.1"}, "actions": [{"action_id": "c:0", "value": "/help"}]}
    await slack.send("interactive", tapped)
    refusal = await slack.wait_for("chat.postEphemeral")
    assert refusal.params["text"] == "In questo canale non rispondo."
    sink = channel.sink_for(dm_of(ADA), f"slack:{ADA}")
    await sink.emit(ErrorEvent(Phrase("I'm restarting right now; please send that again in a "
                                      "minute.")))
    assert said(slack, dm_of(ADA), "⚠️ Mi sto riavviando proprio ora; rimandalo tra un minuto.")


async def test_a_person_whose_slack_is_in_spanish_is_answered_in_spanish_and_asked_once(
        bot, slack, fake_anthropic):
    slack.locales[ADA] = "es-ES"
    await bot(senders=SENDERS)
    await slack.send("events_api", slack.dm_event(ADA, "/whoami"))
    await slack.wait_until(lambda: said(slack, dm_of(ADA), "Autonomía: "))
    await slack.send("events_api", slack.dm_event(ADA, "/whoami"))
    await slack.wait_until(lambda: len([t for t in slack.texts_in(dm_of(ADA)) if "Autonomía: " in t]) == 2)
    asked = slack.of("users.info")
    assert [c.params["user"] for c in asked] == [ADA]
    assert str(asked[0].params["include_locale"]).lower() in ("1", "true")


async def test_without_the_users_read_scope_the_default_language_is_used_and_asked_once(
        bot, slack, fake_anthropic):
    slack.locales[ADA] = "it-IT"
    slack.scopes = slack.scopes.replace(",users:read", "")
    await bot(senders=SENDERS)
    for _ in range(2):
        await slack.send("events_api", slack.dm_event(ADA, "/whoami"))
    await slack.wait_until(lambda: len([t for t in slack.texts_in(dm_of(ADA)) if "Autonomy: " in t]) == 2)
    assert [c.error for c in slack.calls_of_errors("users.info")] == ["missing_scope"]
    assert slack.of("users.info") == []


async def test_a_chosen_language_outranks_the_slack_language(bot, slack, fake_anthropic):
    slack.locales[BOB] = "es-ES"
    await bot(senders=SENDERS)
    await speak(slack, BOB, "it", "Con te parlo Italiano")
    await slack.send("events_api", slack.dm_event(BOB, "/whoami"))
    await slack.wait_until(lambda: said(slack, dm_of(BOB), "Autonomia: "))


async def test_supra_llms_progress_reaches_a_spanish_slack_user_in_spanish(
        bot, slack, fake_anthropic):
    await bot(senders={f"slack:{ADA}": "supervised"})
    await speak(slack, ADA, "es", "Contigo hablo Español")
    line = f"⚙️ supra_llm: Consultando a {SUPRA}…"
    fake_anthropic.script(reply(tool_use("supra_llm", {"question": "¿6 por 7?"})))
    fake_anthropic.responder = answering_after(
        lambda: slack.wait_until(lambda: said(slack, dm_of(ADA), line)), "Hecho.")
    await slack.send("events_api", slack.dm_event(ADA, "pregunta al modelo grande"))
    await slack.wait_until(lambda: said(slack, dm_of(ADA), "Hecho."))
    assert fake_anthropic.responder.seen
