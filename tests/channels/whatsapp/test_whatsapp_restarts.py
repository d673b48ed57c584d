"""WhatsApp after a process restart, on both store backends: what the bot sent is in the store,
so a `failed` status Meta reports afterwards is still retried (rate limits, once) or told to the
person, a reply quoting a reminder sent before the restart is read with its opening, and a
pending approval's button works in the new process. Each
restart is a new App on the same store: nothing survives in memory."""

from __future__ import annotations

from tests.channels.whatsapp.conftest import ADA, whatsapp_env, whatsapp_overrides
from tests.channels.whatsapp.test_whatsapp_approvals import ask_to_write, button
from tests.fakes.anthropic_server import text
from tests.support.pg_support import on_both_backends

backend_name = on_both_backends()
CONFIG = {"senders": {f"whatsapp:{ADA}": "supervised"}}


async def restarted(bot, app_factory, wa, started):
    """Stop `started`'s App and start a new one on the same store."""
    await started.app.stop_channels()
    await started.app.close()
    app = await app_factory({**CONFIG, **whatsapp_overrides(wa)}, env=whatsapp_env(wa))
    assert app is not started.app
    return await bot(app=app)


async def answered_hello(bot, wa):
    started = await bot(CONFIG["senders"])
    await started.driver.text(ADA, "hello")
    sent = await wa.wait_for(lambda m: m.to == ADA and m.text == "ok: hello")
    await started.channel.intake.idle()      # the turn ended: its row is done
    return started, sent


async def test_a_rate_limited_failure_reported_after_a_restart_is_sent_again_once(
        bot, app_factory, wa, fake_anthropic):
    started, sent = await answered_hello(bot, wa)
    again = await restarted(bot, app_factory, wa, started)
    await again.driver.status(sent.wamid, ADA, "failed", 130429, "Rate limit hit")
    resent = await wa.wait_for(lambda m: m.to == ADA and m.text == "ok: hello", count=2)
    assert resent.body == sent.body and resent.wamid != sent.wamid
    # The copy failed too: it was a retry already, so it is held and told, not sent a third time.
    await again.driver.status(resent.wamid, ADA, "failed", 130429, "Rate limit hit")
    await again.channel.intake.idle()
    assert wa.texts_to(ADA) == ["ok: hello", "ok: hello"]
    await again.driver.text(ADA, "still there?")
    await wa.wait_for(lambda m: m.to == ADA and m.text == "ok: still there?")
    report = wa.texts_to(ADA)[2]
    assert report.startswith("My last message did not reach you") and "ok: hello" in report


async def test_a_failure_reported_after_a_restart_is_told_when_the_person_writes_again(
        bot, app_factory, wa, fake_anthropic):
    started, sent = await answered_hello(bot, wa)
    again = await restarted(bot, app_factory, wa, started)
    await again.driver.status(sent.wamid, ADA, "failed", 131026, "Message undeliverable")
    await again.channel.intake.idle()
    await again.driver.text(ADA, "did you answer?")
    await wa.wait_for(lambda m: m.to == ADA and m.text == "ok: did you answer?")
    report = wa.texts_to(ADA)[1]
    assert report.startswith("My last message did not reach you") and "ok: hello" in report
    assert "Message undeliverable" in report


async def test_a_reply_quoting_a_reminder_sent_before_the_restart_is_read_with_its_opening(
        bot, app_factory, wa, fake_anthropic):
    started, _ = await answered_hello(bot, wa)
    wamid = await started.channel._messenger.send_markdown(ADA, "Reminder: call the bank",
                                                           kind="reminder")
    again = await restarted(bot, app_factory, wa, started)
    await again.driver.text(ADA, "what did you mean?", context={"from": "15550100", "id": wamid[0]})
    await wa.wait_for(lambda m: m.to == ADA and m.text.startswith("ok: "), count=2)
    seen = str(fake_anthropic.last_request.json["messages"][-1]["content"])
    # The bot's own earlier words, passed on as a quote: data, not the person's request.
    assert "Reminder: call the bank" in seen and "<untrusted-" in seen


async def test_a_pending_approval_is_answered_by_its_button_in_a_new_process(
        bot, app_factory, wa, fake_anthropic):
    started = await bot(CONFIG["senders"])
    card = await ask_to_write(started, wa, fake_anthropic)
    await started.channel.intake.idle()
    again = await restarted(bot, app_factory, wa, started)
    fake_anthropic.script(text("Written in the new process."))
    await again.driver.tap(ADA, button(card, ":a"), card.wamid)
    await wa.wait_for(lambda m: m.to == ADA and m.text == "Written in the new process.")
    assert (again.app.config.workspace / "notes.txt").read_text() == "milk"
    assert len(await again.app.services.store.fetchall("SELECT * FROM receipts")) == 1
