"""Several asks in one model step on Telegram: one message listing every call with its preview,
Approve all / Deny all and a pair of buttons per call; each answer goes the one-way path, the
turn resumes once with every result in order, every copy is redrawn. The real App and
python-telegram-bot against the fake Bot API; the clock is injected."""

from __future__ import annotations

import html

import pytest

from bot.app import App
from channels.telegram import TelegramChannel
from tests.channels.telegram.test_telegram_approvals import data_of, has_buttons
from tests.conftest import FAKE_ENV, make_config
from tests.fakes.anthropic_server import reply, text, tool_results, tool_use
from tests.fakes.telegram_server import channel_overrides
from tests.jobs.test_jobs import Clock
from tests.support.languages import EN
from tests.support.telegram_support import FAST

ADA, BOB, EVE = 4242, 4343, 6666


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def bot(tmp_path, tg, fake_anthropic, clock):
    env = {**FAKE_ENV, "ANTHROPIC_BASE_URL": fake_anthropic.base_url, "TELEGRAM_BOT_TOKEN": tg.token}
    config = make_config(tmp_path, {
        "senders": {f"telegram:{ADA}": "supervised", f"telegram:{BOB}": "full",
                    f"telegram:{EVE}": "supervised"},
        "approvals": {"approvers": [f"telegram:{BOB}"]}, **channel_overrides(tg)}, env=env)
    app = await App.open(config, clock=clock)
    channel = TelegramChannel(app.config, app.agent, settings=FAST)
    await channel.start()
    app.agent.add_approval_surface("telegram", channel)
    app.services.delivery.register("telegram", channel)
    yield app
    await channel.stop()
    await app.close()


def writes(*names: str, content: str = "x") -> list:
    return [tool_use("fs_write", {"path": name, "content": content}) for name in names]


async def ask_batch(tg, fake_anthropic, *names: str, content: str = "x", copies: int = 2):
    """Ada asks for several files in one step; returns the requester's batch message."""
    fake_anthropic.script(reply(text("Writing them."), *writes(*names, content=content)))
    tg.private_message(ADA, "write the files")
    await tg.wait_until(lambda: len(tg.cards(has_buttons)) >= copies)
    return next(c for c in tg.cards(has_buttons) if c.params["chat_id"] == ADA)


def labels(call) -> list[list[str]]:
    return [[b["text"] for b in row] for row in call.params["reply_markup"]["inline_keyboard"]]


def last_edit(tg, call) -> dict | None:
    message_id = call.result["message_id"]
    edits = tg.of("editMessageText", lambda p: p["message_id"] == message_id)
    return edits[-1].params if edits else None


def shown(tg, call) -> dict:
    """The message as it stands now in the fake (text and buttons)."""
    return tg.messages[(call.params["chat_id"], call.result["message_id"])]


async def test_two_asks_in_one_step_arrive_as_one_message_listing_each_call_with_its_buttons(
        bot, tg, fake_anthropic):
    request = await ask_batch(tg, fake_anthropic, "a.txt", "b.txt")
    requester_copies = [c for c in tg.cards(has_buttons) if c.params["chat_id"] == ADA]
    assert len(requester_copies) == 1
    body = request.params["text"]
    assert "2 calls" in body and "Create a.txt" in body and "Create b.txt" in body
    assert labels(request) == [
        ["Approve all", "Deny all"],
        ["Approve 1", "Deny 1", "Always 1: files in the workspace root…"],
        ["Approve 2", "Deny 2", "Always 2: files in the workspace root…"]]
    for row in request.params["reply_markup"]["inline_keyboard"]:
        for button in row:
            assert len(button["callback_data"].encode()) <= 64


async def test_each_call_is_answered_on_its_own_and_the_turn_resumes_once_with_results_in_order(
        bot, tg, fake_anthropic):
    app = bot
    request = await ask_batch(tg, fake_anthropic, "a.txt", "b.txt")
    tg.tap(ADA, data_of(request, "Approve 1"), request.result)
    await tg.wait_until(lambda: "Approved by telegram:4242" in shown(tg, request)["text"])
    assert labels_of(shown(tg, request)) == [["Approve all", "Deny all"],
                                             ["Approve 2", "Deny 2",
                                              "Always 2: files in the workspace root…"]]
    await app.agent.queue.drain(5)
    assert len(fake_anthropic.requests) == 1 and not (app.config.workspace / "a.txt").exists()
    fake_anthropic.script(text("Wrote a, not b."))
    tg.tap(ADA, data_of(request, "Deny 2"), request.result)
    await tg.wait_until(lambda: any(m["text"] == "Wrote a, not b." for m in tg.messages.values()))
    await app.agent.queue.drain(5)
    assert len(fake_anthropic.requests) == 2
    results = tool_results(fake_anthropic.requests[-1].json)
    assert [r["tool_use_id"] for r in results] == [b["id"] for b in tool_uses(fake_anthropic)]
    assert not results[0].get("is_error") and results[1]["is_error"]
    assert "denied" in results[1]["content"]
    assert (app.config.workspace / "a.txt").exists() and not (app.config.workspace / "b.txt").exists()
    final = shown(tg, request)
    assert "reply_markup" not in final and "Denied by telegram:4242" in final["text"]


async def test_twenty_concurrent_taps_on_mixed_buttons_give_one_outcome_per_call_and_one_resume(
        bot, tg, fake_anthropic):
    app = bot
    await ask_batch(tg, fake_anthropic, "a.txt", "b.txt", "c.txt")
    copies = {c.params["chat_id"]: c for c in tg.cards(has_buttons)}
    assert set(copies) == {ADA, BOB}
    fake_anthropic.script(text("Done with the files."))
    buttons = ["Approve all", "Deny all", "Approve 1", "Deny 2", "Approve 3", "Deny 1", "Approve 2"]
    for n in range(20):
        who = (ADA, BOB)[n % 2]
        tg.tap(who, data_of(copies[who], buttons[n % len(buttons)]), copies[who].result)
    await tg.wait_for("answerCallbackQuery", count=20)
    await tg.wait_until(lambda: any(m["text"] == "Done with the files." for m in tg.messages.values()))
    await app.agent.queue.drain(5)
    assert len(fake_anthropic.requests) == 2                      # resumed once
    rows = await app.services.store.fetchall(
        "SELECT status, tool_use_id FROM approvals ORDER BY batch_position")
    assert all(row["status"] in ("executed", "denied") for row in rows)
    executed = sum(row["status"] == "executed" for row in rows)
    receipts = await app.services.store.fetchall("SELECT * FROM receipts")
    assert len(receipts) == executed
    results = tool_results(fake_anthropic.requests[-1].json)
    assert [r["tool_use_id"] for r in results] == [row["tool_use_id"] for row in rows]
    for copy in copies.values():          # every copy redrawn: each outcome, no buttons left
        await tg.wait_until(lambda c=copy: "reply_markup" not in shown(tg, c))
        final = shown(tg, copy)["text"]
        assert final.count("Approved by") + final.count("Denied by") == 3


async def test_approve_all_applies_to_the_calls_still_pending_and_keeps_earlier_answers(
        bot, tg, fake_anthropic):
    app = bot
    request = await ask_batch(tg, fake_anthropic, "a.txt", "b.txt", "c.txt")
    tg.tap(ADA, data_of(request, "Deny 2"), request.result)
    await tg.wait_until(lambda: "Denied by" in shown(tg, request)["text"])
    fake_anthropic.script(text("Two written."))
    tg.tap(BOB, data_of(request, "Approve all"), request.result)
    await tg.wait_until(lambda: any(m["text"] == "Two written." for m in tg.messages.values()))
    await app.agent.queue.drain(5)
    ws = app.config.workspace
    assert [(ws / n).exists() for n in ("a.txt", "b.txt", "c.txt")] == [True, False, True]
    final = shown(tg, request)["text"]
    assert final.count("Approved by telegram:4343") == 2 and "Denied by telegram:4242" in final


async def test_forged_repeated_and_unauthorised_taps_get_a_clear_answer_and_run_nothing(
        bot, tg, fake_anthropic):
    app = bot
    request = await ask_batch(tg, fake_anthropic, "a.txt", "b.txt")
    tg.tap(EVE, data_of(request, "Approve all"), request.result, name="Eve")
    await tg.wait_for("answerCallbackQuery", lambda p: "Only telegram:4242" in p.get("text", ""))
    tg.tap(ADA, "ab:AAAAAAAAAAAAAAAA:a", request.result)
    await tg.wait_for("answerCallbackQuery", lambda p: "Unknown approval" in p.get("text", ""))
    fake_anthropic.script(text("Both written."))
    tg.tap(ADA, data_of(request, "Approve all"), request.result)
    await tg.wait_until(lambda: any(m["text"] == "Both written." for m in tg.messages.values()))
    tg.tap(ADA, data_of(request, "Approve all"), request.result)
    await tg.wait_for("answerCallbackQuery", lambda p: "already answered" in p.get("text", ""))
    tg.tap(ADA, data_of(request, "Deny 1"), request.result)
    await tg.wait_for("answerCallbackQuery", lambda p: "already approved" in p.get("text", ""))
    await app.agent.queue.drain(5)
    assert len(fake_anthropic.requests) == 2
    assert len(await app.services.store.fetchall("SELECT * FROM receipts")) == 2


async def test_a_tap_on_a_call_of_an_expired_batch_says_so_and_nothing_of_the_batch_runs(
        bot, tg, fake_anthropic, clock):
    app = bot
    request = await ask_batch(tg, fake_anthropic, "a.txt", "b.txt")
    tg.tap(ADA, data_of(request, "Approve 1"), request.result)
    await tg.wait_until(lambda: "Approved by" in shown(tg, request)["text"])
    clock.now += 301
    tg.tap(ADA, data_of(request, "Approve 2"), request.result)
    await tg.wait_for("answerCallbackQuery", lambda p: "expired" in p.get("text", ""))
    await tg.wait_until(lambda: shown(tg, request)["text"].count("Expired") == 2)
    await tg.wait_for("sendMessage", lambda p: "expired — nothing ran" in p["text"])
    await app.agent.queue.drain(5)
    assert "reply_markup" not in shown(tg, request)
    assert not (app.config.workspace / "a.txt").exists()
    assert await app.expiry.sweep() == 0
    statuses = await app.services.store.fetchall("SELECT status FROM approvals")
    assert {row["status"] for row in statuses} == {"expired"}


async def test_a_batch_that_lapses_unanswered_is_closed_whole_by_the_sweep(
        bot, tg, fake_anthropic, clock):
    app = bot
    request = await ask_batch(tg, fake_anthropic, "a.txt", "b.txt")
    clock.now += 301
    assert await app.expiry.sweep() == 2
    await app.agent.queue.drain(5)
    await tg.wait_until(lambda: "reply_markup" not in shown(tg, request))
    assert shown(tg, request)["text"].count("Expired") == 2
    notes = tg.of("sendMessage", lambda p: "expired — nothing ran" in p["text"])
    assert len(notes) == 1 and "fs_write" in notes[0].params["text"]


async def test_previews_too_long_for_one_message_are_posted_whole_before_the_buttons(
        bot, tg, fake_anthropic):
    content = "".join(f"line {n:04d} of a long file\n" for n in range(150))   # ~3,900 characters
    request = await ask_batch(tg, fake_anthropic, "a.txt", "b.txt", content=content)
    sent = [c.params["text"] for c in tg.of("sendMessage", lambda p: p["chat_id"] == ADA)]
    for number, name in ((1, "a.txt"), (2, "b.txt")):
        chunks = [t.split("<pre>", 1)[1].removesuffix("</pre>") for t in sent
                  if t.startswith("🔎 Preview") and f" of call {number} " in t]
        whole = html.unescape("".join(chunks))           # every character, recovered
        assert whole.startswith(f"Create {name}")
        assert "".join(f"+{line}\n" for line in content.splitlines()) in whole + "\n"
    assert request.params["text"].count("in the messages above") == 2
    assert all(len(t.encode("utf-16-le")) // 2 <= 4096 for t in sent)


async def test_a_batch_longer_than_one_keyboard_is_shown_on_pages_each_with_the_all_buttons(
        bot, tg, fake_anthropic):
    app = bot
    names = [f"f{n}.txt" for n in range(10)]
    await ask_batch(tg, fake_anthropic, *names, copies=4)
    pages = [c for c in tg.cards(has_buttons) if c.params["chat_id"] == ADA]
    assert len(pages) == 2 and "calls 1–8 of 10" in pages[0].params["text"]
    assert labels(pages[1])[0] == ["Approve all", "Deny all"] and len(labels(pages[1])) == 3
    fake_anthropic.script(text("All ten."))
    tg.tap(ADA, data_of(pages[1], "Approve all"), pages[1].result)
    await tg.wait_until(lambda: any(m["text"] == "All ten." for m in tg.messages.values()))
    await app.agent.queue.drain(5)
    assert all((app.config.workspace / n).exists() for n in names)
    await tg.wait_until(lambda: all("reply_markup" not in shown(tg, p) for p in pages))


def labels_of(message: dict) -> list[list[str]]:
    return [[b["text"] for b in row] for row in message["reply_markup"]["inline_keyboard"]]


def tool_uses(fake_anthropic) -> list[dict]:
    messages = fake_anthropic.requests[-1].json["messages"]
    return [b for m in messages if m["role"] == "assistant" for b in m["content"]
            if isinstance(b, dict) and b.get("type") == "tool_use"]



def test_every_page_of_a_large_batch_fits_telegram_before_and_after_its_calls_are_answered():
    from bot.core.approval_cards import ApprovalView, CallOutcome
    from channels.telegram.batch import continuation_parts, page_keyboard, page_part, pages
    from channels.telegram.rendering import utf16_len

    views = [ApprovalView(id=f"{n:016d}", tool="shell_run", risk="medium",
                          summary=f"Run <&> {n} " + "é" * 5000, sender="telegram:4242",
                          chat="4242", channel="telegram", args={}, expires_at=0.0,
                          always="`x`" * 70 + " in this chat", batch="B" * 16, position=n)
             for n in range(11)]
    laid_out = pages(views, EN)
    assert [len(p.calls) for p in laid_out] == [8, 3]
    for page in laid_out:
        pending = [CallOutcome(v, "") for v in page.calls]
        answered = [CallOutcome(v, "approve", "console:operator", 1.0) for v in page.calls]
        for calls in (pending, answered):
            assert utf16_len(page_part(page, calls, len(views), EN).html) <= 4096
        whole = "".join(part.plain.split(":\n", 1)[1] for part in continuation_parts(page, EN))
        assert all(v.summary in whole for v in page.calls)        # every preview, whole
        assert all(utf16_len(part.html) <= 4096 for part in continuation_parts(page, EN))
        keyboard = page_keyboard(page, pending, True, EN).inline_keyboard
        assert all(len(b.callback_data.encode()) <= 64 for row in keyboard for b in row)
        assert max(len(row) for row in keyboard) <= 3


def test_a_page_whose_always_scopes_cannot_all_be_explained_still_fits_and_keeps_its_buttons():
    from bot.core.approval_cards import ApprovalView, CallOutcome
    from channels.telegram.batch import continuation_parts, page_keyboard, page_part, pages
    from channels.telegram.rendering import utf16_len

    scope = "`x`" * 200 + " in this chat"    # eight of these explained do not fit 4096
    views = [ApprovalView(id=f"{n:016d}", tool="shell_run", risk="medium", summary=f"Run {n}",
                          sender="telegram:4242", chat="4242", channel="telegram", args={},
                          expires_at=0.0, always=scope, batch="B" * 16, position=n)
             for n in range(8)]
    (page,) = pages(views, EN)
    assert not page.explain_always and page.outside == {v.id for v in views}
    pending = [CallOutcome(v, "") for v in views]
    text = page_part(page, pending, len(views), EN).html
    assert utf16_len(text) <= 4096 and "would allow" not in text
    assert all(f"Run {n}" in part.plain for n, part in enumerate(continuation_parts(page, EN)))
    labels = [b.text for row in page_keyboard(page, pending, True, EN).inline_keyboard for b in row]
    assert sum(label.startswith("Always") for label in labels) == len(views)
