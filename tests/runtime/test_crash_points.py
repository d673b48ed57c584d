"""Kill -9 at chosen points, restart on the same store: nothing lost, nothing run twice, the user
told about anything in doubt, receipts verify (tests/support/crashkit.py runs a real `myclaw run`; the
invariants are in tests/support/crash_checks.py and are checked by `kit.finish()`)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from tests.support.crash_checks import DOUBT
from tests.support.crashkit import Backend, backend_of, crash_kit
from tests.support.pg_support import on_both_backends
from tests.support.waiting import eventually

backend_name = on_both_backends()


@pytest.fixture
async def backend(_pg_schema_if_needed) -> Backend:
    return await backend_of(_pg_schema_if_needed)


def offset_past(update_id: int):
    return lambda params: int(params.get("offset") or 0) > update_id


async def test_a_graceful_restart_with_a_request_pending_loses_nothing_and_runs_it_once(
        tmp_path, backend):
    async with crash_kit(tmp_path, backend, chats=2) as kit:
        await kit.start()
        first, second = kit.chats
        asked = kit.send(first, "do")
        request = await eventually(lambda: kit.approval_for(asked), "the approval request")
        said = kit.send(second, "say")
        await kit.settled(said)
        await kit.bot.stop()
        await kit.start()
        kit.tap(asked, request)
        await kit.settled(asked)
        await kit.finish()
        assert kit.effects() == [asked]


async def test_a_message_fetched_but_not_yet_stored_is_not_acknowledged_and_is_answered_after_the_restart(
        tmp_path, backend):
    async with crash_kit(tmp_path, backend) as kit:
        await kit.start()
        async with kit.store.write_lock():
            token = kit.send(kit.chats[0], "say")
            update = kit.tg.last_update_id
            await eventually(lambda: any(u["update_id"] == update for c in kit.tg.of("getUpdates")
                                         for u in c.result or []), "the update to be fetched")
            try:   # nothing could be stored, so nothing may be confirmed (bounded look)
                await kit.tg.wait_for("getUpdates", offset_past(update), timeout=1.5)
            except AssertionError:
                pass
            else:
                pytest.fail("the update was confirmed to Telegram before it could be stored")
            await kit.kill()
        await kit.start()
        await kit.settled(token)
        await kit.finish()
        assert kit.asked(token) == 1, kit.transcript()


async def test_a_message_stored_but_not_yet_acknowledged_is_answered_once_though_telegram_sends_it_again(
        tmp_path, backend):
    async with crash_kit(tmp_path, backend) as kit:
        await kit.start()
        token = kit.send(kit.chats[0], "say")
        update = kit.tg.last_update_id
        ack = kit.tg.hold("getUpdates", offset_past(update))
        await eventually(ack.reached.is_set, "the acknowledgement to be sent")
        await kit.settled(token)
        await kit.kill()
        ack.drop()          # Telegram never saw the confirmation: it delivers the update again
        await kit.start()
        await kit.tg.wait_for("getUpdates", offset_past(update), timeout=30)
        later = kit.send(kit.chats[0], "say")
        await kit.settled(later)
        await kit.finish()
        assert kit.asked(token) == 1, kit.transcript()


async def test_a_turn_killed_mid_model_call_is_resumed_without_the_user_writing_again(
        tmp_path, backend):
    async with crash_kit(tmp_path, backend) as kit:
        await kit.start()
        key = kit.model.hold("t1")
        token = kit.send(kit.chats[0], "say")
        await eventually(lambda: key in kit.model.held, "the model call to be held")
        await kit.kill()
        kit.model.release(key)
        await kit.start()
        await kit.settled(token)
        asked = [m for m in kit.fake.last_request.json["messages"] if m["role"] == "user"]
        assert sum("say t1" in str(m["content"]) for m in asked) == 1
        await kit.finish()


async def test_a_turn_killed_while_the_model_reads_a_tool_result_goes_on_without_running_the_tool_again(
        tmp_path, backend):
    async with crash_kit(tmp_path, backend) as kit:
        await kit.start()
        key = kit.model.hold("t1", result=True)
        token = kit.send(kit.chats[0], "do")
        await kit.approve(token)
        await eventually(lambda: key in kit.model.held, "the model call with the result to be held")
        assert kit.effects() == [token]
        await kit.kill()
        kit.model.release(key)
        await kit.start()
        await kit.settled(token)
        await kit.finish()
        assert kit.effects() == [token]


async def answer_and_kill_before_the_call(kit, choice: str) -> str:
    """A request answered with `choice`; the first Bot API call the tap causes is held, so the
    answer is stored and the call not run yet; then SIGKILL and a restart."""
    token = kit.send(kit.chats[0], "do")
    request = await eventually(lambda: kit.approval_for(token), "the approval request")
    chat = kit.sent[token][0]
    holds = [kit.tg.hold(method, lambda p: int(p.get("chat_id") or chat) == chat)
             for method in ("editMessageText", "answerCallbackQuery", "sendChatAction")]
    kit.tap(token, request, choice)
    await eventually(lambda: any(h.reached.is_set() for h in holds), "the tap to be handled")
    # A held call may be the turn's own typing indicator, reached before the tap is handled;
    # the tap's answer is committed before any call the tap itself makes, so wait for it.
    expected = "approved" if choice == "a" else "denied"

    async def answered() -> bool:
        return await kit.store.approval_status(token) == expected

    await eventually(answered, f"the request to be {expected}")
    assert kit.effects() == []
    await kit.kill()
    for held in holds:
        held.drop()
    await kit.start()
    return token


async def test_an_approved_call_killed_before_it_ran_runs_once_after_the_restart(tmp_path, backend):
    async with crash_kit(tmp_path, backend) as kit:
        await kit.start()
        token = await answer_and_kill_before_the_call(kit, "a")
        await kit.settled(token)
        await kit.finish()
        assert kit.effects() == [token] and kit.observed().answered(token)


async def test_a_denied_call_killed_before_the_model_heard_of_it_is_answered_after_the_restart(
        tmp_path, backend):
    async with crash_kit(tmp_path, backend) as kit:
        await kit.start()
        token = await answer_and_kill_before_the_call(kit, "d")
        await kit.settled(token)
        await kit.finish()
        assert kit.effects() == [] and kit.observed().answered(token)


async def test_a_call_killed_mid_tool_is_reported_in_doubt_and_never_run_again(tmp_path, backend):
    async with crash_kit(tmp_path, backend) as kit:
        await kit.start()
        token = kit.send(kit.chats[0], "hang")
        await kit.approve(token)
        await eventually(lambda: kit.effects() == [token], "the command to start")
        await kit.kill()
        await eventually(lambda: not has_reader(kit.workspace / f"{token}.fifo"),
                         "the command to die with the bot", timeout=10)
        await kit.start()
        await kit.settled(token)
        later = kit.send(kit.chats[0], "say")   # the model sees the call's result again
        await kit.settled(later)
        await kit.finish()
        assert kit.observed().reported(token) and kit.effects() == [token]
        assert any(s.token == token and DOUBT.search(s.text) for s in kit.model.shown)


async def test_a_reply_cut_off_by_the_kill_is_sent_after_the_restart(tmp_path, backend):
    async with crash_kit(tmp_path, backend) as kit:
        await kit.start()
        chat = kit.chats[0]
        reply = kit.tg.hold("sendMessage", lambda p: int(p["chat_id"]) == chat)
        token = kit.send(chat, "say")
        await eventually(reply.reached.is_set, "the reply to be sent")
        await kit.kill()
        reply.drop()
        await kit.start()
        await kit.settled(token)
        await kit.finish()


async def test_a_request_cut_off_by_the_kill_is_shown_after_the_restart_and_runs_once_approved(
        tmp_path, backend):
    async with crash_kit(tmp_path, backend) as kit:
        await kit.start()
        request = kit.tg.hold("sendMessage", is_request)
        token = kit.send(kit.chats[0], "do")
        await eventually(request.reached.is_set, "the request to be sent")
        await kit.kill()
        request.drop()
        await kit.start()
        await kit.settled(token)
        await kit.finish()
        assert kit.effects() == [token]


def is_request(params: dict) -> bool:
    """A request message as it goes out (with or without its buttons)."""
    return "Approval needed" in params.get("text", "")


async def test_a_request_sent_but_not_recorded_when_killed_leaves_no_buttons_behind(
        tmp_path, backend):
    async with crash_kit(tmp_path, backend) as kit:
        await kit.start()
        request = kit.tg.hold("sendMessage", is_request)
        token = kit.send(kit.chats[0], "do")
        await eventually(request.reached.is_set, "the request to be sent")
        async with kit.store.write_lock():   # delivered, but its message cannot be recorded
            request.release()
            await kit.tg.wait_for("sendMessage", is_request)
            await kit.kill()
        await kit.start()
        await kit.settled(token)
        await kit.finish()      # the first copy kept no buttons; the shown-again one was redrawn
        assert kit.effects() == [token]
        assert len(kit.tg.of("sendMessage", is_request)) == 2


async def test_a_request_recorded_but_killed_before_its_buttons_gets_them_after_the_restart(
        tmp_path, backend):
    async with crash_kit(tmp_path, backend) as kit:
        await kit.start()
        arming = kit.tg.hold("editMessageText", lambda p: "ap:" in str(p.get("reply_markup")))
        token = kit.send(kit.chats[0], "do")
        await eventually(arming.reached.is_set, "the buttons to be added")
        await kit.kill()
        arming.drop()
        await kit.start()
        await kit.settled(token)     # tapped: the buttons came back on the recorded message
        assert len(kit.tg.of("sendMessage", is_request)) == 1, "it is not shown twice"
        await kit.finish()
        assert kit.effects() == [token]


def has_reader(fifo: Path) -> bool:
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            return False
        raise
    os.close(fd)
    return True
