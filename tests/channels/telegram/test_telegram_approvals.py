"""Approval requests on Telegram end to end: the real App and agent (fs_write with a supervised
sender), the real python-telegram-bot against the fake Bot API, the fake Anthropic API."""

from __future__ import annotations

import time

import pytest

from channels.telegram import TelegramChannel
from tests.fakes.anthropic_server import reply, text, tool_results, tool_use
from tests.fakes.telegram_server import Call, FakeTelegram, channel_overrides, handled
from tests.support.telegram_support import FAST

ADA, BOB, EVE = 4242, 4343, 6666
SENDERS = {f"telegram:{ADA}": "supervised", f"telegram:{EVE}": "supervised", "unknown": "pairing"}


@pytest.fixture
async def bot(app_factory, tg):
    started: list[TelegramChannel] = []

    async def start(app=None):
        if app is None:
            app = await app_factory({"senders": SENDERS, **channel_overrides(tg)},
                                    env={"TELEGRAM_BOT_TOKEN": tg.token})
        channel = TelegramChannel(app.config, app.agent, settings=FAST)
        await channel.start()
        started.append(channel)
        return app, channel

    yield start
    for channel in reversed(started):
        await channel.stop()


def has_buttons(params: dict) -> bool:
    return "inline_keyboard" in (params.get("reply_markup") or {})


async def ask_to_write(tg: FakeTelegram, fake_anthropic, path: str = "notes.txt",
                       content: str = "milk") -> Call:
    """Ada asks; the model wants fs_write; returns the sendMessage call carrying the buttons."""
    fake_anthropic.script(reply(text("I'll write it."),
                                tool_use("fs_write", {"path": path, "content": content})))
    tg.private_message(ADA, f"write {content}")
    return await tg.wait_for_card(lambda p: has_buttons(p))


def data_of(request: Call, label_start: str) -> str:
    for row in request.params["reply_markup"]["inline_keyboard"]:
        for button in row:
            if button["text"].startswith(label_start):
                return button["callback_data"]
    raise AssertionError(f"no button {label_start!r}")


def answers(tg: FakeTelegram) -> list[str]:
    return [c.params.get("text", "") for c in tg.of("answerCallbackQuery")]


def edits_of(tg: FakeTelegram, request: Call) -> list[Call]:
    return tg.redraws(request)


async def receipts(app) -> int:
    return len(await app.services.store.fetchall("SELECT * FROM receipts"))


async def test_the_request_shows_tool_risk_and_summary_with_three_small_buttons(bot, tg, fake_anthropic):
    await bot()
    request = await ask_to_write(tg, fake_anthropic)
    shown = request.params["text"]
    assert "<code>fs_write</code>" in shown and "medium" in shown and "Create notes.txt" in shown
    labels = [b["text"] for row in request.params["reply_markup"]["inline_keyboard"] for b in row]
    assert labels == ["Approve", "Deny", "Always: files in the workspace root in this chat"]
    for label in ("Approve", "Deny", "Always"):
        data = data_of(request, label)
        assert data.startswith("ap:") and len(data.encode()) <= 64


async def test_approve_runs_the_tool_once_and_edits_the_request_without_buttons(bot, tg, fake_anthropic):
    app, _ = await bot()
    request = await ask_to_write(tg, fake_anthropic)
    assert not (app.config.workspace / "notes.txt").exists()
    fake_anthropic.script(text("Written."))
    tg.tap(ADA, data_of(request, "Approve"), request.result)
    edit = await tg.wait_for_redraw(request)
    assert "Approved by Ada (telegram:4242) at" in edit.params["text"]
    assert "reply_markup" not in edit.params
    assert answers(tg) == ["Approved"]
    await tg.wait_until(lambda: any(m["text"] == "Written." for m in tg.messages.values()))
    assert (app.config.workspace / "notes.txt").read_text() == "milk"
    assert await receipts(app) == 1


async def test_deny_does_not_run_the_tool_and_tells_the_model(bot, tg, fake_anthropic):
    app, _ = await bot()
    request = await ask_to_write(tg, fake_anthropic)
    fake_anthropic.script(text("Fine, I won't."))
    tg.tap(ADA, data_of(request, "Deny"), request.result)
    edit = await tg.wait_for_redraw(request)
    assert "❌ Denied by Ada (telegram:4242)" in edit.params["text"]
    await tg.wait_until(lambda: any(m["text"] == "Fine, I won't." for m in tg.messages.values()))
    assert answers(tg) == ["Denied"]
    (result,) = tool_results(fake_anthropic.last_request.json)
    assert result["is_error"] is True and "denied" in str(result["content"])
    assert not (app.config.workspace / "notes.txt").exists()


async def test_a_strangers_tap_is_refused_with_the_reason_and_changes_nothing(bot, tg, fake_anthropic):
    app, _ = await bot()
    request = await ask_to_write(tg, fake_anthropic)
    tg.tap(EVE, data_of(request, "Approve"), request.result, name="Eve")
    refusal = await tg.wait_for("answerCallbackQuery")
    assert refusal.params["text"] == "Only telegram:4242 or an approver can answer this request."
    assert refusal.params["show_alert"] is True
    assert edits_of(tg, request) == []
    assert has_buttons(tg.messages[(ADA, request.result["message_id"])])
    assert not (app.config.workspace / "notes.txt").exists()
    fake_anthropic.script(text("Written."))
    tg.tap(ADA, data_of(request, "Approve"), request.result)     # the owner still can
    await tg.wait_until(lambda: any(m["text"] == "Written." for m in tg.messages.values()))
    assert (app.config.workspace / "notes.txt").read_text() == "milk"


async def test_a_double_tap_resolves_once(bot, tg, fake_anthropic):
    app, _ = await bot()
    request = await ask_to_write(tg, fake_anthropic)
    fake_anthropic.script(text("Written."))
    tg.tap(ADA, data_of(request, "Approve"), request.result)
    tg.tap(ADA, data_of(request, "Deny"), request.result)
    await tg.wait_for("answerCallbackQuery", count=2)
    await tg.wait_until(lambda: any(m["text"] == "Written." for m in tg.messages.values()))
    assert sorted(answers(tg)) == ["Approved", "This request was already approved by telegram:4242."]
    assert len(edits_of(tg, request)) == 1
    assert (app.config.workspace / "notes.txt").read_text() == "milk"
    assert await receipts(app) == 1


async def test_an_expired_request_cannot_be_approved(bot, tg, fake_anthropic):
    app, _ = await bot()
    request = await ask_to_write(tg, fake_anthropic)
    app.services.approvals.clock = lambda: time.time() + 3600      # an hour later
    tg.tap(ADA, data_of(request, "Approve"), request.result)
    refusal = await tg.wait_for("answerCallbackQuery")
    assert refusal.params["text"].startswith("This request expired at")
    assert edits_of(tg, request) == []
    assert not (app.config.workspace / "notes.txt").exists()
    assert len(fake_anthropic.requests) == 1


async def test_a_new_message_cancels_the_pending_request_and_takes_its_buttons_away(
        bot, tg, fake_anthropic):
    app, channel = await bot()
    app.agent.add_approval_surface("telegram", channel)   # as the App does
    request = await ask_to_write(tg, fake_anthropic)
    fake_anthropic.script(text("Sure, forget the note."))
    tg.private_message(ADA, "never mind")
    edit = await tg.wait_for_redraw(request)
    assert "Cancelled (a newer message arrived) — nothing ran." in edit.params["text"]
    assert "reply_markup" not in tg.messages[(ADA, request.result["message_id"])]
    await tg.wait_until(lambda: any(m["text"] == "Sure, forget the note."
                                    for m in tg.messages.values()))
    assert not (app.config.workspace / "notes.txt").exists()


async def test_a_tap_on_buttons_left_on_an_ended_request_says_why_and_takes_them_away(
        bot, tg, fake_anthropic):
    app, channel = await bot()
    app.agent.add_approval_surface("telegram", channel)
    request = await ask_to_write(tg, fake_anthropic)
    message_id = request.result["message_id"]
    tg.fail("editMessageText", times=2,   # the formatted edit and its plain retry
            when=lambda p: int(p["message_id"]) == message_id)
    fake_anthropic.script(text("Sure, forget the note."))
    tg.private_message(ADA, "never mind")       # its redraw is lost: the buttons stay
    await tg.wait_until(lambda: any(m["text"] == "Sure, forget the note."
                                    for m in tg.messages.values()))
    assert "reply_markup" in tg.messages[(ADA, message_id)]
    tg.tap(ADA, data_of(request, "Approve"), tg.messages[(ADA, message_id)])
    refusal = await tg.wait_for("answerCallbackQuery")
    assert refusal.params["text"] == "This request was cancelled because a newer message arrived."
    redrawn = await tg.wait_for_redraw(request)
    assert "Cancelled (a newer message arrived)" in redrawn.params["text"]
    assert "reply_markup" not in tg.messages[(ADA, message_id)]
    assert not (app.config.workspace / "notes.txt").exists()


async def test_unknown_and_malformed_buttons_are_answered_and_change_nothing(bot, tg, fake_anthropic):
    app, _ = await bot()
    request = await ask_to_write(tg, fake_anthropic)
    tg.tap(ADA, "ap:AAAAAAAAAAAAAAAA:a", request.result)
    tg.tap(ADA, "ap:../../etc:a", request.result)
    tg.tap(ADA, "something-else", request.result)
    await tg.wait_for("answerCallbackQuery", count=3)
    assert sorted(answers(tg)) == sorted(["Unknown approval request.", "This button is not valid any more.",
                                          "This button is not valid any more."])
    assert edits_of(tg, request) == []
    assert not (app.config.workspace / "notes.txt").exists()


async def test_always_approves_this_call_and_later_ones_in_the_session(bot, tg, fake_anthropic):
    app, _ = await bot()
    request = await ask_to_write(tg, fake_anthropic)
    fake_anthropic.script(text("Written."))
    tg.tap(ADA, data_of(request, "Always"), request.result)
    edit = await tg.wait_for_redraw(request)
    assert "Approved, and always from now on by" in edit.params["text"]
    await tg.wait_until(lambda: (app.config.workspace / "notes.txt").exists())
    await tg.wait_until(lambda: any(m["text"] == "Written." for m in tg.messages.values()))
    fake_anthropic.script(tool_use("fs_write", {"path": "more.txt", "content": "eggs"}),
                          text("Also written."))
    tg.private_message(ADA, "write eggs too")
    await tg.wait_until(lambda: any(m["text"] == "Also written." for m in tg.messages.values()))
    assert (app.config.workspace / "more.txt").read_text() == "eggs"
    assert len(tg.cards(has_buttons)) == 1


async def test_the_dry_run_summary_is_escaped_because_it_may_carry_untrusted_text(bot, tg, fake_anthropic):
    await bot()
    request = await ask_to_write(tg, fake_anthropic, path="<b>x</b>&co.txt")
    assert "Create &lt;b&gt;x&lt;/b&gt;&amp;co.txt" in request.params["text"]
    assert "<b>x</b>" not in request.params["text"]


async def test_without_buttons_the_request_arrives_as_text_with_approve_and_deny_commands(
        bot, tg, fake_anthropic):
    app, _ = await bot()
    tg.fail("sendMessage", description="Bad Request: BUTTON_DATA_INVALID", times=2, when=has_buttons)
    fake_anthropic.script(reply(text("I'll write it."),
                                tool_use("fs_write", {"path": "n.txt", "content": "x"})))
    tg.private_message(ADA, "write x")
    fallback = await tg.wait_for("sendMessage", lambda p: "/approve " in p["text"])
    approval_id = fallback.params["text"].split("/approve ", 1)[1].split()[0]
    assert f"/deny {approval_id}" in fallback.params["text"] and not has_buttons(fallback.params)
    fake_anthropic.script(text("Written."))
    tg.private_message(ADA, f"/approve {approval_id}")
    await tg.wait_until(lambda: any(m["text"] == "Written." for m in tg.messages.values()))
    assert (app.config.workspace / "n.txt").read_text() == "x"


async def test_a_request_still_pending_after_a_restart_can_be_approved(bot, tg, fake_anthropic):
    app, first = await bot()
    request = await ask_to_write(tg, fake_anthropic)
    await handled(tg, first.application, tg.last_update_id)
    ref = await app.services.approvals.message_ref(data_of(request, "Approve").split(":")[1])
    assert ref == f"{ADA}:{request.result['message_id']}"
    await first.stop()
    await bot(app)                          # a new channel (a restarted process) on the same store
    fake_anthropic.script(text("Written after the restart."))
    tg.tap(ADA, data_of(request, "Approve"), request.result)
    await tg.wait_until(lambda: any(m["text"] == "Written after the restart." for m in tg.messages.values()))
    assert (app.config.workspace / "notes.txt").read_text() == "milk"


async def test_taps_are_answered_even_while_a_slow_turn_runs_in_the_same_chat(bot, tg, fake_anthropic):
    await bot()
    request = await ask_to_write(tg, fake_anthropic)
    fake_anthropic.script(text("slow answer", delay=0.5))
    tg.private_message(ADA, "something slow")
    await fake_anthropic.wait_for_requests(2)
    tg.tap(EVE, data_of(request, "Approve"), request.result, name="Eve")
    answered = await tg.wait_for("answerCallbackQuery")
    assert answered.params["text"].startswith("Only telegram:4242")
    await tg.wait_until(lambda: any(m["text"] == "slow answer" for m in tg.messages.values()))
    slow = tg.of("sendMessage", lambda p: p["text"] == "slow answer") or \
        tg.of("editMessageText", lambda p: p["text"] == "slow answer")
    assert answered.at < slow[0].at, "the tap waited behind the chat's running turn"
