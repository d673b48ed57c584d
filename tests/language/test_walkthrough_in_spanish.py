"""A Spanish-speaking person on Discord (their client in Spanish: the interaction locale of
their first slash command, /whoami) goes through /start, a question, an approval tapped with the
buttons, a budget notice and a reminder, and not one English word reaches them from the bot
(beyond tool names, commands and content). The real App and discord.py against the fake
Discord and the fake Anthropic API; the reminder comes due on an injected clock."""

from __future__ import annotations

from typing import Any

import pytest

from bot.jobs.runner import AgentJobRunner
from bot.jobs.scheduler import Scheduler
from channels import discord as discord_bot
from tests.fakes.anthropic_server import reply, text, tool_use
from tests.fakes.discord_server import FakeDiscord
from tests.language.test_walkthrough_in_italian import Clock, costing, english_words

DIEGO, DIEGO_DM = 4_300_000_000_000_001, 6_300_000_000_000_001
SPANISH_TOO = {"has", "no"}   # Spanish words as well ("has escrito")


@pytest.fixture
async def discord_fake():
    async with FakeDiscord() as fake:
        with fake.patched():
            yield fake


def said_by_bot(fake: FakeDiscord) -> list[str]:
    """Every text the bot sent: messages, edits, interaction answers and button labels."""
    texts: list[str] = []

    def collect(body: Any) -> None:
        if isinstance(body, dict):
            for key in ("content", "label", "title", "description"):
                if isinstance(body.get(key), str):
                    texts.append(body[key])
            for value in body.values():
                collect(value)
        elif isinstance(body, list):
            for item in body:
                collect(item)
    for request in fake.requests:
        if request.method in ("POST", "PATCH") and "/commands" not in request.path:
            collect(request.json)
    return texts


async def test_a_spanish_persons_first_minutes_on_discord_have_no_english_word_from_the_bot(
        app_factory, discord_fake, fake_anthropic):
    app = await app_factory({"senders": {f"discord:{DIEGO}": "supervised"},
                             "budgets": {"sender_daily": 2.0, "sender_monthly": 0,
                                         "global_daily": 0},
                             "discord": {"guild_ready_timeout": 0.05}},
                            env={"DISCORD_BOT_TOKEN": discord_fake.token})
    channel = discord_bot.create(app.config, app.agent)
    await channel.start()
    app.services.delivery.register("discord", channel)
    model_said = ("¡Bien, gracias!", "Hecho, nota escrita.", "Te lo recordaré.",
                  "Bebe un vaso de agua", "agua")
    try:
        await discord_fake.slash(name="whoami", user_id=DIEGO, channel_id=DIEGO_DM,
                                 locale="es-ES")       # the client's language becomes known
        await discord_fake.wait_for(lambda: any("Remitente" in t for t in said_by_bot(discord_fake)))
        await discord_fake.send_message(author_id=DIEGO, content="/start", channel_id=DIEGO_DM)
        await discord_fake.wait_for(lambda: any("¡Hola!" in t for t in said_by_bot(discord_fake)))

        fake_anthropic.script(costing(1.65, text(model_said[0])))
        await discord_fake.send_message(author_id=DIEGO, content="hola, ¿qué tal?",
                                        channel_id=DIEGO_DM)
        await discord_fake.wait_for(lambda: any("Atención:" in t or "Aviso:" in t
                                                for t in said_by_bot(discord_fake)))

        fake_anthropic.script(reply(tool_use("fs_write", {"path": "nota.txt",
                                                          "content": "leche\n"})))
        await discord_fake.send_message(author_id=DIEGO, content="escribe leche en nota.txt",
                                        channel_id=DIEGO_DM)
        card = await discord_fake.wait_for_buttons(DIEGO_DM)
        fake_anthropic.script(text(model_said[1]))
        approve = next(b["custom_id"] for row in card["components"] for b in row["components"]
                       if b["label"] == "Aprobar")
        await discord_fake.click(message_id=int(card["id"]), custom_id=approve, user_id=DIEGO,
                                 locale="es-ES")
        await discord_fake.wait_for(lambda: model_said[1] in said_by_bot(discord_fake))

        fake_anthropic.script(reply(tool_use("schedule", {
            "action": "create", "name": "agua", "at": "in 2 minutes",
            "message": model_said[3]})), text(model_said[2]))
        await discord_fake.send_message(author_id=DIEGO, content="recuérdame beber en 2 minutos",
                                        channel_id=DIEGO_DM)
        await discord_fake.wait_for(lambda: model_said[2] in said_by_bot(discord_fake))
        clock = Clock()
        clock.now += 180
        scheduler = Scheduler(app.services.jobs, AgentJobRunner(
            app.agent, app.services.delivery, app.services.senders), clock)
        assert await scheduler.tick() == 1
        await scheduler.drain()
        await discord_fake.wait_for(lambda: any(model_said[3] in t
                                                for t in said_by_bot(discord_fake)))
    finally:
        await channel.stop()
    shown = said_by_bot(discord_fake)
    assert any("Crear nota.txt" in t for t in shown)
    found = [w for w in english_words(shown, (*model_said, "discord:" + str(DIEGO)))
             if w.lower() not in SPANISH_TOO]
    assert found == [], (found, shown)
