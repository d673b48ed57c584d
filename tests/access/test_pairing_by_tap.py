"""Pairing by tap: a stranger who writes makes every approver get a private message with Allow /
Deny buttons; one tap lets them in and they are told. The real App and libraries against the fake
Telegram and Discord; `/whoami` answers a stranger with their id and nothing else."""

from __future__ import annotations

import pytest

from channels.telegram import TelegramChannel
from tests.channels.discord.test_discord_e2e import GUILD, buttons, discord_fake  # noqa: F401
from tests.channels.telegram.test_telegram_e2e import sent_to
from tests.fakes.telegram_server import channel_overrides
from tests.support.pg_support import on_both_backends
from tests.support.telegram_support import FAST

backend_name = on_both_backends()

ADA, STRANGER = 4242, 7777


@pytest.fixture
async def telegram_bot(app_factory, tg):
    app = await app_factory({"senders": {f"telegram:{ADA}": "full", "unknown": "pairing"},
                             "approvals": {"approvers": [f"telegram:{ADA}"]},
                             **channel_overrides(tg)}, env={"TELEGRAM_BOT_TOKEN": tg.token})
    channel = TelegramChannel(app.config, app.agent, settings=FAST)
    await channel.start()
    app.services.delivery.register("telegram", channel)
    yield app
    await channel.stop()


def keyboard(params: dict) -> dict[str, str]:
    markup = params.get("reply_markup") or {}
    return {b["text"]: b["callback_data"] for row in markup.get("inline_keyboard", []) for b in row}


async def test_an_approver_lets_a_stranger_in_with_one_tap_and_the_stranger_is_told(
        telegram_bot, tg, fake_anthropic):
    app = telegram_bot
    tg.private_message(STRANGER, "hi, can I use you?")
    ask = await tg.wait_for("sendMessage", lambda p: p["chat_id"] == ADA and "wants to talk" in p["text"])
    assert f"telegram:{STRANGER} (<code>Ada</code>)" in ask.params["text"]
    choices = keyboard(ask.params)
    assert list(choices) == ["Allow: read_only", "Allow: supervised", "Deny"]
    tg.tap(ADA, choices["Allow: read_only"], ask.result)
    await tg.wait_for("sendMessage", lambda p: p["chat_id"] == STRANGER and "You're in" in p["text"])
    assert await app.services.senders.autonomy(f"telegram:{STRANGER}") == "read_only"
    fake_anthropic.script()
    tg.private_message(STRANGER, "/whoami", entities=[{"type": "bot_command", "offset": 0, "length": 7}])
    await tg.wait_for("sendMessage",
                      lambda p: p["chat_id"] == STRANGER and "Autonomy: read_only" in p["text"])
    rows = await app.services.store.fetchall("SELECT sender, outcome FROM audit WHERE decision = 'pair'")
    assert [(r["sender"], r["outcome"]) for r in rows] == [(f"telegram:{ADA}", "approved")]


async def test_a_stranger_cannot_tap_themselves_in(telegram_bot, tg):
    app = telegram_bot
    tg.private_message(STRANGER, "hi")
    ask = await tg.wait_for("sendMessage", lambda p: p["chat_id"] == ADA and "wants to talk" in p["text"])
    # The stranger forges the approver's button: it runs as the stranger, who has no level.
    query = tg.tap(STRANGER, keyboard(ask.params)["Allow: supervised"], ask.result, name="Ana")
    await tg.wait_for("answerCallbackQuery", lambda p: p["callback_query_id"] == query)
    await tg.wait_until(lambda: any("Still waiting" in t for t in sent_to(tg, ADA) + sent_to(tg, STRANGER)))
    assert await app.services.senders.autonomy(f"telegram:{STRANGER}") == "pairing"


async def test_whoami_answers_a_stranger_with_their_id_only(telegram_bot, tg):
    tg.private_message(STRANGER, "/whoami", entities=[{"type": "bot_command", "offset": 0, "length": 7}])
    reply = await tg.wait_for("sendMessage", lambda p: p["chat_id"] == STRANGER)
    assert f"telegram:{STRANGER}" in reply.params["text"] and "Autonomy" not in reply.params["text"]
    assert not tg.of("sendMessage", lambda p: p["chat_id"] == ADA)


async def test_a_denied_stranger_is_told_and_stays_out(telegram_bot, tg):
    app = telegram_bot
    tg.private_message(STRANGER, "hi")
    ask = await tg.wait_for("sendMessage", lambda p: p["chat_id"] == ADA and "wants to talk" in p["text"])
    tg.tap(ADA, keyboard(ask.params)["Deny"], ask.result)
    await tg.wait_for("sendMessage", lambda p: p["chat_id"] == STRANGER and "did not let you in" in p["text"])
    assert await app.services.senders.autonomy(f"telegram:{STRANGER}") == "pairing"


ALICE, STRANGER_D, ALICE_DM = 4_200_000_000_000_001, 4_200_000_000_000_003, 6_000_000_000_000_001


async def test_on_discord_an_approver_lets_a_stranger_in_by_clicking_in_a_dm(
        app_factory, discord_fake):  # noqa: F811
    from channels import discord as discord_bot

    app = await app_factory({"senders": {f"discord:{ALICE}": "full", "unknown": "pairing"},
                             "approvals": {"approvers": [f"discord:{ALICE}"]},
                             "discord": {"guilds": [GUILD.id], "guild_ready_timeout": 0.05}},
                            env={"DISCORD_BOT_TOKEN": discord_fake.token})
    channel = discord_bot.create(app.config, app.agent)
    await channel.start()
    app.services.delivery.register("discord", channel)
    try:
        stranger_channel = GUILD.channel_ids[0]
        await discord_fake.send_message(author_id=STRANGER_D, content="hello bot",
                                        channel_id=stranger_channel, guild_id=GUILD.id,
                                        mentions_bot=True)
        await discord_fake.wait_for(lambda: discord_fake.dm_channel_of(ALICE))
        dm = discord_fake.dm_channel_of(ALICE)
        ask = await discord_fake.wait_for_buttons(dm)
        assert "wants to talk" in ask["content"]
        allow = buttons(ask)["Allow: supervised"]
        click = await discord_fake.click(message_id=int(ask["id"]), custom_id=allow, user_id=ALICE)
        await discord_fake.wait_for(lambda: discord_fake.followups(click["token"]))
        assert await app.services.senders.autonomy(f"discord:{STRANGER_D}") == "supervised"
    finally:
        await channel.stop()
