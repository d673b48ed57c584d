"""Approvals on WhatsApp end to end: the real App and agent (fs_write by a supervised sender),
the channel against the fake Graph API: the card, its three reply buttons, the outcome as a
reply to the card, second taps, a long preview shown whole, batches, approver copies, and a
request still pending across a restart."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from tests.channels.whatsapp.conftest import ADA, BOB, EVE
from tests.fakes.anthropic_server import reply, text, tool_results, tool_use
from tests.fakes.whatsapp_server import FakeWhatsApp, Sent

GUIDE = (Path(__file__).resolve().parents[3] / "docs" / "whatsapp.md").read_text("utf-8")
SENDERS = {f"whatsapp:{ADA}": "supervised", f"whatsapp:{BOB}": "supervised",
           f"whatsapp:{EVE}": "supervised"}


def is_card(message: Sent) -> bool:
    return message.type == "interactive" and message.body["interactive"]["type"] == "button" \
        and any(i.startswith("ap:") for i in message.button_ids())


def button(card: Sent, prefix: str) -> str:
    return next(i for i in card.button_ids() if i.startswith("ap:") and i.endswith(prefix))


async def ask_to_write(started, wa: FakeWhatsApp, fake_anthropic, content: str = "milk",
                       who: str = ADA) -> Sent:
    fake_anthropic.script(reply(text("I'll write it."),
                                tool_use("fs_write", {"path": "notes.txt", "content": content})))
    await started.driver.text(who, f"write {content[:20]}")
    return await wa.wait_for(lambda m: m.to == who and is_card(m))


async def test_the_card_shows_tool_risk_requester_and_preview_with_three_reply_buttons(
        bot, wa, fake_anthropic):
    started = await bot(SENDERS)
    card = await ask_to_write(started, wa, fake_anthropic)
    body = card.text
    assert "fs_write" in body and "medium" in body and f"whatsapp:{ADA}" in body
    assert "Create notes.txt" in body and len(body) <= 1024
    assert card.button_titles() == ["Approve", "Deny", "Always"]
    assert all(len(t) <= 20 for t in card.button_titles())
    assert [i.rsplit(":", 1)[1] for i in card.button_ids()] == ["a", "d", "s"]


async def test_the_guides_step_four_shows_its_card_with_the_guides_own_configuration(
        bot, wa, fake_anthropic):
    example = GUIDE.split("```toml\n", 1)[1].split("```", 1)[0]   # README's is the same
    owner = re.search(r'"whatsapp:(\d+)"', example).group(1)
    config = tomllib.loads(example.replace(owner, ADA))
    asked = re.search(r'Write to the test number: \*"([^"]+)"\*', GUIDE).group(1)
    started = await bot(config["senders"], **{k: v for k, v in config.items()
                                              if k not in ("senders", "whatsapp")})
    fake_anthropic.script(reply(text("I'll write it."),
                                tool_use("fs_write", {"path": "notes.txt", "content": "milk"})),
                          text("Written."))
    await started.driver.text(ADA, asked)
    card = await wa.wait_for(lambda m: m.to == ADA and is_card(m))
    assert card.button_titles() == ["Approve", "Deny", "Always"]
    await started.driver.tap(ADA, button(card, ":a"), card.wamid)
    await wa.wait_for(lambda m: m.to == ADA and m.text == "Written.")
    assert (started.app.config.workspace / "notes.txt").read_text() == "milk"


async def test_approving_runs_the_call_and_the_outcome_is_a_reply_to_the_card(
        bot, wa, fake_anthropic, config):
    started = await bot(SENDERS)
    card = await ask_to_write(started, wa, fake_anthropic)
    fake_anthropic.script(text("Written."))
    await started.driver.tap(ADA, button(card, ":a"), card.wamid)
    outcome = await wa.wait_for(lambda m: m.reply_to == card.wamid)
    assert outcome.text.startswith("✅ Approved by whatsapp:" + ADA)
    await wa.wait_for(lambda m: m.to == ADA and m.text == "Written.")
    assert (started.app.config.workspace / "notes.txt").read_text() == "milk"
    assert "created" in str(tool_results(fake_anthropic.last_request.json)).lower() or \
        tool_results(fake_anthropic.last_request.json)


async def test_a_second_tap_on_an_old_card_says_who_already_decided_and_changes_nothing(
        bot, wa, fake_anthropic):
    started = await bot(SENDERS)
    card = await ask_to_write(started, wa, fake_anthropic)
    fake_anthropic.script(text("Not written."))
    await started.driver.tap(ADA, button(card, ":d"), card.wamid)
    await wa.wait_for(lambda m: m.to == ADA and m.text == "Not written.")
    requests = len(fake_anthropic.requests)
    await started.driver.tap(ADA, button(card, ":a"), card.wamid)
    again = await wa.wait_for(lambda m: m.reply_to == card.wamid and "already" in m.text)
    assert again.text == f"This request was already denied by whatsapp:{ADA}."
    assert not (started.app.config.workspace / "notes.txt").exists()
    assert len(fake_anthropic.requests) == requests


async def test_someone_else_cannot_answer_and_is_told_why(bot, wa, fake_anthropic):
    started = await bot(SENDERS)
    card = await ask_to_write(started, wa, fake_anthropic)
    await started.driver.tap(BOB, button(card, ":a"), card.wamid)
    refusal = await wa.wait_for(lambda m: m.to == BOB and m.reply_to == card.wamid)
    assert refusal.text == f"Only whatsapp:{ADA} or an approver can answer this request."
    assert not (started.app.config.workspace / "notes.txt").exists()


async def test_a_5000_character_preview_is_shown_whole_before_the_card(bot, wa, fake_anthropic):
    started = await bot(SENDERS)
    content = "".join(f"line {n:04d} of a long file\n" for n in range(200))[:5000]
    card = await ask_to_write(started, wa, fake_anthropic, content=content)
    assert len(card.text) <= 1024 and "document above" in card.text
    (upload,) = wa.uploads
    document = next(m for m in wa.to(ADA, "document"))
    assert wa.sent.index(document) < wa.sent.index(card)
    (row,) = await started.app.services.store.fetchall("SELECT summary FROM approvals")
    assert len(row["summary"]) > 5000
    assert upload.data.decode() == row["summary"]     # every character, in one piece


async def test_a_preview_too_long_for_the_card_but_short_enough_for_a_message_comes_first(
        bot, wa, fake_anthropic):
    started = await bot(SENDERS)
    content = "x" * 1500
    card = await ask_to_write(started, wa, fake_anthropic, content=content)
    (row,) = await started.app.services.store.fetchall("SELECT summary FROM approvals")
    (preview,) = [m for m in wa.to(ADA, "text") if "Full preview" in m.text]
    assert row["summary"] in preview.text and "message above" in card.text
    assert wa.sent.index(preview) < wa.sent.index(card)


async def test_a_batch_offers_approve_all_and_a_card_per_call(bot, wa, fake_anthropic):
    started = await bot(SENDERS)
    fake_anthropic.script(reply(text("Two files."),
                                tool_use("fs_write", {"path": "a.txt", "content": "A"}),
                                tool_use("fs_write", {"path": "b.txt", "content": "B"})))
    await started.driver.text(ADA, "write two")
    cards = await wa.wait_all(lambda m: m.to == ADA and is_card(m), 2)
    (listing,) = [m for m in wa.to(ADA, "interactive") if m.body["interactive"]["type"] == "list"]
    assert [i.rsplit(":", 1)[1] for i in listing.button_ids()] == ["a", "d"]
    assert "Call 1 of 2" in cards[0].text and "Call 2 of 2" in cards[1].text
    fake_anthropic.script(text("Both written."))
    await started.driver.tap(ADA, listing.button_ids()[0], listing.wamid, title="Approve all")
    await wa.wait_for(lambda m: m.to == ADA and m.text == "Both written.")
    workspace = started.app.config.workspace
    assert (workspace / "a.txt").read_text() == "A" and (workspace / "b.txt").read_text() == "B"
    for card in cards:
        await wa.wait_for(lambda m, c=card: m.reply_to == c.wamid and "Approved" in m.text)


async def test_an_approver_gets_a_copy_and_their_tap_answers_the_request(bot, wa, fake_anthropic):
    started = await bot(SENDERS, approvals={"approvers": [f"whatsapp:{EVE}"]})
    wa.opened(EVE)
    card = await ask_to_write(started, wa, fake_anthropic)
    copy = await wa.wait_for(lambda m: m.to == EVE and is_card(m))
    assert f"whatsapp:{ADA}" in copy.text
    fake_anthropic.script(text("Written."))
    await started.driver.tap(EVE, button(copy, ":a"), copy.wamid)
    await wa.wait_for(lambda m: m.to == ADA and m.text == "Written.")
    for shown in (card, copy):
        await wa.wait_for(lambda m, s=shown: m.reply_to == s.wamid and f"whatsapp:{EVE}" in m.text)


async def test_a_request_pending_across_a_restart_is_answered_from_the_store(
        bot, wa, fake_anthropic):
    started = await bot(SENDERS)
    card = await ask_to_write(started, wa, fake_anthropic)
    await started.app.stop_channels()
    restarted = await bot(app=started.app)
    fake_anthropic.script(text("Written after the restart."))
    await restarted.driver.tap(ADA, button(card, ":a"), card.wamid)
    await wa.wait_for(lambda m: m.to == ADA and m.text == "Written after the restart.")
    assert (started.app.config.workspace / "notes.txt").read_text() == "milk"


async def test_a_tap_on_a_button_that_is_not_ours_is_answered_as_not_valid(bot, wa):
    started = await bot(SENDERS)
    await started.driver.tap(ADA, "ap:forged:a", "wamid.somecard")
    refusal = await wa.wait_for(lambda m: m.to == ADA)
    assert refusal.text == "This button is not valid any more." and refusal.reply_to == \
        "wamid.somecard"
