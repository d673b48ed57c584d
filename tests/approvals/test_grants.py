"""Scoped "Always" on Telegram end to end: the real App, python-telegram-bot against the fake Bot
API, the fake Anthropic API, and shell_run in its sandbox. An Always covers what it names —
the same program, up to the same risk — and nothing else; /grants lists and revokes."""

from __future__ import annotations

import pytest

from channels.telegram import TelegramChannel
from tests.channels.telegram.test_telegram_approvals import ADA, data_of, has_buttons
from tests.fakes.anthropic_server import reply, text, tool_results, tool_use
from tests.fakes.telegram_server import channel_overrides
from tests.support.pg_support import on_both_backends
from tests.support.telegram_support import FAST

backend_name = on_both_backends()

SUPERVISED = {"senders": {f"telegram:{ADA}": "supervised"}}


@pytest.fixture
async def bot(app_factory, tg):
    app = await app_factory({**SUPERVISED, **channel_overrides(tg)},
                            env={"TELEGRAM_BOT_TOKEN": tg.token})
    channel = TelegramChannel(app.config, app.agent, settings=FAST)
    await channel.start()
    yield app
    await channel.stop()


def shell(command: str) -> dict:
    return tool_use("shell_run", {"command": command})


async def test_always_on_git_status_covers_git_log_but_not_other_programs_or_riskier_git(
        bot, tg, fake_anthropic):
    app = bot
    fake_anthropic.script(reply(shell("git status")))
    tg.private_message(ADA, "status please")
    request = await tg.wait_for_card(has_buttons)
    assert data_of(request, "Always: `git`")   # the button says what it covers
    fake_anthropic.script(text("Clean."))
    tg.tap(ADA, data_of(request, "Always"), request.result)
    await tg.wait_until(lambda: any(m["text"] == "Clean." for m in tg.messages.values()))

    # git log: same program, same risk → runs without asking.
    fake_anthropic.script(reply(shell("git log --oneline")), text("No commits yet."))
    tg.private_message(ADA, "log please")
    await tg.wait_until(lambda: any(m["text"] == "No commits yet." for m in tg.messages.values()))
    assert len(tg.cards(has_buttons)) == 1
    (result,) = tool_results(fake_anthropic.requests[-1].json)
    assert "permission_denied" not in str(result["content"])

    # ls: another program → asks again (with its own Always offer).
    fake_anthropic.script(reply(shell("ls -la")))
    tg.private_message(ADA, "list files")
    await tg.wait_for_card(lambda p: has_buttons(p) and "ls -la" in p["text"])

    # git push: same program but high risk → never covered (refused at supervised).
    fake_anthropic.script(reply(shell("git push origin main")), text("Not allowed."))
    tg.private_message(ADA, "push it")
    await tg.wait_until(lambda: any(m["text"] == "Not allowed." for m in tg.messages.values()))
    (refused,) = tool_results(fake_anthropic.requests[-1].json)
    assert refused["is_error"] and "permission_denied" in refused["content"]
    audit = await app.services.store.fetchall(
        "SELECT decision, outcome, detail FROM audit WHERE tool = 'shell_run' AND outcome = 'executed'")
    details = [row["detail"] for row in audit]
    assert any("git status" in d and "approved by telegram:4242" in d for d in details)
    assert any("git log --oneline" in d and "under grant" in d and "`git`" in d for d in details)


async def test_a_high_risk_call_shows_no_always_button_by_default(app_factory, tg, fake_anthropic):
    app = await app_factory({"senders": {f"telegram:{ADA}": "full"}, **channel_overrides(tg)},
                            env={"TELEGRAM_BOT_TOKEN": tg.token})
    channel = TelegramChannel(app.config, app.agent, settings=FAST)
    await channel.start()
    try:
        fake_anthropic.script(reply(shell("rm -rf build")))
        tg.private_message(ADA, "clean up")
        request = await tg.wait_for_card(has_buttons)
        labels = [b["text"] for row in request.params["reply_markup"]["inline_keyboard"]
                  for b in row]
        assert labels == ["Approve", "Deny"]
        assert "high" in request.params["text"]
    finally:
        await channel.stop()


async def test_slash_grants_lists_the_grants_with_a_revoke_button_and_revoking_asks_again(
        bot, tg, fake_anthropic):
    app = bot
    fake_anthropic.script(reply(shell("git status")))
    tg.private_message(ADA, "status please")
    request = await tg.wait_for_card(has_buttons)
    fake_anthropic.script(text("Clean."))
    tg.tap(ADA, data_of(request, "Always"), request.result)
    await tg.wait_until(lambda: any(m["text"] == "Clean." for m in tg.messages.values()))

    tg.private_message(ADA, "/grants", entities=[{"type": "bot_command", "offset": 0, "length": 7}])
    listing = await tg.wait_for("sendMessage", lambda p: "without asking" in p["text"])
    assert "shell_run: <code>git</code> (up to medium risk)" in listing.params["text"]
    (revoke,) = [b for row in listing.params["reply_markup"]["inline_keyboard"] for b in row]
    assert revoke["text"].startswith("Revoke: shell_run")
    tg.tap(ADA, revoke["callback_data"], listing.result)
    await tg.wait_for("sendMessage", lambda p: p["text"].startswith("Revoked: shell_run"))

    fake_anthropic.script(reply(shell("git log")))
    tg.private_message(ADA, "log please")
    await tg.wait_until(lambda: len(tg.cards(has_buttons)) == 2)
    rows = await app.services.store.fetchall("SELECT outcome FROM audit WHERE decision = 'grant'")
    assert [r["outcome"] for r in rows] == ["granted", "revoked"]


async def test_new_ends_the_conversations_grants(bot, tg, fake_anthropic):
    fake_anthropic.script(reply(shell("git status")))
    tg.private_message(ADA, "status please")
    request = await tg.wait_for_card(has_buttons)
    fake_anthropic.script(text("Clean."))
    tg.tap(ADA, data_of(request, "Always"), request.result)
    await tg.wait_until(lambda: any(m["text"] == "Clean." for m in tg.messages.values()))
    tg.private_message(ADA, "/new", entities=[{"type": "bot_command", "offset": 0, "length": 4}])
    await tg.wait_for("sendMessage", lambda p: "fresh conversation" in p["text"])
    fake_anthropic.script(reply(shell("git log")))
    tg.private_message(ADA, "log please")
    await tg.wait_until(lambda: len(tg.cards(has_buttons)) == 2)
