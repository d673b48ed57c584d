"""Kill -9 at chosen points, restart on the same store: nothing lost, nothing run twice, the user
told about anything in doubt, receipts verify (tests/crashkit.py runs a real `myclaw run`; the
invariants are in tests/crash_checks.py and are checked by `kit.finish()`)."""

from __future__ import annotations

import pytest

from tests.crashkit import Backend, backend_of, crash_kit, eventually
from tests.pg_support import on_both_backends

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
