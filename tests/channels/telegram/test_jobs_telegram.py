"""Jobs on Telegram end to end: /jobs with a Cancel button per job, a tap that cancels, and a
due reminder posted into the owner's chat — the real App, python-telegram-bot and the fake
Bot API, with the scheduler driven by an injected clock."""

from __future__ import annotations

import pytest

from bot.app import App
from bot.jobs.jobs import Job
from bot.jobs.runner import AgentJobRunner
from bot.jobs.schedule import parse_at, parse_cron
from bot.jobs.scheduler import Scheduler
from channels.telegram import TelegramChannel
from tests.conftest import FAKE_ENV, make_config
from tests.fakes.telegram_server import channel_overrides
from tests.jobs.test_jobs import START, Clock
from tests.support.telegram_support import FAST

ADA, EVE = 4242, 6666


@pytest.fixture
async def bot(tmp_path, tg, fake_anthropic):
    clock = Clock()
    env = {**FAKE_ENV, "ANTHROPIC_BASE_URL": fake_anthropic.base_url,
           "TELEGRAM_BOT_TOKEN": tg.token}
    overrides = {"senders": {f"telegram:{ADA}": "full", f"telegram:{EVE}": "full"},
                 **channel_overrides(tg)}
    app = await App.open(make_config(tmp_path, overrides, env=env), clock=clock)
    channel = TelegramChannel(app.config, app.agent, settings=FAST)
    await channel.start()
    app.services.delivery.register("telegram", channel)
    yield app, channel, clock
    await channel.stop()
    await app.close()


def buttons_of(params: dict) -> list[dict]:
    markup = params.get("reply_markup") or {}
    return [button for row in markup.get("inline_keyboard", []) for button in row]


async def test_slash_jobs_shows_a_cancel_button_per_job_and_a_tap_cancels_it(bot, tg):
    app, _, _ = bot
    job = await app.services.jobs.create(Job(
        id="", owner=f"telegram:{ADA}", channel="telegram", chat=str(ADA), name="standup",
        schedule=parse_cron("0 9 * * 1-5", timezone="UTC"), level="full", message="standup!"))
    tg.private_message(ADA, "/jobs", entities=[{"type": "bot_command", "offset": 0, "length": 5}])
    listing = await tg.wait_for("sendMessage", lambda p: "standup" in p["text"])
    (button,) = buttons_of(listing.params)
    assert button["text"] == "Cancel: standup"
    # Somebody else tapping the same button acts as themselves: not their job, nothing changes.
    tg.tap(EVE, button["callback_data"], listing.result, name="Eve")
    await tg.wait_for("sendMessage", lambda p: "Cannot cancel" in p["text"])
    assert (await app.services.jobs.get(job.id)).status == "active"
    tg.tap(ADA, button["callback_data"], listing.result)
    await tg.wait_for("sendMessage", lambda p: "'standup' cancelled" in p["text"])
    assert (await app.services.jobs.get(job.id)).status == "cancelled"


async def test_a_due_reminder_is_posted_in_the_owners_chat(bot, tg):
    app, _, clock = bot
    await app.services.jobs.create(Job(
        id="", owner=f"telegram:{ADA}", channel="telegram", chat=str(ADA), name="stretch",
        schedule=parse_at("in 2 minutes", now=START, timezone="UTC"), level="full",
        message="Time to stretch!"))
    runner = AgentJobRunner(app.agent, app.services.delivery, app.services.senders)
    scheduler = Scheduler(app.services.jobs, runner, clock)
    clock.now = START + 121
    assert await scheduler.tick() == 1
    await scheduler.drain()
    sent = await tg.wait_for("sendMessage", lambda p: "Time to stretch!" in p["text"])
    assert sent.params["chat_id"] == ADA and sent.params["text"].startswith("⏰ stretch")


async def test_a_forged_command_button_from_another_chat_only_acts_as_its_tapper(bot, tg):
    app, _, _ = bot
    await app.services.jobs.create(Job(
        id="", owner=f"telegram:{ADA}", channel="telegram", chat=str(ADA), name="mine",
        schedule=parse_cron("0 9 * * *", timezone="UTC"), level="full", message="m"))
    tg.private_message(EVE, "hello there")
    message = {"message_id": 77, "date": 0, "chat": {"id": EVE, "type": "private"},
               "text": "x"}
    tg.tap(EVE, "c:/jobs", message, name="Eve")
    reply_ = await tg.wait_for("sendMessage", lambda p: "no scheduled jobs" in p["text"])
    assert reply_.params["chat_id"] == EVE
