"""Each person hears the bot in their own language on Telegram: the app's `language_code`, else
what they chose with /language; an Italian and a Spanish member of one group each get theirs, and
an approver's copy of a request is in the approver's language. The real App and
python-telegram-bot against the fake Bot API and the fake Anthropic API."""

from __future__ import annotations

import pytest

from channels.telegram import TelegramChannel
from tests.channels.telegram.test_telegram_approvals import has_buttons
from tests.fakes.anthropic_server import reply, text, tool_use
from tests.fakes.telegram_server import channel_overrides
from tests.support.telegram_support import FAST

GIULIA, DIEGO, ANN = 4242, 4343, 6666     # Italian, Spanish and English phones
GROUP = -100123


@pytest.fixture
async def bot(app_factory, tg):
    tg.language_codes.update({GIULIA: "it", DIEGO: "es-419", ANN: "en-GB"})
    app = await app_factory(
        {"senders": {f"telegram:{GIULIA}": "supervised", f"telegram:{DIEGO}": "supervised",
                     f"telegram:{ANN}": "full"},
         "approvals": {"approvers": [f"telegram:{DIEGO}"]},
         "agent": {"session_scope": "sender"},
         **channel_overrides(tg, groups=[GROUP])}, env={"TELEGRAM_BOT_TOKEN": tg.token})
    channel = TelegramChannel(app.config, app.agent, settings=FAST)
    await channel.start()
    app.agent.add_approval_surface("telegram", channel)
    app.services.delivery.register("telegram", channel)
    yield app
    await channel.stop()


def texts_in(tg, chat: int) -> list[str]:
    return [m["text"] for (c, _), m in sorted(tg.messages.items(), key=lambda kv: kv[0][1])
            if c == chat]


def labels(call) -> list[str]:
    return [b["text"] for row in call.params["reply_markup"]["inline_keyboard"] for b in row]


def data(call) -> list[str]:
    return [b["callback_data"] for row in call.params["reply_markup"]["inline_keyboard"] for b in row]


async def test_an_italian_and_a_spanish_member_of_one_group_each_get_their_own_language(bot, tg):
    tg.group_message(GROUP, GIULIA, "/start", mention=True)
    await tg.wait_until(lambda: any("Ciao!" in t for t in texts_in(tg, GROUP)))
    tg.group_message(GROUP, DIEGO, "/start", mention=True)
    await tg.wait_until(lambda: any("¡Hola!" in t for t in texts_in(tg, GROUP)))
    tg.private_message(ANN, "/nothing")
    await tg.wait_until(lambda: any("Unknown command /nothing" in t for t in texts_in(tg, ANN)))
    giulia, diego = (next(t for t in texts_in(tg, GROUP) if word in t) for word in ("Ciao", "Hola"))
    assert "telegram:4242" in giulia and "Invia /help per vedere i comandi." in giulia
    assert "telegram:4343" in diego and "Envía /help para ver los comandos." in diego


async def test_a_request_and_its_approvers_copy_each_speak_their_readers_language(
        bot, tg, fake_anthropic):
    app = bot
    tg.private_message(DIEGO, "/whoami")      # the approver's app language becomes known
    await tg.wait_until(lambda: any("Remitente" in t for t in texts_in(tg, DIEGO)))
    fake_anthropic.script(reply(tool_use("fs_write", {"path": "nota.txt", "content": "latte"})))
    tg.private_message(GIULIA, "scrivi nota.txt")
    await tg.wait_until(lambda: len(tg.cards(has_buttons)) == 2)
    copies = {call.params["chat_id"]: call for call in tg.cards(has_buttons)}
    mine, approvers = copies[GIULIA], copies[DIEGO]
    assert "Approvazione richiesta" in mine.params["text"]
    assert "Richiesta da: telegram:4242" in mine.params["text"]
    assert "Rischio: 🟠 medio" in mine.params["text"] and "Crea nota.txt" in mine.params["text"]
    assert labels(mine)[:2] == ["Approva", "Nega"] and labels(mine)[2].startswith("Sempre: ")
    assert "Se necesita aprobación" in approvers.params["text"]
    assert "Solicitada por: telegram:4242" in approvers.params["text"]
    assert "Crear nota.txt" in approvers.params["text"]      # the preview in each reader's words
    assert "+latte" in mine.params["text"] and "+latte" in approvers.params["text"]   # content
    assert labels(approvers)[:2] == ["Aprobar", "Denegar"]
    assert data(mine) == data(approvers)     # the callback data never follows the language
    assert all(len(d.encode()) <= 64 for d in data(mine))
    fake_anthropic.script(text("Fatto."))
    tg.tap(DIEGO, data(approvers)[0], approvers.result)
    answer = await tg.wait_for("answerCallbackQuery")
    assert answer.params["text"] == "Aprobada"

    def edited(call, words: str) -> bool:
        return any(e.params["message_id"] == call.result["message_id"] and words in e.params["text"]
                   for e in tg.of("editMessageText"))
    await tg.wait_until(lambda: edited(mine, "✅ Approvata da") and edited(approvers, "✅ Aprobada por"))
    await tg.wait_until(lambda: "Fatto." in texts_in(tg, GIULIA))
    assert (app.config.workspace / "nota.txt").read_text() == "latte"


async def test_language_overrides_the_apps_language_until_auto(bot, tg):
    tg.private_message(GIULIA, "/language es")
    await tg.wait_until(lambda: any("Contigo hablo Español" in t for t in texts_in(tg, GIULIA)))
    tg.private_message(GIULIA, "/new")
    await tg.wait_until(lambda: "Empezada una conversación nueva." in texts_in(tg, GIULIA))
    tg.private_message(GIULIA, "/language auto")
    await tg.wait_until(lambda: any("Con te parlo Italiano" in t for t in texts_in(tg, GIULIA)))
    tg.private_message(GIULIA, "/language de")
    await tg.wait_until(lambda: any("Parlo English, Italiano, Español" in t
                                    for t in texts_in(tg, GIULIA)))


async def test_the_model_is_told_the_persons_language_and_keeps_its_english_prompt(
        bot, tg, fake_anthropic):
    fake_anthropic.script(text("Ciao!"))
    tg.private_message(GIULIA, "ciao")
    await tg.wait_until(lambda: "Ciao!" in texts_in(tg, GIULIA))
    system = fake_anthropic.last_request.json["system"]
    assert system[0]["text"].startswith("You are myclaw") and "cache_control" in system[0]
    assert "reads Italian: answer in Italian" in system[-1]["text"]
