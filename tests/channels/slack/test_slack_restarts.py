"""Slack across restarts, on both store backends: a pending approval's buttons work in a new
process (nothing kept in memory), and the sweep for rows a stopped process left never runs again
a row this process is still running. The real App, slack-bolt in Socket Mode against the fake
Slack, the fake Anthropic API."""

from __future__ import annotations

import asyncio

from bot.conversation.inbox import InboxRow
from tests.fakes.anthropic_server import reply, text, tool_use
from tests.fakes.slack_server import buttons_of, visible_text
from tests.support.pg_support import on_both_backends
from tests.support.slack_support import ADA, dm_of

backend_name = on_both_backends()


async def test_a_pending_request_survives_a_process_restart_and_its_buttons_still_work(
        bot, slack, fake_anthropic):
    first, _ = await bot()
    fake_anthropic.script(reply(text("I'll write it."),
                                tool_use("fs_write", {"path": "notes.txt", "content": "milk"})))
    await slack.send("events_api", slack.dm_event(ADA, "write milk"))
    await slack.wait_until(lambda: any(buttons_of(m) for m in slack.messages.values()))
    card = next(m for m in slack.messages.values() if buttons_of(m))

    app, _ = await bot(fresh=True)      # a new App on the same store: nothing kept in memory
    assert app is not first and slack.connections == 1
    fake_anthropic.script(text("Written after the process restart."))
    await slack.send("interactive", slack.tap_payload(ADA, card["channel"], card["ts"], "Approve"))
    await slack.wait_until(lambda: "Written after the process restart." in slack.texts_in(dm_of(ADA)))
    assert (app.config.workspace / "notes.txt").read_text() == "milk"
    now = slack.message(card["channel"], card["ts"])
    assert not buttons_of(now) and f"Approved by <@{ADA}>" in visible_text(now)
    assert len(await app.services.store.fetchall("SELECT * FROM receipts")) == 1


async def test_a_sweep_that_finds_a_row_still_running_here_leaves_it_alone(bot, slack, fake_anthropic):
    app, channel = await bot()
    release = asyncio.Event()

    async def slow(body):
        await release.wait()
        return text("Answered once.")
    fake_anthropic.responder = slow
    await slack.send("events_api", slack.dm_event(ADA, "take your time"))
    await fake_anthropic.wait_for_requests(1)
    # Every unfinished row, as a sweep racing this process's claim could see it.
    rows = await app.services.inbox.store.fetchall(
        "SELECT id, channel, update_key, conversation, payload, attempts FROM inbox "
        "WHERE channel = 'slack' AND state <> 'done'")
    assert len(rows) == 1
    left = [InboxRow(int(r["id"]), r["channel"], r["update_key"], r["conversation"],
                     r["payload"], int(r["attempts"])) for r in rows]
    assert channel.intake._adopt(left) == 0
    release.set()
    await slack.wait_until(lambda: "Answered once." in slack.texts_in(dm_of(ADA)))
    await channel.intake.idle()
    assert len(fake_anthropic.requests) == 1
    assert slack.texts_in(dm_of(ADA)).count("Answered once.") == 1
