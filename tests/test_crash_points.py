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
