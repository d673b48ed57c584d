"""An approval answered in the web console, end to end on Telegram: the real App (console and
Telegram channel started by the App itself), python-telegram-bot against the fake Bot API, the
fake Anthropic API. The conversation resumes in the chat and the request message is edited."""

from __future__ import annotations

import aiohttp
import pytest

from bot.ops.console.auth import OPERATOR
from tests.fakes.anthropic_server import reply, text, tool_use
from tests.fakes.telegram_server import channel_overrides
from tests.support.console_support import CONSOLE, logged_in

ADA = 4242


@pytest.fixture
async def running(app_factory, tg):
    app = await app_factory({**CONSOLE, **channel_overrides(tg),
                             "senders": {f"telegram:{ADA}": "supervised"}},
                            env={"TELEGRAM_BOT_TOKEN": tg.token})
    async with aiohttp.ClientSession() as http:
        client = await logged_in(app, http)
        await app.start_channels(["telegram"])
        yield app, client
        await app.stop_channels()


async def ask_to_write(tg, fake_anthropic):
    fake_anthropic.script(reply(text("I'll write it."),
                                tool_use("fs_write", {"path": "notes.txt", "content": "milk"})))
    tg.private_message(ADA, "write milk")
    return await tg.wait_for_card(lambda p: "inline_keyboard" in (p.get("reply_markup") or {}))


async def test_approving_in_the_console_runs_the_tool_once_and_edits_the_telegram_request(
        running, tg, fake_anthropic):
    app, client = running
    request_message = await ask_to_write(tg, fake_anthropic)
    (pending,) = await app.services.approvals.pending()
    page = await client.get("/")
    assert "Create notes.txt" in page.text
    fake_anthropic.script(text("Written."))
    page = await client.act(f"/approvals/{pending.id}", {"choice": "approve"})
    assert f"Approved by {OPERATOR}." in page.text
    edit = await tg.wait_for_redraw(request_message)
    assert f"Approved by {OPERATOR} at" in edit.params["text"] and "reply_markup" not in edit.params
    await tg.wait_until(lambda: any(m["text"] == "Written." for (chat, _), m in tg.messages.items()
                                    if chat == ADA))
    assert (app.config.workspace / "notes.txt").read_text() == "milk"
    receipts = await app.services.store.fetchall("SELECT approver FROM receipts")
    assert [r["approver"] for r in receipts] == [OPERATOR]
    tg.tap(ADA, f"ap:{pending.id}:a", request_message.result)   # a late tap changes nothing
    refusal = await tg.wait_for("answerCallbackQuery")
    assert refusal.params["text"] == f"This request was already approved by {OPERATOR}."
    assert len(await app.services.store.fetchall("SELECT id FROM receipts")) == 1


async def test_denying_in_the_console_tells_the_model_and_marks_the_request_denied(
        running, tg, fake_anthropic):
    app, client = running
    request_message = await ask_to_write(tg, fake_anthropic)
    (pending,) = await app.services.approvals.pending()
    fake_anthropic.script(text("Fine, I won't."))
    await client.act(f"/approvals/{pending.id}", {"choice": "deny"})
    edit = await tg.wait_for_redraw(request_message)
    assert f"Denied by {OPERATOR}" in edit.params["text"]
    await tg.wait_until(lambda: any(m["text"] == "Fine, I won't." for m in tg.messages.values()))
    assert not (app.config.workspace / "notes.txt").exists()


async def test_the_console_answers_a_batch_one_call_at_a_time_and_the_turn_resumes_once(
        running, tg, fake_anthropic):
    app, client = running
    fake_anthropic.script(reply(text("Both."), tool_use("fs_write", {"path": "a.txt", "content": "x"}),
                                tool_use("fs_write", {"path": "b.txt", "content": "y"})))
    tg.private_message(ADA, "write both")
    request = await tg.wait_for_card(lambda p: "Approve all" in str(p.get("reply_markup")))
    first, second = await app.services.approvals.pending()
    await client.act(f"/approvals/{first.id}", {"choice": "deny"})

    def shown() -> dict:
        return tg.messages[(ADA, request.result["message_id"])]
    await tg.wait_until(lambda: f"Denied by {OPERATOR}" in shown()["text"])
    assert "Approve 2" in str(shown()["reply_markup"]) and "Approve 1" not in str(shown()["reply_markup"])
    fake_anthropic.script(text("Wrote b only."))
    await client.act(f"/approvals/{second.id}", {"choice": "approve"})
    await tg.wait_until(lambda: any(m["text"] == "Wrote b only." for m in tg.messages.values()))
    await app.agent.queue.drain(5)
    assert len(fake_anthropic.requests) == 2 and "reply_markup" not in shown()
    assert not (app.config.workspace / "a.txt").exists()
    assert (app.config.workspace / "b.txt").read_text() == "y"
