"""Expiry you can see: a request nobody answers in time is closed where people look — its
Telegram message edited to "Expired — nothing ran" without buttons, the requester told, the model
given a result — also when it lapsed while the bot was down. Clock injected; no sleeping."""

from __future__ import annotations

from bot.app import App
from channels.telegram import TelegramChannel
from tests.channels.telegram.test_telegram_approvals import ADA, has_buttons
from tests.conftest import FAKE_ENV, make_config
from tests.fakes.anthropic_server import reply, text, tool_use
from tests.fakes.telegram_server import channel_overrides
from tests.jobs.test_jobs import Clock
from tests.support.telegram_support import FAST


async def open_bot(tmp_path, tg, fake_anthropic, clock):
    env = {**FAKE_ENV, "ANTHROPIC_BASE_URL": fake_anthropic.base_url, "TELEGRAM_BOT_TOKEN": tg.token}
    config = make_config(tmp_path, {"senders": {f"telegram:{ADA}": "supervised"},
                                    **channel_overrides(tg)}, env=env)
    app = await App.open(config, clock=clock)
    channel = TelegramChannel(app.config, app.agent, settings=FAST)
    await channel.start()
    app.agent.add_approval_surface("telegram", channel)
    app.services.delivery.register("telegram", channel)
    return app, channel


async def ask(tg, fake_anthropic):
    fake_anthropic.script(reply(tool_use("fs_write", {"path": "a.txt", "content": "x"})))
    tg.private_message(ADA, "write a.txt")
    return await tg.wait_for_card(has_buttons)


def expired_edit(tg, request) -> bool:
    return any(c.params.get("message_id") == request.result["message_id"]
               and "Expired" in c.params.get("text", "") for c in tg.of("editMessageText"))


async def test_a_lapsed_request_is_edited_the_requester_told_and_the_model_given_a_result(
        tmp_path, tg, fake_anthropic):
    clock = Clock()
    app, channel = await open_bot(tmp_path, tg, fake_anthropic, clock)
    try:
        request = await ask(tg, fake_anthropic)
        clock.now += 299
        assert await app.expiry.sweep() == 0
        clock.now += 2
        assert await app.expiry.sweep() == 1
        await app.agent.queue.drain(5)
        edit = await tg.wait_for("editMessageText", lambda p: "Expired" in p["text"])
        assert edit.params["message_id"] == request.result["message_id"]
        assert "nothing ran" in edit.params["text"] and "reply_markup" not in edit.params
        await tg.wait_for("sendMessage", lambda p: "expired — nothing ran" in p["text"])
        assert not (app.config.workspace / "a.txt").exists()
        assert await app.expiry.sweep() == 0          # closed once
        # The next message works, and the model saw that the call did not run.
        fake_anthropic.script(text("OK, I did not write it."))
        tg.private_message(ADA, "never mind")
        await tg.wait_until(lambda: any(m["text"] == "OK, I did not write it."
                                        for m in tg.messages.values()))
        messages = fake_anthropic.requests[-1].json["messages"]
        results = [b for m in messages for b in m["content"]
                   if isinstance(b, dict) and b.get("type") == "tool_result"]
        assert "not approved in time" in results[-1]["content"]
    finally:
        await channel.stop()
        await app.close()


async def test_a_request_that_lapsed_while_the_bot_was_down_is_closed_at_start_up(
        tmp_path, tg, fake_anthropic):
    clock = Clock()
    app, channel = await open_bot(tmp_path, tg, fake_anthropic, clock)
    request = await ask(tg, fake_anthropic)
    await channel.stop()
    await app.close()
    clock.now += 3600                                   # down for an hour
    app, channel = await open_bot(tmp_path, tg, fake_anthropic, clock)
    try:
        assert await app.expiry.sweep() == 1
        await app.agent.queue.drain(5)
        await tg.wait_until(lambda: expired_edit(tg, request))
        await tg.wait_for("sendMessage", lambda p: "expired — nothing ran" in p["text"])
    finally:
        await channel.stop()
        await app.close()


async def test_a_tap_after_the_expiry_is_refused_and_closes_the_request_for_everyone(
        tmp_path, tg, fake_anthropic):
    from tests.channels.telegram.test_telegram_approvals import data_of

    clock = Clock()
    app, channel = await open_bot(tmp_path, tg, fake_anthropic, clock)
    try:
        request = await ask(tg, fake_anthropic)
        clock.now += 301
        tg.tap(ADA, data_of(request, "Approve"), request.result)
        await tg.wait_for("answerCallbackQuery", lambda p: "expired" in p.get("text", ""))
        await tg.wait_until(lambda: expired_edit(tg, request))
        await app.agent.queue.drain(5)
        assert not (app.config.workspace / "a.txt").exists()
        assert await app.expiry.sweep() == 0
    finally:
        await channel.stop()
        await app.close()
