"""A tool's progress line is said in the reader's language on every channel that shows one: a
built-in tool reports progress as a Phrase (supra_llm's "Asking {model}…"), each channel's
status line renders it for its reader, and a custom tool's plain text is shown as written.
WhatsApp shows no progress (its typing indicator says the agent is working); Slack's is in
tests/channels/slack/test_slack_languages.py."""

from __future__ import annotations

import io

from bot.core.events import Done, ToolProgress, ToolStarted
from bot.language.phrase import Phrase
from channels.cli.channel import TerminalChannel
from channels.telegram import TelegramChannel
from tests.channels.discord.test_discord_channel import (  # noqa: F401 (fixtures)
    USER,
    USER_DM,
    ScriptedAgent,
    discord_fake,
    start,
)
from tests.fakes.anthropic_server import reply, tool_use
from tests.fakes.telegram_server import channel_overrides
from tests.language.test_walkthrough_in_italian import said_to
from tests.support.languages import ES, IT
from tests.support.telegram_support import FAST

GIULIA = 4242
SUPRA = "claude-opus-5-5"   # [agent] supra_model of the tests' configuration
ASKING = Phrase("Asking {model}…", model=SUPRA)


def answering_after(shown, answer: str = "Fatto."):
    """A model responder that holds the stronger model's answer until `shown()` (the progress
    line is on the screen), so the line is not replaced before anyone sees it; `responder.seen`
    says whether it was."""
    async def responder(body):
        if body["model"] == SUPRA:
            await shown()
            responder.seen = True
            return "42"
        return answer
    responder.seen = False
    return responder


async def test_supra_llms_progress_reaches_an_italian_telegram_user_in_italian(
        app_factory, tg, fake_anthropic):
    tg.language_codes[GIULIA] = "it"
    app = await app_factory({"senders": {f"telegram:{GIULIA}": "supervised"},
                             **channel_overrides(tg)}, env={"TELEGRAM_BOT_TOKEN": tg.token})
    channel = TelegramChannel(app.config, app.agent, settings=FAST)
    await channel.start()
    line = f"⚙️ supra_llm: Chiedo a {SUPRA}…"
    fake_anthropic.script(reply(tool_use("supra_llm", {"question": "6 per 7?"})))
    fake_anthropic.responder = answering_after(
        lambda: tg.wait_until(lambda: line in said_to(tg, GIULIA)))
    try:
        tg.private_message(GIULIA, "chiedi al modello grande")
        await tg.wait_until(lambda: "Fatto." in said_to(tg, GIULIA))
    finally:
        await channel.stop()
    assert fake_anthropic.responder.seen and line in said_to(tg, GIULIA)


class ItalianAgent(ScriptedAgent):
    def translator(self, reader, hint=""):
        return IT


async def test_a_discord_status_line_says_a_tools_progress_in_the_readers_language(
        start, discord_fake):  # noqa: F811
    await start(ItalianAgent(ToolStarted("c1", "supra_llm", {}), ToolProgress("c1", "supra_llm", ASKING),
                             Done("Ecco.")))
    await discord_fake.send_message(author_id=USER, content="chiedi", channel_id=USER_DM)
    await discord_fake.wait_for_text(USER_DM, f"⚙️ `supra_llm` — Chiedo a {SUPRA}…")


class SpanishTerminal:
    """What the terminal asks of the agent here: the reader's translator."""

    def translator(self, reader, hint=""):
        return ES


async def test_the_terminal_says_a_tools_progress_in_its_language_and_a_custom_tools_as_written():
    out = io.StringIO()
    sink = TerminalChannel(SpanishTerminal(), stdin=io.StringIO(""), stdout=out).sink
    await sink.emit(ToolProgress("c1", "supra_llm", ASKING))
    await sink.emit(ToolProgress("c2", "my_tool", "Scanning 120 files…"))
    assert f"Consultando a {SUPRA}…" in out.getvalue()
    assert "Scanning 120 files…" in out.getvalue()
