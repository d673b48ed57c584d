"""A batch across a restart (SQLite and PostgreSQL): a batch still waiting for an answer keeps
waiting, its approved calls unrun; a batch fully decided when the process died runs once, in
order, after the restart."""

from __future__ import annotations

import asyncio

from bot.core.approval_cards import ApprovalBatchNeeded, ApprovalNeeded
from bot.core.events import CollectingSink, Done
from tests.fakes.anthropic_server import reply, text, tool_results, tool_use
from tests.runtime.test_turn_recovery import SENDERS, HangsOn, message, recover, restarted
from tests.support.pg_support import on_both_backends
from tests.support.runtime_tools import Writer

backend_name = on_both_backends()


async def ask_batch(app_factory, fake_anthropic):
    first = await app_factory(SENDERS)
    first.services.registry.register(Writer(), "tests")
    fake_anthropic.script(reply(text("Writing."), tool_use("writer", {"note": "milk"}),
                                tool_use("writer", {"note": "eggs"})))
    asked = CollectingSink()
    await first.agent.handle(message("write both"), asked)
    (needed,) = asked.of(ApprovalBatchNeeded)
    return first, needed.approvals


async def test_a_batch_still_waiting_at_a_restart_keeps_waiting_and_runs_nothing(
        app_factory, fake_anthropic):
    first, (milk, _) = await ask_batch(app_factory, fake_anthropic)
    won = await first.agent.resolve_approval(milk.id, "telegram:1", "approve")
    assert won.ok and not won.batch_done
    writer = Writer()
    app, outlets, _ = await restarted(app_factory, writer)
    await recover(app)
    assert writer.executed == [] and outlets.events("1", Done) == []
    assert (await app.services.approvals.get(milk.id)).status == "approved"


async def test_a_batch_decided_before_a_crash_runs_once_in_order_after_the_restart(
        app_factory, fake_anthropic):
    first, (milk, eggs) = await ask_batch(app_factory, fake_anthropic)
    await first.agent.resolve_approval(milk.id, "telegram:1", "approve")
    won = await first.agent.resolve_approval(eggs.id, "telegram:1", "approve")
    assert won.batch_done                       # the process dies before the batch resumes
    fake_anthropic.script(text("Both written."))
    writer = Writer()
    app, outlets, _ = await restarted(app_factory, writer)
    await recover(app)
    await recover(app)
    assert writer.executed == ["milk", "eggs"]
    assert [d.text for d in outlets.events("1", Done)] == ["Both written."]
    results = tool_results(fake_anthropic.requests[-1].json)
    assert ["milk" in r["content"] for r in results] == [True, False]   # in the model's order
    assert not any(r.get("is_error") for r in results)
    assert len(fake_anthropic.requests) == 2


async def test_a_batch_never_shown_before_the_crash_is_shown_as_one_batch_after_the_restart(
        app_factory, fake_anthropic):
    first = await app_factory(SENDERS)
    first.services.registry.register(Writer(), "tests")
    fake_anthropic.script(reply(text("Writing."), tool_use("writer", {"note": "milk"}),
                                tool_use("writer", {"note": "eggs"})))
    channel = HangsOn(ApprovalBatchNeeded)
    dead = asyncio.create_task(first.agent.handle(message("write both"), channel))
    try:
        await channel.sending.wait()
        app, outlets, _ = await restarted(app_factory, Writer())
        await recover(app)
    finally:                       # the first process "died": its turn is never finished
        dead.cancel()
        await asyncio.gather(dead, return_exceptions=True)
    (shown,) = outlets.events("1", ApprovalBatchNeeded)
    assert [v.args["note"] for v in shown.approvals] == ["milk", "eggs"]
    assert outlets.events("1", ApprovalNeeded) == []
    (copy,) = outlets.events("private:telegram:9", ApprovalBatchNeeded)
    assert [v.id for v in copy.approvals] == [v.id for v in shown.approvals]
