"""The policy as dispatch applies it: refusals audited, no receipt for what did not succeed,
the decision taken again when an approved call resumes, one execution for fifty taps."""

from __future__ import annotations

import asyncio

import pytest

from bot.core.approval_cards import ApprovalNeeded
from bot.core.events import CollectingSink, IncomingMessage
from bot.core.policy import Profile
from bot.core.tool import BaseTool, ToolMeta
from bot.toolbox.registry import RegistrationError, Registry
from tests.fakes.anthropic_server import text, tool_use
from tests.support.runtime_tools import Recorder, Writer, answer
from tests.support.store_support import execute

SUPERVISED = {"senders": {"telegram:1": "supervised"}, "approvals": {"approvers": ["telegram:9"]}}


def message(text_: str, sender: str = "telegram:1") -> IncomingMessage:
    return IncomingMessage(sender=sender, chat=sender.partition(":")[2], text=text_, channel="telegram")


async def audit(app) -> list[tuple[str, str, str]]:
    rows = await app.services.store.fetchall("SELECT tool, decision, outcome FROM audit ORDER BY id")
    return [(r["tool"], r["decision"], r["outcome"]) for r in rows]


async def receipts(app) -> list[str]:
    return [r["tool"] for r in await app.services.store.fetchall("SELECT tool FROM receipts")]


class Failing(BaseTool):
    meta = ToolMeta(name="failing", description="Always fails.", risk="low",
                    schema={"type": "object", "properties": {}, "additionalProperties": False},
                    has_side_effects=False, returns_untrusted=False, capability_required="test:fail")

    async def execute(self, ctx, **args):
        raise FileNotFoundError("nothing here")


async def test_blocked_refused_and_failed_calls_are_audited_without_receipts(app_factory, fake_anthropic):
    app = await app_factory(SUPERVISED)
    app.services.registry.register(Recorder("risky", risk="high"), "tests")
    app.services.registry.register(Failing(), "tests")
    app.services.registry.register(Recorder(), "tests")
    fake_anthropic.script(
        tool_use("risky", {"value": "x"}), tool_use("failing", {}), tool_use("recorder", {"nope": 1}),
        tool_use("recorder", {"value": "ok"}), text("done"))
    await app.agent.handle(message("do four things"), CollectingSink())
    rows = await audit(app)
    assert ("risky", "deny", "blocked") in rows
    assert ("failing", "allow", "failed") in rows
    assert ("recorder", "refused", "invalid_args") in rows
    assert ("recorder", "allow", "executed") in rows
    assert await receipts(app) == ["recorder"]


async def test_an_approved_call_is_judged_again_when_it_resumes(app_factory, fake_anthropic):
    app = await app_factory(SUPERVISED)
    writer = Writer()
    app.services.registry.register(writer, "tests")
    fake_anthropic.script(tool_use("writer", {"note": "x"}))
    sink = CollectingSink()
    await app.agent.handle(message("write"), sink)
    (needed,) = sink.of(ApprovalNeeded)
    # The operator excludes the tool from chat channels while the request waits.
    app.services.registry.profile = Profile(excluded_tools=frozenset({"writer"}))
    fake_anthropic.script(text("it was not allowed any more"))
    follow = CollectingSink()
    assert (await answer(app.agent, needed.approval.id, "telegram:1", "approve", follow)).ok
    await app.agent.queue.drain(5)
    assert writer.executed == []
    result = fake_anthropic.last_request.json["messages"][-1]["content"][0]
    assert result["is_error"] and result["content"].startswith("permission_denied:")
    assert (await app.services.approvals.get(needed.approval.id)).status == "failed"


async def test_fifty_taps_through_the_agent_run_the_tool_exactly_once(app_factory, fake_anthropic):
    app = await app_factory(SUPERVISED)
    writer = Writer()
    app.services.registry.register(writer, "tests")
    fake_anthropic.script(tool_use("writer", {"note": "once"}))
    sink = CollectingSink()
    await app.agent.handle(message("write"), sink)
    (needed,) = sink.of(ApprovalNeeded)
    fake_anthropic.responder = lambda body: text("written")
    tappers = ["telegram:1", "telegram:9", "telegram:666", "discord:1"] * 12 + ["telegram:1"] * 2
    choices = ["approve", "deny", "always"]
    results = await asyncio.gather(*(
        answer(app.agent, needed.approval.id, who, choices[i % 3], CollectingSink())
        for i, who in enumerate(tappers)))
    await app.agent.queue.drain(10)
    assert sum(r.ok for r in results) == 1
    (winner,) = [r for r in results if r.ok]
    assert writer.executed == ([] if winner.status == "denied" else ["once"])
    assert len(await receipts(app)) == (0 if winner.status == "denied" else 1)


def test_a_tool_whose_schema_is_not_valid_json_schema_is_refused_at_registration():
    class Broken(BaseTool):
        meta = ToolMeta(name="broken_schema", description="Has a bad schema.", risk="low",
                        schema={"type": "object", "properties": {"x": {"type": "no-such-type"}},
                                "additionalProperties": False},
                        has_side_effects=False, capability_required="t")

    registry = Registry()
    with pytest.raises(RegistrationError, match="invalid JSON Schema"):
        registry.register(Broken(), "tests")
    assert registry.get("broken_schema") is None


async def test_a_sender_whose_access_was_revoked_cannot_run_a_pending_call(app_factory, fake_anthropic):
    app = await app_factory({"senders": {"unknown": "pairing"}})
    writer = Writer()
    app.services.registry.register(writer, "tests")
    await execute(app.services.store,
        "INSERT INTO granted_senders(sender, level, granted_at, granted_by) VALUES (?, ?, 0, ?)",
        ("telegram:5", "supervised", "cli:local"))
    fake_anthropic.script(tool_use("writer", {"note": "late"}))
    sink = CollectingSink()
    await app.agent.handle(message("write", sender="telegram:5"), sink)
    (needed,) = sink.of(ApprovalNeeded)
    await execute(app.services.store, "DELETE FROM granted_senders WHERE sender = ?", ("telegram:5",))
    fake_anthropic.script(text("no longer allowed"))
    assert (await answer(app.agent, needed.approval.id, "telegram:5", "approve",
                                             CollectingSink())).ok
    await app.agent.queue.drain(5)
    assert writer.executed == []


async def test_in_a_shared_chat_session_undo_only_reverts_the_senders_own_change(app_factory,
                                                                                 fake_anthropic):
    app = await app_factory({"agent": {"session_scope": "chat"},
                             "senders": {"telegram:1": "full", "telegram:2": "full"}})
    writer = Writer()
    app.services.registry.register(writer, "tests")
    fake_anthropic.script(tool_use("writer", {"note": "mine"}), text("done"))
    group = "-100"
    await app.agent.handle(IncomingMessage("telegram:1", group, "write", "telegram"), CollectingSink())
    sink = CollectingSink()
    await app.agent.handle(IncomingMessage("telegram:2", group, "/undo", "telegram"), sink)
    assert writer.reverted == []
    await app.agent.handle(IncomingMessage("telegram:1", group, "/undo", "telegram"), CollectingSink())
    assert writer.reverted == ["mine"]
