"""WhatsApp's 24-hour window end to end: a reminder due when the person has not written for a
day goes out as the configured template, or, without one, is held, recorded as not delivered
(job record, `myclaw jobs list`) and said first when the person writes again; approver copies
likewise; rate limits retried and failed deliveries reported, never dropped silently."""

from __future__ import annotations

import argparse
import logging
import time

import pytest

from bot.jobs.jobs import Job
from bot.jobs.runner import AgentJobRunner
from bot.jobs.schedule import parse_at
from bot.jobs.scheduler import Scheduler
from bot.ops.cli.jobs import jobs_list
from channels.whatsapp import graph, texts
from channels.whatsapp.graph import Graph
from channels.whatsapp.sending import Messenger, OutsideWindow
from tests.channels.whatsapp.conftest import ADA, EVE
from tests.channels.whatsapp.test_whatsapp_approvals import ask_to_write, button, is_card
from tests.fakes.anthropic_server import text
from tests.jobs.test_jobs import Clock

DAY = 24 * 3600
OWNER = {f"whatsapp:{ADA}": "full"}


async def run_reminder(app, message: str = "Time to stretch!") -> Job:
    clock = Clock(time.time())
    job = await app.services.jobs.create(Job(
        id="", owner=f"whatsapp:{ADA}", channel="whatsapp", chat=ADA, name="stretch",
        schedule=parse_at("in 2 minutes", now=clock.now, timezone="UTC"), level="full",
        message=message))
    scheduler = Scheduler(app.services.jobs,
                          AgentJobRunner(app.agent, app.services.delivery, app.services.senders),
                          clock)
    clock.now += 121
    assert await scheduler.tick() == 1
    await scheduler.drain()
    return await app.services.jobs.get(job.id)


async def test_a_reminder_outside_the_window_goes_out_as_its_template(bot, wa):
    wa.templates.add("myclaw_reminder")
    wa.opened(ADA, time.time() - DAY - 60)
    started = await bot(OWNER, whatsapp={"templates": {"reminder": "myclaw_reminder"}})
    job = await run_reminder(started.app)
    (template,) = wa.to(ADA, "template")
    assert template.body["template"]["name"] == "myclaw_reminder"
    assert "Time to stretch!" in template.text and "\n" not in template.text
    assert job.last_outcome == "ok: reminder sent"
    assert [code for code, _ in wa.refused] == [131047]   # free-form first, as Meta decides


async def test_a_reminder_outside_the_window_without_a_template_is_held_and_said_later(
        bot, wa, fake_anthropic, capsys):
    started = await bot(OWNER)
    job = await run_reminder(started.app)
    assert wa.to(ADA) == []
    assert job.last_outcome == f"failed: {texts.NOT_DELIVERED}"
    await jobs_list(argparse.Namespace(all=True), started.app.config)   # a one-shot job is done
    assert texts.NOT_DELIVERED in capsys.readouterr().out
    await started.driver.text(ADA, "good morning")
    await wa.wait_for(lambda m: m.to == ADA and m.text == "ok: good morning")
    first, answer = wa.texts_to(ADA)
    assert answer == "ok: good morning"
    assert first.startswith(texts.HELD_INTRO) and "Time to stretch!" in first
    await started.driver.text(ADA, "again")
    await wa.wait_for(lambda m: m.to == ADA and m.text == "ok: again")
    assert len([t for t in wa.texts_to(ADA) if "Time to stretch!" in t]) == 1   # said once


async def test_an_approver_copy_outside_the_window_uses_the_approval_template_then_the_card(
        bot, wa, fake_anthropic):
    wa.templates.add("myclaw_approval")
    started = await bot({f"whatsapp:{ADA}": "supervised"},
                        approvals={"approvers": [f"whatsapp:{EVE}"]},
                        whatsapp={"templates": {"approval": "myclaw_approval"}})
    await ask_to_write(started, wa, fake_anthropic)
    template = await wa.wait_for(lambda m: m.to == EVE and m.type == "template")
    assert "fs_write" in template.text and "Reply to this message" in template.text
    await started.driver.text(EVE, "show me")
    card = await wa.wait_for(lambda m: m.to == EVE and is_card(m))
    fake_anthropic.script(text("Written."))
    await started.driver.tap(EVE, button(card, ":a"), card.wamid)
    await wa.wait_for(lambda m: m.to == ADA and m.text == "Written.")


async def test_a_rate_limited_reply_is_retried_and_delivered_once(bot, wa, fake_anthropic):
    started = await bot()
    wa.rate_limit(2)
    await started.driver.text(ADA, "hello")
    await wa.wait_for(lambda m: m.to == ADA and m.text == "ok: hello")
    assert [code for code, _ in wa.refused] == [130429, 130429]
    assert wa.texts_to(ADA) == ["ok: hello"]


async def test_a_failed_status_for_a_reply_is_reported_when_the_person_writes_again(
        bot, wa, fake_anthropic, caplog):
    started = await bot()
    await started.driver.text(ADA, "hello")
    sent = await wa.wait_for(lambda m: m.to == ADA and m.text == "ok: hello")
    with caplog.at_level(logging.WARNING, logger="channels.whatsapp"):
        await started.driver.status(sent.wamid, ADA, "failed", 131026, "Message undeliverable")
        await started.channel.intake.idle()
    assert any("Message undeliverable" in r.getMessage() for r in caplog.records)
    await started.driver.text(ADA, "did you answer?")
    await wa.wait_for(lambda m: m.to == ADA and m.text == "ok: did you answer?")
    report = wa.texts_to(ADA)[1]
    assert report.startswith("My last message did not reach you") and "ok: hello" in report


async def test_a_rate_limited_failed_status_is_sent_again(bot, wa, fake_anthropic):
    started = await bot()
    await started.driver.text(ADA, "hello")
    sent = await wa.wait_for(lambda m: m.to == ADA and m.text == "ok: hello")
    await started.driver.status(sent.wamid, ADA, "failed", 130429, "Rate limit hit")
    await wa.wait_for(lambda m: m.to == ADA and m.text == "ok: hello", count=2)


async def test_a_failed_status_for_an_unknown_message_is_logged_as_an_error(bot, wa, caplog):
    started = await bot()
    with caplog.at_level(logging.ERROR, logger="channels.whatsapp"):
        await started.driver.status("wamid.elsewhere", ADA, "failed", 131000, "Something")
        await started.channel.intake.idle()
    assert any(r.levelno == logging.ERROR and "not one this bot sent" in r.getMessage()
               for r in caplog.records)


class Outbox:
    """The sent-message record, in memory (`SentPort`)."""

    def __init__(self) -> None:
        self.kept: dict[str, object] = {}

    async def remember(self, message_id: str, sent: object) -> None:
        self.kept[message_id] = sent

    async def recall(self, message_id: str) -> object | None:
        return self.kept.get(message_id)


async def test_a_message_with_an_old_timestamp_is_answered_and_a_reminder_after_it_is_sent(
        bot, wa, fake_anthropic):
    started = await bot(OWNER)
    wa.opened(ADA)   # the person wrote just now; the payload's timestamp is a sample's, fixed
    delivery = started.driver.message(ADA, "text", {"body": "hello"}, timestamp=1_700_000_000)
    assert await started.driver.post(delivery) == 200
    await wa.wait_for(lambda m: m.to == ADA and m.text == "ok: hello")
    job = await run_reminder(started.app)
    assert job.last_outcome == "ok: reminder sent"
    answer, reminder = wa.texts_to(ADA)
    assert answer == "ok: hello" and "Time to stretch!" in reminder and wa.refused == []


async def test_the_window_is_known_closed_only_for_unattended_sends_a_day_after_we_received(wa):
    clock = Clock(1_000_000.0)
    api = Graph(wa.base_url, wa.version, wa.phone_number_id, wa.token)
    await api.open()
    try:
        messenger = Messenger(api, Outbox(), {}, "en", clock)
        messenger.seen(ADA, clock())           # received by our clock, whatever its timestamp
        clock.now += DAY + 60
        wa.opened(ADA)                         # WhatsApp's view: the person wrote again since
        with pytest.raises(OutsideWindow):     # a job's result: held here, the API not asked
            await messenger.send_markdown(ADA, "Your report is ready.", kind="job")
        assert wa.sent == [] and wa.refused == []
        await messenger.send_markdown(ADA, "Here is your answer.")   # a reply: always asked
        assert wa.texts_to(ADA) == ["Here is your answer."]
        with pytest.raises(OutsideWindow):     # someone not seen here: the API's 131047 decides
            await messenger.send_markdown(EVE, "A copy for you.", kind="approval")
        assert [code for code, _ in wa.refused] == [131047]
    finally:
        await api.close()


async def test_a_reply_still_refused_after_the_retries_is_held_and_said_after_the_next_message(
        bot, wa, fake_anthropic, caplog, monkeypatch):
    monkeypatch.setattr(graph, "BACKOFF_SECONDS", 0.0)   # the retries, without their waits
    started = await bot()
    wa.rate_limit(graph.ATTEMPTS)                        # every try of the reply: 130429
    with caplog.at_level(logging.WARNING, logger="channels.whatsapp"):
        await started.driver.text(ADA, "hello")
        await started.channel.intake.idle()
    assert wa.texts_to(ADA) == [] and [code for code, _ in wa.refused] == [130429] * 4
    assert any("held for their next message" in r.getMessage() for r in caplog.records)
    await started.driver.text(ADA, "are you there?")
    await wa.wait_for(lambda m: m.to == ADA and m.text == "ok: are you there?")
    report, answer = wa.texts_to(ADA)
    assert report.startswith("My last message did not reach you (WhatsApp said: Rate limit hit")
    assert report.endswith("ok: hello") and answer == "ok: are you there?"


async def test_a_held_reply_that_fails_again_is_kept_for_the_message_after(
        bot, wa, fake_anthropic, monkeypatch):
    monkeypatch.setattr(graph, "BACKOFF_SECONDS", 0.0)
    started = await bot()
    wa.rate_limit(graph.ATTEMPTS)
    await started.driver.text(ADA, "hello")
    await started.channel.intake.idle()
    wa.rate_limit(graph.ATTEMPTS)                        # the held reply is refused again
    await started.driver.text(ADA, "still there?")
    await wa.wait_for(lambda m: m.to == ADA and m.text == "ok: still there?")
    await started.driver.text(ADA, "and now?")
    await wa.wait_for(lambda m: m.to == ADA and m.text == "ok: and now?")
    first, report, last = wa.texts_to(ADA)
    assert first == "ok: still there?" and last == "ok: and now?"
    assert report.startswith("My last message did not reach you") and "ok: hello" in report
