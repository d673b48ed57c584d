"""Telegram and the durable inbox, end to end (the real App, the real python-telegram-bot against
the fake Bot API, on SQLite and PostgreSQL): an update is confirmed to Telegram only once it is
stored, a re-delivered update is answered once, and updates stored but never run before a
restart run once, in order, after it."""

from __future__ import annotations

import asyncio
import json

import pytest

from bot.conversation.inbox import Claim, Entry, Inbox, InboxSettings
from channels.telegram import TelegramChannel
from tests.channels.telegram.test_telegram_startup import SECRET, free_port
from tests.fakes.anthropic_server import last_user_text, text
from tests.fakes.telegram_server import FakeTelegram, channel_overrides
from tests.support.pg_support import on_both_backends
from tests.support.store_support import execute
from tests.support.telegram_support import FAST

backend_name = on_both_backends()

ADA, BOB = 4242, 4343
SENDERS = {f"telegram:{ADA}": "supervised", f"telegram:{BOB}": "supervised"}


@pytest.fixture
async def start(app_factory, tg):
    """`await start(app=None, **telegram)` → (app, channel): a started channel on a new App (or
    on `app`), in polling mode unless told otherwise. Channels are stopped at teardown."""
    started: list[TelegramChannel] = []

    async def starter(app=None, env=None, **telegram):
        if app is None:
            app = await app_factory({"senders": SENDERS, **channel_overrides(tg, **telegram)},
                                    env={"TELEGRAM_BOT_TOKEN": tg.token, **(env or {})})
        channel = TelegramChannel(app.config, app.agent, settings=FAST)
        await channel.start()
        started.append(channel)
        return app, channel

    yield starter
    for channel in reversed(started):
        await channel.stop()


@pytest.fixture
def webhook(start):
    async def starter():
        port = free_port()
        return await start(env={"TELEGRAM_WEBHOOK_SECRET": SECRET}, mode="webhook",
                           webhook_url=f"http://127.0.0.1:{port}/hook", listen="127.0.0.1",
                           port=port, webhook_path="/hook")
    return starter


def answers(tg: FakeTelegram, chat: int) -> list[str]:
    return [m["text"] for (c, _), m in sorted(tg.messages.items(), key=lambda kv: kv[0][1]) if c == chat]


def message(tg: FakeTelegram, user: int, words: str, update_id: int | None = None) -> dict:
    update = {"message": tg.make_message({"id": user, "type": "private", "first_name": "Ada"},
                                         user, words)}
    return {"update_id": update_id, **update} if update_id is not None else update


async def store_fails(store) -> None:
    """Every insert into the inbox fails from now on (the table is out of reach)."""
    await execute(store, "ALTER TABLE inbox RENAME TO inbox_unreachable")


async def store_recovers(store) -> None:
    await execute(store, "ALTER TABLE inbox_unreachable RENAME TO inbox")


async def rows(store) -> list[tuple[str, str]]:
    found = await store.fetchall("SELECT update_key, state FROM inbox ORDER BY id")
    return [(r["update_key"], r["state"]) for r in found]


async def test_polling_does_not_confirm_updates_it_could_not_store(start, tg, fake_anthropic):
    app, _ = await start()
    await store_fails(app.services.store)
    fetched_before = len(tg.of("getUpdates"))
    update = tg.inject(message(tg, ADA, "one"))
    await tg.wait_until(lambda: len(tg.of("getUpdates")) >= fetched_before + 3, timeout=10)
    offsets = [int(c.params.get("offset") or 0) for c in tg.of("getUpdates")]
    assert max(offsets) <= update["update_id"]   # fetched again and again, never confirmed
    assert fake_anthropic.requests == [] and answers(tg, ADA) == []
    await store_recovers(app.services.store)
    await tg.wait_until(lambda: answers(tg, ADA) == ["ok: one"], timeout=10)
    await tg.wait_for("getUpdates", lambda p: int(p.get("offset") or 0) > update["update_id"])
    assert [last_user_text(r.json) for r in fake_anthropic.requests] == ["one"]


async def test_an_update_polled_again_after_a_restart_is_answered_once(start, tg, fake_anthropic):
    app, channel = await start()
    first = tg.inject(message(tg, ADA, "one"))
    await tg.wait_until(lambda: answers(tg, ADA) == ["ok: one"])
    await channel.stop()
    # The restarted poller starts without an offset; Telegram sends the update once more.
    tg.inject(first)
    tg.inject(message(tg, ADA, "two"))
    await start(app)
    await tg.wait_until(lambda: answers(tg, ADA) == ["ok: one", "ok: two"])
    await tg.wait_for("getUpdates", lambda p: int(p.get("offset") or 0) > tg.last_update_id)
    assert [last_user_text(r.json) for r in fake_anthropic.requests] == ["one", "two"]


async def test_a_webhook_update_delivered_twice_is_answered_once(webhook, tg, fake_anthropic):
    await webhook()
    update = message(tg, ADA, "one", update_id=501)
    assert await tg.deliver_to_webhook(update) == 200
    assert await tg.deliver_to_webhook(update) == 200   # stored already: acknowledged, not run
    assert await tg.deliver_to_webhook(message(tg, ADA, "two", update_id=502)) == 200
    await tg.wait_until(lambda: answers(tg, ADA) == ["ok: one", "ok: two"])
    assert [last_user_text(r.json) for r in fake_anthropic.requests] == ["one", "two"]


async def test_the_webhook_answers_503_when_the_update_cannot_be_stored_and_the_retry_is_answered(
        webhook, tg, fake_anthropic):
    app, _ = await webhook()
    update = message(tg, ADA, "one", update_id=601)
    await store_fails(app.services.store)
    assert await tg.deliver_to_webhook(update) == 503
    assert fake_anthropic.requests == []
    await store_recovers(app.services.store)
    assert await tg.deliver_to_webhook(update) == 200   # Telegram's re-delivery
    await tg.wait_until(lambda: answers(tg, ADA) == ["ok: one"])
    assert await tg.deliver_to_webhook(update) == 200
    assert await tg.deliver_to_webhook(message(tg, ADA, "two", update_id=602)) == 200
    await tg.wait_until(lambda: answers(tg, ADA) == ["ok: one", "ok: two"])


async def test_updates_stored_but_not_started_before_a_shutdown_run_once_in_order_after_it(
        start, tg, fake_anthropic):
    def responder(body):
        said = last_user_text(body)
        return text(f"ok: {said}", delay=3600 if said == "one" else 0)   # "one" never answers

    fake_anthropic.responder = responder
    app, channel = await start()
    for words in ("one", "two", "three"):
        tg.inject(message(tg, ADA, words))
    await fake_anthropic.wait_for_requests(1)
    await tg.wait_until(lambda: len(tg.of("getUpdates")) >= 2)
    store = app.services.store
    assert [key for key, _ in await rows(store)] == ["1", "2", "3"]
    await app.agent.shutdown(grace=0)   # as on SIGTERM: the hung turn is cancelled
    await channel.stop()
    assert [state for _, state in await rows(store)] == ["done", "pending", "pending"]
    assert not any("send that again" in t for t in answers(tg, ADA))

    await start()   # a fresh App on the same store
    # (How the cut-off "one" is carried into the next turn is the turn recovery's business.)
    await tg.wait_until(lambda: len(answers(tg, ADA)) == 3, timeout=10)
    assert answers(tg, ADA)[1].endswith("two") and answers(tg, ADA)[2] == "ok: three"
    asked = [last_user_text(r.json) for r in fake_anthropic.requests]
    assert len(asked) == 3 and asked[1].endswith("two") and asked[2] == "three"


async def test_updates_left_by_a_killed_process_run_once_in_order_after_the_restart(
        start, app_factory, tg, fake_anthropic):
    app = await app_factory({"senders": SENDERS, **channel_overrides(tg)},
                            env={"TELEGRAM_BOT_TOKEN": tg.token})
    # What a run killed with SIGKILL leaves: three stored updates, the first one claimed.
    killed = Inbox(app.services.store, app.services.inbox.replica)
    updates = [{"update_id": 70 + i, **message(tg, ADA if i != 1 else BOB, words)}
               for i, words in enumerate(("one", "two", "three"))]
    stored = await killed.put("telegram", [
        Entry(str(u["update_id"]), str(u["message"]["chat"]["id"]), json.dumps(u)) for u in updates])
    await killed.claim(stored[0])
    _, channel = await start(app)
    await tg.wait_until(lambda: answers(tg, ADA) == ["ok: one", "ok: three"]
                        and answers(tg, BOB) == ["ok: two"], timeout=10)
    await asyncio.wait_for(channel.application.update_queue.join(), 5)   # every row finished
    asked = [last_user_text(r.json) for r in fake_anthropic.requests]
    assert asked.index("one") < asked.index("three") and sorted(asked) == ["one", "three", "two"]
    assert [state for _, state in await rows(app.services.store)] == ["done"] * 3


async def test_each_chat_is_answered_in_order_while_chats_run_side_by_side(start, tg, fake_anthropic):
    def responder(body):
        said = last_user_text(body)
        return text(f"ok: {said}", delay=0.3 if said.endswith(" 0") else 0)

    fake_anthropic.responder = responder
    await start()
    for i in range(4):
        tg.inject(message(tg, ADA, f"ada {i}"))
        tg.inject(message(tg, BOB, f"bob {i}"))
    await tg.wait_until(lambda: len(answers(tg, ADA)) == 4 and len(answers(tg, BOB)) == 4,
                        timeout=10)
    assert answers(tg, ADA) == [f"ok: ada {i}" for i in range(4)]
    assert answers(tg, BOB) == [f"ok: bob {i}" for i in range(4)]


async def test_an_update_a_dead_process_left_is_taken_over_once_its_lease_lapses(
        app_factory, start, tg, fake_anthropic):
    app = await app_factory({"senders": SENDERS, "inbox": {"lease_seconds": 3},
                             **channel_overrides(tg)}, env={"TELEGRAM_BOT_TOKEN": tg.token})
    await start(app)
    # Another replica stored and claimed this update, then was killed with SIGKILL.
    dead = Inbox(app.services.store, "dead-replica", InboxSettings(lease_seconds=3))
    update = {"update_id": 90, **message(tg, ADA, "left behind")}
    (row,) = await dead.put("telegram", [Entry("90", str(ADA), json.dumps(update))])
    assert await dead.claim(row) is Claim.CLAIMED
    await tg.wait_until(lambda: answers(tg, ADA) == ["ok: left behind"], timeout=15)
    assert [last_user_text(r.json) for r in fake_anthropic.requests] == ["left behind"]
