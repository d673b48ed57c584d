"""Strangers on Slack: pairing by tap. A stranger's message asks the approvers, in their DMs,
with buttons; a tap on "Allow" runs `/pair allow …` as the approver typed it, and the stranger
is told where they asked. User groups raise levels as configured. Real App and slack-bolt."""

from __future__ import annotations

from tests.channels.slack.test_slack_approvals import tap
from tests.fakes.anthropic_server import text
from tests.fakes.slack_server import buttons_of
from tests.support.slack_support import ADA, BOB, GENERAL, dm_of

STRANGER = "USTRANGER"


def notice_with(slack, channel: str, label: str) -> dict | None:
    return next((m for (c, _), m in slack.messages.items() if c == channel and label in buttons_of(m)),
                None)


async def test_a_stranger_is_let_in_by_an_approvers_tap(bot, slack, fake_anthropic):
    app, _ = await bot(overrides={"approvals": {"approvers": [f"slack:{BOB}"]}})
    await slack.send("events_api", slack.dm_event(STRANGER, "hello?"))
    await slack.wait_until(lambda: any("pairing code" in t for t in slack.texts_in(dm_of(STRANGER))))
    await slack.wait_until(lambda: notice_with(slack, dm_of(BOB), "Allow: supervised"))
    ask = notice_with(slack, dm_of(BOB), "Allow: supervised")
    assert f"slack:{STRANGER}" in ask["text"]
    await tap(slack, BOB, ask, "Allow: supervised")
    await slack.wait_until(lambda: len(slack.texts_in(dm_of(STRANGER))) >= 2)
    access = await app.services.senders.autonomy(f"slack:{STRANGER}")
    assert str(getattr(access, "level", access)) == "supervised"
    fake_anthropic.script(text("Welcome."))
    await slack.send("events_api", slack.dm_event(STRANGER, "hi again"))
    await slack.wait_until(lambda: "Welcome." in slack.texts_in(dm_of(STRANGER)))


async def test_a_tap_on_the_pairing_buttons_by_a_non_approver_lets_nobody_in(bot, slack, fake_anthropic):
    await bot(overrides={"approvals": {"approvers": [f"slack:{BOB}"]}})
    await slack.send("events_api", slack.dm_event(STRANGER, "hello?"))
    await slack.wait_until(lambda: notice_with(slack, dm_of(BOB), "Allow: supervised"))
    ask = notice_with(slack, dm_of(BOB), "Allow: supervised")
    payload = slack.tap_payload(ADA, ask["channel"], ask["ts"], "Allow: supervised")
    payload["channel"] = {"id": dm_of(ADA)}          # Ada replays Bob's button in her own DM
    await slack.send("interactive", payload)
    await slack.wait_until(lambda: any("Only an approver" in t for t in slack.texts_in(dm_of(ADA))))
    assert len(slack.texts_in(dm_of(STRANGER))) == 1


async def test_a_user_group_raises_the_level_of_its_members(bot, slack, fake_anthropic):
    slack.usergroups["S0ADMINS"] = [ADA]
    await bot(senders={"unknown": "pairing"}, slack_section={"groups": {"S0ADMINS": "full"}})
    fake_anthropic.script(text("Hi, admin."))
    await slack.send("events_api", slack.channel_event(GENERAL, ADA, "<@UBOT> /whoami"))
    await slack.wait_until(lambda: any("full" in t for t in slack.texts_in(GENERAL)))
    assert slack.of("usergroups.users.list")[0].params["usergroup"] == "S0ADMINS"
