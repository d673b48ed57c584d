"""Each person hears the bot in their own language on WhatsApp (the one they chose with
/language: WhatsApp names no locale): the card and its reply buttons (within WhatsApp's 20
characters), the outcome, a batch's list, the approver's copy in the approver's language, what
a tapper alone is told, a refused sticker and a file too large. The real App and agent, the
channel against the fake Graph API (which refuses what WhatsApp would) and the fake Anthropic
API."""

from __future__ import annotations

from tests.channels.whatsapp.conftest import ADA, BOB, EVE
from tests.channels.whatsapp.test_whatsapp_approvals import SENDERS, button, is_card
from tests.fakes.anthropic_server import reply, text, tool_use
from tests.fakes.whatsapp_server import FakeWhatsApp


async def speak(started, wa: FakeWhatsApp, who: str, language: str, answer: str) -> None:
    await started.driver.text(who, f"/language {language}")
    await wa.wait_for(lambda m: m.to == who and answer in m.text)


async def test_an_italian_card_its_outcome_and_the_spanish_approvers_copy(
        bot, wa, fake_anthropic):
    started = await bot(SENDERS, approvals={"approvers": [f"whatsapp:{EVE}"]})
    await speak(started, wa, ADA, "it", "Con te parlo Italiano")
    await speak(started, wa, EVE, "es", "Contigo hablo Español")
    fake_anthropic.script(reply(tool_use("fs_write", {"path": "nota.txt", "content": "latte"})))
    await started.driver.text(ADA, "scrivi nota.txt")
    card = await wa.wait_for(lambda m: m.to == ADA and is_card(m))
    copy = await wa.wait_for(lambda m: m.to == EVE and is_card(m))
    assert card.text.startswith("🔐 *Approvazione richiesta*\nStrumento: fs_write\n")
    assert "Rischio: 🟠 medio" in card.text and f"Richiesta da: whatsapp:{ADA}" in card.text
    assert "Scade alle " in card.text and len(card.text) <= 1024
    assert card.button_titles() == ["Approva", "Nega", "Sempre"]
    assert "Se necesita aprobación" in copy.text and "Caduca a las " in copy.text
    assert copy.button_titles() == ["Aprobar", "Denegar", "Siempre"]
    assert card.button_ids() == copy.button_ids()      # the ids never follow the language
    fake_anthropic.script(text("Fatto."))
    await started.driver.tap(ADA, button(card, ":a"), card.wamid, title="Approva")
    outcome = await wa.wait_for(lambda m: m.reply_to == card.wamid)
    assert outcome.text.startswith(f"✅ Approvata da whatsapp:{ADA} alle ")
    told = await wa.wait_for(lambda m: m.reply_to == copy.wamid)
    assert told.text.startswith(f"✅ Aprobada por whatsapp:{ADA} a las ")
    await wa.wait_for(lambda m: m.to == ADA and m.text == "Fatto.")
    await started.driver.tap(EVE, button(copy, ":d"), copy.wamid, title="Denegar")
    again = await wa.wait_for(lambda m: m.to == EVE and "ya" in m.text)
    assert again.text == f"Esta solicitud ya fue aprobada por whatsapp:{ADA}."


async def test_a_spanish_batch_list_and_its_cards_fit_whatsapps_limits(bot, wa, fake_anthropic):
    started = await bot(SENDERS)
    await speak(started, wa, ADA, "es", "Contigo hablo Español")
    fake_anthropic.script(reply(tool_use("fs_write", {"path": "a.txt", "content": "A"}),
                                tool_use("fs_write", {"path": "b.txt", "content": "B"})))
    await started.driver.text(ADA, "escribe dos")
    cards = await wa.wait_all(lambda m: m.to == ADA and is_card(m), 2)
    (listing,) = [m for m in wa.to(ADA, "interactive") if m.body["interactive"]["type"] == "list"]
    interactive = listing.body["interactive"]
    assert interactive["header"]["text"].startswith("🔐 Se necesita aprobación: 2 llamadas")
    assert interactive["body"]["text"] == "Responde a las 2 llamadas a la vez, o a cada una " \
        "desde su tarjeta."
    assert interactive["action"]["button"] == "Responder a todas"
    rows = [row["title"] for row in interactive["action"]["sections"][0]["rows"]]
    assert rows == ["Aprobar todas", "Denegar todas"]
    assert "Llamada 1 de 2" in cards[0].text and "Llamada 2 de 2" in cards[1].text
    assert all(t in ("Aprobar", "Denegar", "Siempre") for c in cards for t in c.button_titles())


async def test_a_stale_button_a_sticker_and_a_file_too_large_in_the_persons_language(
        bot, wa, fake_anthropic):
    started = await bot({f"whatsapp:{ADA}": "supervised", f"whatsapp:{BOB}": "supervised"},
                        media={"max_document_bytes": 1000})
    await speak(started, wa, ADA, "it", "Con te parlo Italiano")
    await speak(started, wa, BOB, "es", "Contigo hablo Español")
    await started.driver.tap(ADA, "ap:forged:a", "wamid.somecard")
    stale = await wa.wait_for(lambda m: m.to == ADA and m.reply_to == "wamid.somecard")
    assert stale.text == "Questo pulsante non è più valido."
    await started.driver.media(ADA, "sticker", b"RIFF....WEBP", "image/webp", animated=False)
    sticker = await wa.wait_for(lambda m: m.to == ADA and "sticker" in m.text)
    assert sticker.text == ("⚠️ Non sono riuscito a scaricare uno sticker: posso leggere solo "
                            "testo, foto, documenti e messaggi vocali")
    await started.driver.media(BOB, "document", b"x" * 5000, "text/plain", filename="big.txt")
    large = await wa.wait_for(lambda m: m.to == BOB and "big.txt" in m.text)
    assert large.text.startswith("⚠️ No pude descargar big.txt: pesa ")
    assert large.text.endswith("; el límite es 1 KB") and wa.downloads == []
    assert fake_anthropic.requests == []     # nothing to answer but the refusal: no model call


async def test_an_italian_number_gets_the_installations_language_until_it_chooses(bot, wa):
    # WhatsApp's webhook names no locale, and the country code of a number (+39) is not one:
    # the person hears [agent] language until they choose with /language.
    started = await bot({f"whatsapp:{ADA}": "supervised"}, agent={"language": "es"})
    await started.driver.text(ADA, "/language")
    said = await wa.wait_for(lambda m: m.to == ADA and "Español" in m.text)
    assert said.text.startswith("Contigo hablo Español, como dice tu app o la instalación.")
    await speak(started, wa, ADA, "it", "Con te parlo Italiano")
