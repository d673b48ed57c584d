"""Approval requests on Slack end to end: Block Kit cards with the whole preview, taps routed by
action id, the card updated so no button can be pressed twice, refusals told ephemerally.
The real App and agent (fs_write with a supervised sender), slack-bolt/slack-sdk in Socket Mode
against the fake Slack, the fake Anthropic API."""

from __future__ import annotations

from bot.core.approval_cards import ApprovalNeeded, ApprovalView
from channels.slack.approvals import MAX_BLOCKS
from tests.fakes.anthropic_server import reply, text, tool_results, tool_use
from tests.fakes.slack_server import FakeSlack, buttons_of, visible_text
from tests.support.slack_support import ADA, BOB, EVE, GENERAL, dm_of


def has_buttons(message: dict) -> bool:
    return bool(buttons_of(message))


def cards(slack: FakeSlack, channel: str) -> list[dict]:
    return [m for (c, _), m in slack.messages.items() if c == channel and has_buttons(m)]


async def ask_to_write(slack: FakeSlack, fake_anthropic, *, content: str = "milk",
                       path: str = "notes.txt") -> dict:
    """Ada asks in her DM; the model wants fs_write; returns the card as the fake holds it."""
    fake_anthropic.script(reply(text("I'll write it."),
                                tool_use("fs_write", {"path": path, "content": content})))
    await slack.send("events_api", slack.dm_event(ADA, f"write {content[:20]}"))
    await slack.wait_until(lambda: cards(slack, dm_of(ADA)))
    return cards(slack, dm_of(ADA))[0]


async def tap(slack: FakeSlack, user: str, card: dict, label: str) -> None:
    await slack.send("interactive", slack.tap_payload(user, card["channel"], card["ts"], label))


def said(slack: FakeSlack, channel: str, needle: str) -> bool:
    return any(needle in t for t in slack.texts_in(channel))


async def test_the_card_shows_tool_risk_requester_and_preview_with_three_buttons(bot, slack, fake_anthropic):
    await bot()
    card = await ask_to_write(slack, fake_anthropic)
    shown = visible_text(card)
    assert "`fs_write`" in shown and "medium" in shown and f"<@{ADA}> (slack:{ADA})" in shown
    assert "Create notes.txt" in shown and "+milk" in shown
    assert list(buttons_of(card)) == ["Approve", "Deny", "Always: files in the workspace root in this chat"]
    assert all(b["action_id"].startswith("ap:") for b in buttons_of(card).values())


async def test_approve_runs_the_tool_once_and_the_card_loses_its_buttons(bot, slack, fake_anthropic):
    app, _ = await bot()
    card = await ask_to_write(slack, fake_anthropic)
    fake_anthropic.script(text("Written."))
    await tap(slack, ADA, card, "Approve")
    await slack.wait_until(lambda: said(slack, dm_of(ADA), "Written."))
    assert (app.config.workspace / "notes.txt").read_text() == "milk"
    now = slack.message(card["channel"], card["ts"])
    assert not has_buttons(now) and f"Approved by <@{ADA}>" in visible_text(now)
    assert "Create notes.txt" in visible_text(now)   # the body stays, the buttons go


async def test_deny_runs_nothing_and_tells_the_model(bot, slack, fake_anthropic):
    app, _ = await bot()
    card = await ask_to_write(slack, fake_anthropic)
    fake_anthropic.script(text("Fine, I won't."))
    await tap(slack, ADA, card, "Deny")
    await slack.wait_until(lambda: said(slack, dm_of(ADA), "Fine, I won't."))
    (result,) = tool_results(fake_anthropic.last_request.json)
    assert result["is_error"] is True and "denied" in str(result["content"])
    assert not (app.config.workspace / "notes.txt").exists()
    assert "Denied by" in visible_text(slack.message(card["channel"], card["ts"]))


async def test_a_tap_by_someone_who_may_not_answer_is_told_ephemerally_and_changes_nothing(
        bot, slack, fake_anthropic):
    app, _ = await bot(senders={f"slack:{ADA}": "supervised", f"slack:{EVE}": "supervised"})
    card = await ask_to_write(slack, fake_anthropic)
    armed = slack.of("chat.update", lambda p: p["ts"] == card["ts"])   # the card's buttons
    await tap(slack, EVE, card, "Approve")
    refusal = await slack.wait_for("chat.postEphemeral")
    assert refusal.params["user"] == EVE
    assert refusal.params["text"] == f"Only slack:{ADA} or an approver can answer this request."
    assert has_buttons(slack.message(card["channel"], card["ts"]))
    assert slack.of("chat.update", lambda p: p["ts"] == card["ts"]) == armed
    assert not (app.config.workspace / "notes.txt").exists()


async def test_a_second_tap_changes_nothing_and_is_told_why(bot, slack, fake_anthropic):
    app, _ = await bot()
    card = await ask_to_write(slack, fake_anthropic)
    fake_anthropic.script(text("Written."))
    await tap(slack, ADA, card, "Approve")
    await tap(slack, ADA, card, "Deny")      # pressed before the card was redrawn
    refusal = await slack.wait_for("chat.postEphemeral")
    assert refusal.params["text"] == f"This request was already approved by slack:{ADA}."
    await slack.wait_until(lambda: said(slack, dm_of(ADA), "Written."))
    assert (app.config.workspace / "notes.txt").read_text() == "milk"
    assert len(await app.services.store.fetchall("SELECT * FROM receipts")) == 1


async def test_forged_and_unknown_buttons_change_nothing(bot, slack, fake_anthropic):
    app, _ = await bot()
    card = await ask_to_write(slack, fake_anthropic)
    await slack.send("interactive", slack.forged_tap(ADA, card["channel"], card["ts"],
                                                     "ap:AAAAAAAAAAAAAAAA:a"))
    await slack.wait_for("chat.postEphemeral")
    assert slack.of("chat.postEphemeral")[0].params["text"] == "Unknown approval request."
    assert has_buttons(slack.message(card["channel"], card["ts"]))
    assert not (app.config.workspace / "notes.txt").exists()


async def test_a_6000_character_preview_is_shown_whole_within_the_block_limits(bot, slack, fake_anthropic):
    await bot()
    content = "".join(f"line {n:04d} of a long file\n" for n in range(240))   # ~6,000 characters
    assert len(content) >= 6000
    card = await ask_to_write(slack, fake_anthropic, content=content)
    preview = "".join(inner["text"] for block in card["blocks"] if block["type"] == "rich_text"
                      for element in block["elements"] for inner in element["elements"])
    assert "".join(f"+{line}\n" for line in content.splitlines()) in preview + "\n"
    assert len(card["blocks"]) <= MAX_BLOCKS
    assert all(len(inner["text"]) <= 3000 for block in card["blocks"] if block["type"] == "rich_text"
               for element in block["elements"] for inner in element["elements"])
    assert slack.uploads == {}


async def test_a_preview_too_long_for_any_card_is_uploaded_whole_before_the_buttons(bot, slack):
    """The core caps a single preview below what a card holds; a channel still never cuts one."""
    _, channel = await bot()
    summary = "".join(f"row {n:06d} {'x' * 40}\n" for n in range(3500))   # ~175,000 characters
    view = ApprovalView(id="A" * 16, tool="fs_write", risk="medium", summary=summary,
                        sender=f"slack:{ADA}", chat=dm_of(ADA), channel="slack", args={},
                        expires_at=0.0)
    sink = channel.sink_for(dm_of(ADA), f"slack:{ADA}")
    await sink.emit(ApprovalNeeded(view))
    (upload,) = slack.uploads.values()
    assert upload["data"].decode() == summary and upload["channel"] == dm_of(ADA)
    (card,) = cards(slack, dm_of(ADA))
    assert "is in the file above" in visible_text(card) and len(card["blocks"]) <= MAX_BLOCKS
    upload_call = slack.of("files.completeUploadExternal")[0]
    card_call = next(c for c in slack.of("chat.postMessage") if c.params.get("blocks"))
    assert upload_call.at <= card_call.at


async def test_approver_copies_arrive_in_dms_and_all_show_the_outcome(bot, slack, fake_anthropic):
    await bot(overrides={"approvals": {"approvers": [f"slack:{BOB}"]}})
    card = await ask_to_write(slack, fake_anthropic)
    await slack.wait_until(lambda: cards(slack, dm_of(BOB)))
    (copy,) = cards(slack, dm_of(BOB))
    fake_anthropic.script(text("Written."))
    await tap(slack, BOB, copy, "Approve")
    await slack.wait_until(lambda: said(slack, dm_of(ADA), "Written."))   # the conversation goes on with Ada
    await slack.wait_until(lambda: not has_buttons(slack.message(card["channel"], card["ts"])))
    assert not has_buttons(slack.message(copy["channel"], copy["ts"]))
    assert f"Approved by <@{BOB}>" in visible_text(slack.message(card["channel"], card["ts"]))


async def test_a_request_in_a_channel_thread_is_asked_and_resumed_in_that_thread(
        bot, slack, fake_anthropic):
    app, _ = await bot()
    fake_anthropic.script(reply(text("Writing."), tool_use("fs_write", {"path": "t.txt", "content": "x"})))
    body = slack.channel_event(GENERAL, ADA, "<@UBOT> write t.txt")
    root = body["event"]["ts"]
    await slack.send("events_api", body)
    await slack.wait_until(lambda: cards(slack, GENERAL))
    (card,) = cards(slack, GENERAL)
    assert card["thread_ts"] == root
    fake_anthropic.script(text("Done in the thread."))
    await tap(slack, ADA, card, "Approve")
    await slack.wait_until(lambda: said(slack, GENERAL, "Done in the thread."))
    answer = next(m for m in slack.messages.values() if "Done in the thread." in m["text"])
    assert answer["thread_ts"] == root
    assert (app.config.workspace / "t.txt").exists()


async def test_always_approves_later_calls_of_the_same_scope_without_asking(bot, slack, fake_anthropic):
    app, _ = await bot()
    card = await ask_to_write(slack, fake_anthropic)
    fake_anthropic.script(text("Written."))
    await tap(slack, ADA, card, "Always: files in the workspace root in this chat")
    await slack.wait_until(lambda: said(slack, dm_of(ADA), "Written."))
    fake_anthropic.script(tool_use("fs_write", {"path": "more.txt", "content": "eggs"}),
                          text("Also written."))
    await slack.send("events_api", slack.dm_event(ADA, "write eggs too"))
    await slack.wait_until(lambda: said(slack, dm_of(ADA), "Also written."))
    assert (app.config.workspace / "more.txt").read_text() == "eggs"
    assert len(cards(slack, dm_of(ADA))) == 0 and len([m for m in slack.messages.values()
                                                      if "Approval needed" in visible_text(m)]) == 1


async def test_grants_are_listed_with_revoke_buttons_that_work(bot, slack, fake_anthropic):
    app, _ = await bot()
    card = await ask_to_write(slack, fake_anthropic)
    fake_anthropic.script(text("Written."))
    await tap(slack, ADA, card, "Always: files in the workspace root in this chat")
    await slack.wait_until(lambda: said(slack, dm_of(ADA), "Written."))
    await slack.send("events_api", slack.dm_event(ADA, "/grants"))
    await slack.wait_until(lambda: any(label.startswith("Revoke") for m in slack.messages.values()
                                       for label in buttons_of(m)))
    listing = next(m for m in slack.messages.values()
                   if any(label.startswith("Revoke") for label in buttons_of(m)))
    label = next(label for label in buttons_of(listing) if label.startswith("Revoke"))
    await tap(slack, ADA, listing, label)
    await slack.wait_until(lambda: said(slack, dm_of(ADA), "Revoked: "))
    assert await app.services.approvals.grants.listing() == []


async def test_an_expired_request_is_updated_to_say_so_and_loses_its_buttons(
        bot, slack, fake_anthropic, clock):
    app, _ = await bot()
    card = await ask_to_write(slack, fake_anthropic)
    clock.now += 3600
    assert await app.expiry.sweep() == 1
    await slack.wait_until(lambda: not has_buttons(slack.message(card["channel"], card["ts"])))
    assert "Expired at" in visible_text(slack.message(card["channel"], card["ts"]))
    await slack.wait_until(lambda: said(slack, dm_of(ADA), "expired — nothing ran"))


async def test_a_pending_request_survives_a_restart_and_its_buttons_still_work(bot, slack, fake_anthropic):
    app, channel = await bot()
    card = await ask_to_write(slack, fake_anthropic)
    await channel.stop()
    assert slack.connections == 0
    await bot(app)                      # a new channel: new Bolt app, new socket, same store
    fake_anthropic.script(text("Written after the restart."))
    await tap(slack, ADA, card, "Approve")
    await slack.wait_until(lambda: said(slack, dm_of(ADA), "Written after the restart."))
    assert (app.config.workspace / "notes.txt").read_text() == "milk"
    assert not has_buttons(slack.message(card["channel"], card["ts"]))


async def test_when_slack_refuses_the_card_the_request_arrives_with_approve_and_deny_commands(
        bot, slack, fake_anthropic):
    await bot()
    slack.fail("chat.postMessage", "invalid_blocks", when=lambda p: bool(p.get("blocks")))
    fake_anthropic.script(reply(text("I'll write it."),
                                tool_use("fs_write", {"path": "n.txt", "content": "x"})))
    await slack.send("events_api", slack.dm_event(ADA, "write x"))
    fallback = await slack.wait_for("chat.postMessage", lambda p: "/approve " in p.get("text", ""))
    assert fallback.params.get("mrkdwn") is False and not fallback.params.get("blocks")
    approval_id = fallback.params["text"].split("/approve ", 1)[1].split()[0]
    assert f"/deny {approval_id}" in fallback.params["text"] and "Create n.txt" in fallback.params["text"]


async def test_a_card_is_posted_without_buttons_recorded_then_given_them_and_again_after_a_restart(
        bot, slack, fake_anthropic):
    app, channel = await bot()
    card = await ask_to_write(slack, fake_anthropic)
    (posted,) = [c for c in slack.of("chat.postMessage")
                 if c.result and c.result.get("ts") == card["ts"]]
    assert not any(b.get("type") == "actions" for b in posted.params.get("blocks") or [])
    (pending,) = await app.services.approvals.pending()
    refs = await app.services.approvals.message_refs(pending.id)
    assert any(card["ts"] in ref for _, ref in refs)
    assert has_buttons(slack.message(card["channel"], card["ts"]))
    slack.message(card["channel"], card["ts"])["blocks"] = [            # the kill before the edit
        b for b in slack.message(card["channel"], card["ts"])["blocks"] if b["type"] != "actions"]
    assert not has_buttons(slack.message(card["channel"], card["ts"]))
    app.agent.add_approval_surface("slack", channel)
    await app.agent.show_pending(pending)                               # what a restart does
    await slack.wait_until(lambda: has_buttons(slack.message(card["channel"], card["ts"])))
