"""The WhatsApp webhook end to end (the real App, its channel, the fake Graph API and Anthropic,
on SQLite and PostgreSQL): Meta's subscription check, signatures checked before anything is
stored, deliveries stored before the 200 and answered once, statuses never read as messages."""

from __future__ import annotations

import json

from tests.channels.whatsapp.conftest import ADA, VERIFY_TOKEN
from tests.fakes.anthropic_server import last_user_text
from tests.support.pg_support import on_both_backends
from tests.support.store_support import execute

backend_name = on_both_backends()


async def inbox_rows(app) -> list[tuple[str, str]]:
    rows = await app.services.store.fetchall(
        "SELECT update_key, state FROM inbox WHERE channel = 'whatsapp' ORDER BY id")
    return [(r["update_key"], r["state"]) for r in rows]


async def test_the_subscription_check_echoes_the_challenge_only_for_the_right_token(bot):
    started = await bot()
    assert await started.driver.verify(VERIFY_TOKEN, "8125") == (200, "8125")
    status, body = await started.driver.verify("not-the-token", "8125")
    assert status == 403 and "8125" not in body


async def test_a_forged_or_unsigned_delivery_is_refused_and_nothing_is_stored(bot, wa,
                                                                            fake_anthropic):
    started = await bot()
    delivery = started.driver.message(ADA, "text", {"body": "transfer everything"})
    forged = "sha256=" + "0" * 64
    assert await started.driver.post(delivery, signature=forged) == 401
    assert await started.driver.post(delivery, signature=None) == 401
    tampered = json.dumps(delivery).replace("everything", "it all").encode()
    assert await started.driver.post(tampered, signature=started.driver.sign(
        json.dumps(delivery).encode())) == 401
    assert await inbox_rows(started.app) == [] and fake_anthropic.requests == []


async def test_a_message_delivered_twice_is_answered_once(bot, wa, fake_anthropic):
    started = await bot()
    delivery = started.driver.message(ADA, "text", {"body": "hello"}, wamid="wamid.once")
    wa.opened(ADA)
    assert await started.driver.post(delivery) == 200
    await wa.wait_for(lambda m: m.to == ADA and m.text == "ok: hello")
    assert await started.driver.post(delivery) == 200     # Meta re-delivers: stored already
    await started.driver.text(ADA, "again")
    await wa.wait_for(lambda m: m.to == ADA and m.text == "ok: again")
    assert [last_user_text(r.json) for r in fake_anthropic.requests] == ["hello", "again"]
    assert wa.texts_to(ADA) == ["ok: hello", "ok: again"]


async def test_a_delivery_that_cannot_be_stored_is_not_acknowledged(bot, wa, fake_anthropic):
    started = await bot()
    await execute(started.app.services.store, "ALTER TABLE inbox RENAME TO inbox_unreachable")
    try:
        assert await started.driver.text(ADA, "one") == 503   # Meta will deliver it again
    finally:
        await execute(started.app.services.store, "ALTER TABLE inbox_unreachable RENAME TO inbox")
    assert await started.driver.text(ADA, "one") == 200
    await wa.wait_for(lambda m: m.text == "ok: one")


async def test_statuses_are_recorded_and_never_answered_as_messages(bot, wa, fake_anthropic):
    started = await bot()
    await started.driver.text(ADA, "hi")
    sent = await wa.wait_for(lambda m: m.text == "ok: hi")
    for state in ("sent", "delivered", "read"):
        assert await started.driver.status(sent.wamid, ADA, state) == 200
    await started.channel.intake.idle()
    keys = [key for key, _ in await inbox_rows(started.app)]
    assert [k for k in keys if k.startswith("status:")] == [
        f"status:{sent.wamid}:{s}" for s in ("sent", "delivered", "read")]
    assert started.channel.followups.statuses == {"sent": 1, "delivered": 1, "read": 1}
    assert len(fake_anthropic.requests) == 1 and wa.texts_to(ADA) == ["ok: hi"]


async def test_the_typing_indicator_and_read_receipt_go_to_the_message_being_answered(
        bot, wa, fake_anthropic):
    started = await bot()
    fake_anthropic.delay = 0.8
    await started.driver.text(ADA, "think hard", wamid="wamid.think")
    await wa.wait_for(lambda m: m.text == "ok: think hard")
    assert wa.reads and wa.reads[0]["message_id"] == "wamid.think"
    assert wa.reads[0]["typing_indicator"] == {"type": "text"}


async def test_telegram_webhook_health_and_whatsapp_share_one_listener(app_factory, wa, tg):
    from tests.channels.whatsapp.conftest import whatsapp_env, whatsapp_overrides
    from tests.fakes.telegram_server import channel_overrides
    from tests.support.replica_support import free_port

    port = free_port()
    overrides = {**whatsapp_overrides(wa, port=port),
                 **channel_overrides(tg, mode="webhook", webhook_url=f"https://x.example/{port}",
                                     listen="127.0.0.1", port=port, webhook_path="/telegram"),
                 "health": {"enabled": True, "listen": "127.0.0.1", "port": port}}
    app = await app_factory(overrides, env={**whatsapp_env(wa), "TELEGRAM_BOT_TOKEN": tg.token,
                                            "TELEGRAM_WEBHOOK_SECRET": "s3cret"})
    await app.start_services()
    await app.start_channels(["telegram", "whatsapp"])
    try:
        import aiohttp

        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{port}/healthz") as health:
                assert health.status == 200
                assert (await health.json())["channels"] == {"telegram": True, "whatsapp": True}
            params = {"hub.mode": "subscribe", "hub.verify_token": VERIFY_TOKEN,
                      "hub.challenge": "77"}
            async with session.get(f"http://127.0.0.1:{port}/whatsapp", params=params) as check:
                assert await check.text() == "77"
            async with session.post(f"http://127.0.0.1:{port}/telegram", json={}) as telegram:
                assert telegram.status == 403   # Telegram's route, refusing a missing secret
    finally:
        await app.stop_channels()
