"""Approvers are told: each approver gets a private copy of a request they may answer; the first
tap on any copy wins (20 concurrent taps: one outcome, one execution) and every copy then shows
the outcome. The real App and python-telegram-bot against the fake Bot API."""

from __future__ import annotations

import pytest

from channels.telegram import TelegramChannel
from tests.channels.telegram.test_telegram_approvals import data_of, has_buttons
from tests.fakes.anthropic_server import reply, text, tool_use
from tests.fakes.telegram_server import channel_overrides
from tests.support.telegram_support import FAST

ADA, BOB, EVE = 4242, 4343, 6666


@pytest.fixture
async def bot(app_factory, tg):
    app = await app_factory(
        {"senders": {f"telegram:{ADA}": "supervised", f"telegram:{BOB}": "full",
                     f"telegram:{EVE}": "full"},
         "approvals": {"approvers": [f"telegram:{BOB}", f"telegram:{EVE}"]},
         **channel_overrides(tg)}, env={"TELEGRAM_BOT_TOKEN": tg.token})
    channel = TelegramChannel(app.config, app.agent, settings=FAST)
    await channel.start()
    app.agent.add_approval_surface("telegram", channel)
    app.services.delivery.register("telegram", channel)
    yield app
    await channel.stop()


async def test_every_approver_gets_a_copy_and_twenty_taps_give_one_outcome_on_every_copy(
        bot, tg, fake_anthropic):
    app = bot
    fake_anthropic.script(reply(tool_use("fs_write", {"path": "a.txt", "content": "x"})))
    tg.private_message(ADA, "write a.txt")
    await tg.wait_until(lambda: len(tg.cards(has_buttons)) == 3)
    copies = {call.params["chat_id"]: call for call in tg.cards(has_buttons)}
    assert set(copies) == {ADA, BOB, EVE}
    fake_anthropic.script(text("Written."))
    tappers = [ADA, BOB, EVE]
    for n in range(20):
        who = tappers[n % 3]
        choice = "Approve" if n % 2 == 0 else "Deny"
        tg.tap(who, data_of(copies[who], choice), copies[who].result)
    await tg.wait_for("answerCallbackQuery", count=20)
    await app.agent.queue.drain(5)
    receipts = await app.services.store.fetchall("SELECT * FROM receipts")
    written = (app.config.workspace / "a.txt").exists()
    assert len(receipts) == (1 if written else 0)
    request_id = data_of(copies[ADA], "Approve").split(":")[1]
    stored = await app.services.approvals.get(request_id)
    assert stored.status in ("executed", "denied")
    outcome = "Approved" if stored.status == "executed" else "Denied"

    def shows_outcome(chat: int) -> bool:
        message_id = copies[chat].result["message_id"]
        return any(c.params["message_id"] == message_id and outcome in c.params["text"]
                   and "reply_markup" not in c.params for c in tg.of("editMessageText"))
    await tg.wait_until(lambda: all(shows_outcome(chat) for chat in (ADA, BOB, EVE)))


async def test_without_notify_approvers_only_the_requester_sees_the_request(
        app_factory, tg, fake_anthropic):
    app = await app_factory(
        {"senders": {f"telegram:{ADA}": "supervised"},
         "approvals": {"approvers": [f"telegram:{BOB}"], "notify_approvers": False},
         **channel_overrides(tg)}, env={"TELEGRAM_BOT_TOKEN": tg.token})
    channel = TelegramChannel(app.config, app.agent, settings=FAST)
    await channel.start()
    app.services.delivery.register("telegram", channel)
    try:
        fake_anthropic.script(reply(tool_use("fs_write", {"path": "a.txt", "content": "x"})))
        tg.private_message(ADA, "write a.txt")
        await tg.wait_for_card(has_buttons)
        await app.agent.queue.drain(5)
        assert [c.params["chat_id"] for c in tg.cards(has_buttons)] == [ADA]
    finally:
        await channel.stop()
