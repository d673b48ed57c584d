"""Approvals on a real store on disk: persisted before shown, resolved exactly once, by the
right person, before expiry — across coroutines, connections and processes."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
from pathlib import Path
from typing import Any

import pytest

from bot.approvals.grants import Scope
from bot.approvals.records import ApprovalRequest
from bot.approvals.service import Approvals
from bot.core.tool import args_hash
from bot.store.sqlite import Store
from tests.support.pg_support import on_both_backends
from tests.support.store_support import execute

backend_name = on_both_backends()

OWNER, APPROVER, STRANGER = "telegram:1", "telegram:99", "telegram:666"
REPO_ROOT = Path(__file__).resolve().parents[2]


class Clock:
    """An injectable clock the tests move by hand."""

    def __init__(self, now: float = 1_700_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def approvals(store: Store, clock: Clock) -> Approvals:
    return Approvals(store, timeout_seconds=300, approvers=[APPROVER], clock=clock)


async def ask(approvals: Approvals, session: str = "s1", tool: str = "fs_write",
              args: dict[str, Any] | None = None,
              scope: Scope | None = Scope("folder:notes", "files in `notes/`")) -> ApprovalRequest:
    return await approvals.create(
        session_id=session, sender=OWNER, chat="100", channel="telegram", tool=tool,
        tool_use_id="toolu_1", args=args if args is not None else {"path": "notes/a.md", "text": "hé"},
        risk="medium", summary="Write notes/a.md (3 bytes)", scope=scope)


async def snapshot(store: Store) -> list[tuple]:
    """Everything a tap could change (approvals and grants), for before/after checks."""
    rows = await store.fetchall("SELECT * FROM approvals ORDER BY id")
    auto = await store.fetchall("SELECT * FROM grants ORDER BY id")
    return [tuple(r) for r in rows] + [tuple(r) for r in auto]


async def audit_rows(store: Store) -> list[dict[str, Any]]:
    return [dict(r) for r in await store.fetchall("SELECT * FROM audit ORDER BY id")]


# --- creation ----------------------------------------------------------------------------


async def test_a_request_is_in_the_store_before_it_is_returned(approvals, store_backend, clock):
    request = await ask(approvals)
    async with store_backend.open() as other_connection:
        row = await other_connection.fetchone("SELECT * FROM approvals WHERE id = ?", (request.id,))
    assert row is not None and row["status"] == "pending"
    assert row["expires_at"] == clock.now + 300
    assert json.loads(row["args"]) == {"path": "notes/a.md", "text": "hé"}
    assert row["args_hash"] == args_hash({"text": "hé", "path": "notes/a.md"})


async def test_ids_are_unguessable_and_fit_in_telegram_callback_data(approvals):
    ids = {(await ask(approvals)).id for _ in range(20)}
    assert len(ids) == 20
    assert all(len(f"approve:{i}".encode()) <= 64 and len(i) == 16 for i in ids)


def test_the_args_hash_is_canonical():
    assert args_hash({"b": 1, "a": "é"}) == args_hash({"a": "é", "b": 1})
    assert args_hash({"a": 1}) != args_hash({"a": "1"})


# --- the one winner ------------------------------------------------------------------------


def fifty_taps(approval_id: str) -> list[tuple[str, str]]:
    resolvers = [OWNER, APPROVER, STRANGER, "discord:7"]
    choices = ["approve", "deny", "always"]
    return [(resolvers[i % 4], choices[i % 3]) for i in range(50)]


async def test_fifty_concurrent_taps_produce_exactly_one_outcome(approvals, store):
    request = await ask(approvals)
    taps = fifty_taps(request.id)
    results = await asyncio.gather(*(approvals.resolve(request.id, who, choice) for who, choice in taps))
    winners = [(tap, r) for tap, r in zip(taps, results, strict=True) if r.ok]
    assert len(winners) == 1
    (who, choice), won = winners[0]
    assert who in (OWNER, APPROVER)
    stored = await approvals.get(request.id)
    assert stored.status == won.status == ("denied" if choice == "deny" else "approved")
    assert stored.resolved_by == who
    for (tapper, _), result in zip(taps, results, strict=True):
        if not result.ok and tapper in (STRANGER, "discord:7"):
            assert result.reason == f"Only {OWNER} or an approver can answer this request."
        elif not result.ok:
            assert result.reason.startswith("This request was already")
    assert len([a for a in await audit_rows(store) if request.id in a["detail"]]) == 50


async def test_two_connections_to_the_same_database_still_produce_one_winner(store_backend, clock):
    async with store_backend.open() as first, store_backend.open() as second:
        via_first = Approvals(first, approvers=[APPROVER], clock=clock)
        via_second = Approvals(second, approvers=[APPROVER], clock=clock)
        request = await ask(via_first)
        taps = fifty_taps(request.id)
        results = await asyncio.gather(*(
            (via_first if i % 2 else via_second).resolve(request.id, who, choice)
            for i, (who, choice) in enumerate(taps)))
        assert sum(r.ok for r in results) == 1
        assert (await via_second.get(request.id)).status in ("approved", "denied")


async def test_a_second_tap_changes_nothing_and_says_who_answered(approvals, store):
    request = await ask(approvals)
    first = await approvals.resolve(request.id, OWNER, "approve")
    assert first.ok and first.status == "approved" and first.request.args == request.args
    before = await snapshot(store)
    second = await approvals.resolve(request.id, OWNER, "deny")
    assert not second.ok
    assert second.reason == f"This request was already approved by {OWNER}."
    assert await snapshot(store) == before


async def test_a_denied_request_cannot_be_approved_afterwards(approvals):
    request = await ask(approvals)
    assert (await approvals.resolve(request.id, APPROVER, "deny")).status == "denied"
    late = await approvals.resolve(request.id, OWNER, "approve")
    assert not late.ok and late.reason == f"This request was already denied by {APPROVER}."


# --- refusals: forged ids, strangers, expiry ----------------------------------------------


# The random id is named, not shown: parallel workers must collect the same test names.
@pytest.mark.parametrize("forged", [
    pytest.param(secrets.token_urlsafe(12), id="random-token"), "", "x" * 5000,
    "'; DROP TABLE approvals; --", "%", "_" * 16,
    "abcdefghijklmnop\n", "\x00" * 16, "ab/cd?ef#gh&ij=k", None, 12345,
])
async def test_a_forged_id_is_refused_and_changes_nothing(approvals, store, forged):
    await ask(approvals)
    before = await snapshot(store)
    result = await approvals.resolve(forged, OWNER, "approve")
    assert not result.ok and result.reason == "Unknown approval request."
    assert result.request is None
    assert await snapshot(store) == before
    assert await approvals.get(forged) is None
    assert await approvals.message_ref(forged) is None
    assert (await audit_rows(store))[-1]["outcome"] == "refused"


async def test_a_strangers_tap_is_refused_with_its_reason(approvals, store):
    request = await ask(approvals)
    before = await snapshot(store)
    result = await approvals.resolve(request.id, STRANGER, "approve")
    assert not result.ok
    assert result.reason == f"Only {OWNER} or an approver can answer this request."
    assert await snapshot(store) == before
    last = (await audit_rows(store))[-1]
    assert (last["sender"], last["outcome"], last["tool"]) == (STRANGER, "refused", "fs_write")


async def test_an_approver_may_answer_someone_elses_request(approvals):
    request = await ask(approvals)
    result = await approvals.resolve(request.id, APPROVER, "approve")
    assert result.ok and result.request.resolved_by == APPROVER


@pytest.mark.parametrize(("who", "approvers", "may"), [
    (OWNER, (), True),                                  # the requester answers their own
    (APPROVER, (APPROVER,), True),                      # a configured approver answers anyone's
    (STRANGER, (APPROVER,), False),
    ("cli:local", (), True),                            # the person at the bot's own terminal
    ("console:operator", (), False),                    # the console only while it is enabled
    ("console:operator", ("console:operator",), True),
    ("not a sender", (), False),
])
async def test_who_may_answer_a_request_is_decided_in_one_place(store, clock, who, approvers, may):
    service = Approvals(store, approvers=approvers, clock=clock)
    request = await ask(service)
    assert service.may_answer(request, who) is may
    assert (await service.resolve(request.id, who, "deny")).ok is may


async def test_an_expired_request_is_refused_and_marked_expired(approvals, store, clock):
    request = await ask(approvals)
    clock.now += 301
    result = await approvals.resolve(request.id, OWNER, "approve")
    assert not result.ok and result.status == "expired"
    assert result.reason == "This request expired at 22:18 UTC."
    stored = await approvals.get(request.id)
    assert stored.status == "expired" and stored.resolved_by is None
    assert await approvals.grants.for_session("s1") == ()
    again = await approvals.resolve(request.id, OWNER, "always")
    assert not again.ok and again.reason == result.reason
    assert await approvals.pending() == []


async def test_an_expiry_on_another_day_shows_the_date(approvals, clock):
    request = await ask(approvals)
    clock.now += 2 * 86400
    result = await approvals.resolve(request.id, OWNER, "approve")
    assert result.reason == "This request expired at 2023-11-14 22:18 UTC."


async def test_an_unknown_choice_is_refused(approvals, store):
    request = await ask(approvals)
    before = await snapshot(store)
    result = await approvals.resolve(request.id, OWNER, "yes please")
    assert not result.ok and "approve, deny or always" in result.reason
    assert await snapshot(store) == before


async def test_args_edited_in_the_store_after_showing_cannot_be_approved(approvals, store):
    request = await ask(approvals)
    await execute(store, "UPDATE approvals SET args = ? WHERE id = ?",
                        (json.dumps({"path": "/etc/passwd", "text": "hé"}), request.id))
    result = await approvals.resolve(request.id, OWNER, "approve")
    assert not result.ok and "altered" in result.reason
    assert (await approvals.get(request.id)).status == "pending"


# --- always, supersede, finishing, queries ---------------------------------------------------


async def test_always_approves_and_grants_only_the_calls_scope_up_to_its_risk(approvals, clock):
    request = await ask(approvals, session="s1", tool="fs_write")
    result = await approvals.resolve(request.id, OWNER, "always")
    assert result.ok and result.status == "approved" and "files in `notes/`" in result.reason
    (grant,) = await approvals.grants.for_session("s1")
    assert (grant.tool, grant.scope_key, grant.max_risk) == ("fs_write", "folder:notes", "medium")
    assert grant.covers("fs_write", "folder:notes", "low", clock.now)
    assert grant.covers("fs_write", "folder:notes", "medium", clock.now)
    assert not grant.covers("fs_write", "folder:notes", "high", clock.now)
    assert not grant.covers("fs_write", "folder:secrets", "medium", clock.now)
    assert not grant.covers("fs_edit", "folder:notes", "medium", clock.now)
    assert not grant.covers("fs_write", "folder:notes", "medium", grant.expires_at)
    assert await approvals.grants.for_session("s2") == ()


async def test_always_is_refused_when_the_request_does_not_offer_it(approvals, store):
    request = await ask(approvals, session="s1", scope=None)
    before = await snapshot(store)
    result = await approvals.resolve(request.id, OWNER, "always")
    assert not result.ok and "not offered" in result.reason
    assert await snapshot(store) == before


async def test_a_new_message_supersedes_the_sessions_pending_requests(approvals, store):
    first, second = await ask(approvals, session="s1"), await ask(approvals, session="s1")
    elsewhere = await ask(approvals, session="s2")
    async with store.transaction() as tx:
        superseded = await approvals.supersede_session(tx, "s1")
    assert [r.id for r in superseded] == [first.id, second.id]
    assert all(r.status == "expired" and r.resolved_by == "superseded" for r in superseded)
    assert await approvals.pending_for_session("s1") == []
    assert [r.id for r in await approvals.pending_for_session("s2")] == [elsewhere.id]
    tap = await approvals.resolve(first.id, OWNER, "approve")
    assert not tap.ok and tap.reason == "This request was cancelled because a newer message arrived."


async def test_finishing_moves_an_approved_request_to_executed_or_failed_only(approvals):
    done, broken, denied = await ask(approvals), await ask(approvals), await ask(approvals)
    await approvals.resolve(done.id, OWNER, "approve")
    await approvals.resolve(broken.id, OWNER, "approve")
    await approvals.resolve(denied.id, OWNER, "deny")
    await approvals.mark_finished(done.id, True)
    await approvals.mark_finished(broken.id, False)
    await approvals.mark_finished(denied.id, True)
    assert [(await approvals.get(r.id)).status for r in (done, broken, denied)] == \
        ["executed", "failed", "denied"]
    late = await approvals.resolve(done.id, OWNER, "approve")
    assert late.reason == f"This request was already approved by {OWNER}."


async def test_pending_lists_live_requests_per_channel_for_re_registering_buttons(approvals, clock):
    telegram = await ask(approvals)
    discord = await approvals.create(
        session_id="s9", sender="discord:5", chat="c", channel="discord", tool="fs_write",
        tool_use_id="t", args={}, risk="medium", summary="x")
    assert {r.id for r in await approvals.pending()} == {telegram.id, discord.id}
    assert [r.id for r in await approvals.pending("discord")] == [discord.id]
    assert (await approvals.pending("discord"))[0].view().channel == "discord"
    clock.now += 400
    assert await approvals.pending() == []


async def test_the_message_reference_is_kept_with_the_request(approvals):
    request = await ask(approvals)
    assert await approvals.message_ref(request.id) is None
    await approvals.set_message_ref(request.id, "100:555")
    assert await approvals.message_ref(request.id) == "100:555"


# --- across a restart ----------------------------------------------------------------------

RESOLVE_IN_A_NEW_PROCESS = """
import asyncio, json, sys
from bot.approvals.service import Approvals
from bot.ops.cli.store_admin import open_location

async def main():
    async with open_location(sys.argv[1]) as store:
        result = await Approvals(store).resolve(sys.argv[2], sys.argv[3], "approve")
        print(json.dumps({"ok": result.ok, "reason": result.reason, "status": result.status}))

asyncio.run(main())
"""


async def resolve_in_new_process(location: str, approval_id: str, resolver: str) -> dict:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", RESOLVE_IN_A_NEW_PROCESS, location, approval_id, resolver,
        cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), timeout=30)
    assert process.returncode == 0, err.decode()
    return json.loads(out)


async def test_a_request_pending_across_a_restart_is_resolved_once_by_new_processes(store_backend):
    async with store_backend.open() as before_restart:
        request = await ask(Approvals(before_restart))
    outcomes = await asyncio.gather(*(resolve_in_new_process(store_backend.location, request.id,
                                                             OWNER) for _ in range(2)))
    assert sorted(o["ok"] for o in outcomes) == [False, True]
    loser = next(o for o in outcomes if not o["ok"])
    assert loser["reason"] == f"This request was already approved by {OWNER}."
    async with store_backend.open() as after:
        stored = await Approvals(after).get(request.id)
    assert stored.status == "approved" and stored.resolved_by == OWNER


async def test_the_audit_row_of_an_answer_says_what_was_asked_not_only_the_id(approvals, store):
    request = await ask(approvals)
    assert (await approvals.resolve(request.id, OWNER, "deny")).ok
    (row,) = await store.fetchall("SELECT decision, outcome, tool, detail FROM audit "
                                  "WHERE decision = 'approval:deny'")
    assert row["outcome"] == "denied" and row["tool"] == "fs_write"
    assert row["detail"].startswith(f"{request.id!r} (fs_write: Write notes/a.md (3 bytes)): ")
