"""Several asks in one model step on Slack: one card listing every call with its whole preview,
Approve all / Deny all and buttons per call; each answer takes the one-way path, the turn
resumes once, every copy is redrawn from the store. The real App, slack-bolt against the fake."""

from __future__ import annotations

from tests.channels.slack.test_slack_approvals import cards, has_buttons, said, tap
from tests.fakes.anthropic_server import reply, text, tool_results, tool_use
from tests.fakes.slack_server import FakeSlack, buttons_of, visible_text
from tests.support.slack_support import ADA, dm_of


async def ask_batch(slack: FakeSlack, fake_anthropic, *names: str, content: str = "x") -> list[dict]:
    fake_anthropic.script(reply(text("Writing them."), *[
        tool_use("fs_write", {"path": name, "content": content}) for name in names]))
    await slack.send("events_api", slack.dm_event(ADA, "write the files"))
    await slack.wait_until(lambda: cards(slack, dm_of(ADA)))
    return cards(slack, dm_of(ADA))


def now(slack: FakeSlack, card: dict) -> dict:
    return slack.message(card["channel"], card["ts"])


async def test_two_asks_in_one_step_arrive_as_one_card_with_all_and_per_call_buttons(
        bot, slack, fake_anthropic):
    await bot()
    (card,) = await ask_batch(slack, fake_anthropic, "a.txt", "b.txt")
    shown = visible_text(card)
    assert "2 calls" in shown and "Create a.txt" in shown and "Create b.txt" in shown
    assert list(buttons_of(card)) == ["Approve all", "Deny all", "Approve 1", "Deny 1", "Always 1",
                                      "Approve 2", "Deny 2", "Always 2"]


async def test_approve_all_runs_every_call_and_resumes_the_turn_once(bot, slack, fake_anthropic):
    app, _ = await bot()
    (card,) = await ask_batch(slack, fake_anthropic, "a.txt", "b.txt")
    fake_anthropic.script(text("Both written."))
    await tap(slack, ADA, card, "Approve all")
    await slack.wait_until(lambda: said(slack, dm_of(ADA), "Both written."))
    assert (app.config.workspace / "a.txt").exists() and (app.config.workspace / "b.txt").exists()
    assert len(tool_results(fake_anthropic.last_request.json)) == 2
    await slack.wait_until(lambda: not has_buttons(now(slack, card)))
    assert visible_text(now(slack, card)).count("Approved by") == 2


async def test_answering_one_call_redraws_the_card_keeping_the_other_calls_buttons(
        bot, slack, fake_anthropic):
    app, _ = await bot()
    (card,) = await ask_batch(slack, fake_anthropic, "a.txt", "b.txt")
    await tap(slack, ADA, card, "Deny 1")
    await slack.wait_until(lambda: "Deny 1" not in buttons_of(now(slack, card)))
    assert list(buttons_of(now(slack, card))) == ["Approve all", "Deny all", "Approve 2", "Deny 2",
                                                  "Always 2"]
    fake_anthropic.script(text("Only b."))
    await tap(slack, ADA, now(slack, card), "Approve 2")
    await slack.wait_until(lambda: said(slack, dm_of(ADA), "Only b."))
    assert not (app.config.workspace / "a.txt").exists()
    assert (app.config.workspace / "b.txt").exists()


async def test_previews_that_do_not_fit_one_card_are_uploaded_whole_and_never_cut(
        bot, slack, fake_anthropic):
    await bot()
    content = "".join(f"line {n:04d} of a long file {'y' * 20}\n" for n in range(230))  # ~10,000
    names = [f"f{n}.txt" for n in range(8)]
    (card,) = await ask_batch(slack, fake_anthropic, *names, content=content)
    assert len(card["blocks"]) <= 50
    wanted = "".join(f"+{line}\n" for line in content.splitlines())
    uploaded = [u["data"].decode() for u in slack.uploads.values()]
    in_card = visible_text(card)
    assert uploaded, "eight 10,000-character previews cannot all fit one card"
    for name in names:
        assert any(f"b/{name}" in u and wanted in u + "\n" for u in uploaded) or \
            f"Create {name}" in in_card
    assert visible_text(card).count("is in the file above") == len(uploaded)


async def test_a_batch_that_lapses_unanswered_is_closed_whole_by_the_sweep(
        bot, slack, fake_anthropic, clock):
    app, _ = await bot()
    (card,) = await ask_batch(slack, fake_anthropic, "a.txt", "b.txt")
    clock.now += 301
    assert await app.expiry.sweep() == 2
    await slack.wait_until(lambda: not has_buttons(now(slack, card)))
    assert visible_text(now(slack, card)).count("Expired at") == 2
    assert not (app.config.workspace / "a.txt").exists()
