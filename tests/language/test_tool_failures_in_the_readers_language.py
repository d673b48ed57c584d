"""A tool that fails says why on the call's status line in the reader's language, while the
model reads the same failure in English: the message is a Phrase from the tool to the channel.
The real App and python-telegram-bot against the fake Bot API and the fake model API."""

from __future__ import annotations

from channels.telegram import TelegramChannel
from tests.fakes.anthropic_server import reply, text, tool_results, tool_use
from tests.fakes.telegram_server import channel_overrides
from tests.language.test_walkthrough_in_italian import said_to
from tests.support.telegram_support import FAST

GIULIA = 4242


async def test_a_failed_read_is_told_in_italian_and_the_model_reads_it_in_english(
        app_factory, tg, fake_anthropic):
    tg.language_codes[GIULIA] = "it"
    app = await app_factory({"senders": {f"telegram:{GIULIA}": "supervised"},
                             **channel_overrides(tg)}, env={"TELEGRAM_BOT_TOKEN": tg.token})
    channel = TelegramChannel(app.config, app.agent, settings=FAST)
    await channel.start()
    fake_anthropic.script(reply(tool_use("fs_read", {"path": "spesa.txt"})),
                          text("Non trovo la lista."))
    try:
        tg.private_message(GIULIA, "leggi spesa.txt")
        await tg.wait_until(lambda: "Non trovo la lista." in said_to(tg, GIULIA))
    finally:
        await channel.stop()
    assert "⚠️ fs_read: spesa.txt non esiste nello spazio di lavoro." in said_to(tg, GIULIA)
    (result,) = tool_results(fake_anthropic.last_request.json)
    assert result["is_error"] is True
    assert "spesa.txt does not exist in the workspace." in str(result["content"])


async def test_a_port_this_process_has_not_wired_is_named_in_the_readers_language():
    from bot.core.tool import Ports
    from bot.language.catalogs import translator
    from bot.toolbox.failures import to_tool_error

    for port in ("memory", "model", "quota", "jobs"):
        try:
            await getattr(Ports(), port).anything()
        except Exception as exc:   # what the toolbox is handed
            error = to_tool_error(exc, "some_tool")
        assert error.kind == "unsupported"
        english = translator("en").say(error.message)
        assert english.endswith("is not available here."), english
        assert "disponibil" in translator("it").say(error.message)
        assert "disponible" in translator("es").say(error.message)
