"""An Italian-speaking person on Telegram goes through the first minutes with the bot — /start,
a question, an approval, a budget notice, a reminder — and not one English word reaches them
from the bot (beyond tool names, commands and content). The real App and python-telegram-bot
against the fake Bot API and the fake Anthropic API; the reminder comes due on an injected
clock."""

from __future__ import annotations

import re
import time

from bot.jobs.runner import AgentJobRunner
from bot.jobs.scheduler import Scheduler
from channels.telegram import TelegramChannel
from tests.channels.telegram.test_telegram_approvals import has_buttons
from tests.fakes.anthropic_server import reply, text, tool_use
from tests.fakes.telegram_server import channel_overrides
from tests.support.telegram_support import FAST

GIULIA = 4242
# Words that are English and not Italian ("budget" and "file" are Italian too): any of them in
# what the bot wrote is a word that bypassed the catalog.
ENGLISH = frozenset("""
the you your is are was were will would this that with have has been not what when which who
approval approved needed requested requests expires expired used resets reminder tools
tool risk files write create overwrite lines send run next today only please again allow
deny always cancel done failed skipped hours minutes day days month here from into about after
before approve requested by change changed now sent answer nothing waiting schedule scheduled
""".split())
CONTENT = ("fs_write", "schedule", "nota.txt", "telegram:4242", "/help", "/new", "/start",
           "/approve", "/deny")


def costing(dollars: float, *parts):
    tokens = round(dollars / 15 * 1_000_000)
    return reply(*parts, usage={"input_tokens": 0, "output_tokens": tokens,
                                "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0})


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def said_to(tg, chat: int) -> list[str]:
    """Everything the bot wrote to `chat`: messages, their edits, button labels, tap answers."""
    texts = [c.params["text"] for c in tg.calls
             if c.method in ("sendMessage", "editMessageText") and
             str(c.params.get("chat_id")) == str(chat)]
    texts += [b["text"] for c in tg.calls if str(c.params.get("chat_id")) == str(chat)
              for row in (c.params.get("reply_markup") or {}).get("inline_keyboard", [])
              for b in row]
    texts += [c.params.get("text", "") for c in tg.of("answerCallbackQuery")]
    return texts


def english_words(texts: list[str], model_said: tuple[str, ...]) -> list[str]:
    found = []
    for shown in texts:
        for content in (*CONTENT, *model_said):
            shown = shown.replace(content, " ")
        shown = re.sub(r"<[^>]+>", " ", shown)
        found += [w for w in re.findall(r"[A-Za-z]+", shown) if w.lower() in ENGLISH]
    return found


async def test_an_italian_persons_first_minutes_have_no_english_word_from_the_bot(
        app_factory, tg, fake_anthropic):
    tg.language_codes[GIULIA] = "it"
    app = await app_factory({"senders": {f"telegram:{GIULIA}": "supervised"},
                             "budgets": {"sender_daily": 2.0, "sender_monthly": 0,
                                         "global_daily": 0},
                             **channel_overrides(tg)}, env={"TELEGRAM_BOT_TOKEN": tg.token})
    channel = TelegramChannel(app.config, app.agent, settings=FAST)
    await channel.start()
    app.agent.add_approval_surface("telegram", channel)
    app.services.delivery.register("telegram", channel)
    model_said = ("Bene, grazie! Tu?", "Fatto, ho scritto la nota.", "Ti ricorderò di bere.",
                  "Bevi un bicchiere d'acqua", "acqua")
    try:
        tg.private_message(GIULIA, "/start")
        await tg.wait_until(lambda: any("Ciao!" in t for t in said_to(tg, GIULIA)))

        fake_anthropic.script(costing(1.65, text(model_said[0])))       # 82% of today's budget
        tg.private_message(GIULIA, "ciao, come stai?")
        await tg.wait_until(lambda: any("Attenzione:" in t for t in said_to(tg, GIULIA)))

        fake_anthropic.script(reply(tool_use("fs_write", {"path": "nota.txt",
                                                          "content": "latte\n"})))
        tg.private_message(GIULIA, "scrivi latte in nota.txt")
        await tg.wait_until(lambda: len(tg.cards(has_buttons)) == 1)
        (card,) = tg.cards(has_buttons)
        fake_anthropic.script(text(model_said[1]))
        approve = card.params["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        tg.tap(GIULIA, approve, card.result)
        await tg.wait_until(lambda: model_said[1] in said_to(tg, GIULIA))

        fake_anthropic.script(reply(tool_use("schedule", {
            "action": "create", "name": "acqua", "at": "in 2 minutes",
            "message": model_said[3]})), text(model_said[2]))
        tg.private_message(GIULIA, "ricordami di bere tra 2 minuti")
        await tg.wait_until(lambda: model_said[2] in said_to(tg, GIULIA))
        clock = Clock()
        clock.now += 180
        scheduler = Scheduler(app.services.jobs, AgentJobRunner(
            app.agent, app.services.delivery, app.services.senders), clock)
        assert await scheduler.tick() == 1
        await scheduler.drain()
        await tg.wait_until(lambda: any(model_said[3] in t for t in said_to(tg, GIULIA)))
    finally:
        await channel.stop()
    shown = said_to(tg, GIULIA)
    assert any("Crea nota.txt" in t for t in shown) and any("Approva" in t for t in shown)
    found = english_words(shown, model_said)
    assert found == [], (found, shown)
