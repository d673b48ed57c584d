"""Approvals through the runtime: ask, resolve once, resume the conversation — also after a
restart of the process on the same store."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap

import pytest

from bot.core.approval_cards import ApprovalNeeded
from bot.core.events import CollectingSink, Done, IncomingMessage, Notice
from tests.fakes.anthropic_server import reply, text, tool_use
from tests.support.pg_support import on_both_backends
from tests.support.providers import PROVIDERS, is_error_text, tool_result_texts
from tests.support.runtime_tools import Writer, answer

backend_name = on_both_backends()

SUPERVISED = {"senders": {"telegram:1": "supervised", "telegram:2": "supervised"}}


def message(text_: str, sender: str = "telegram:1") -> IncomingMessage:
    return IncomingMessage(sender=sender, chat=sender.partition(":")[2], text=text_,
                           channel="telegram")


async def ask_for_write(app, fake, note: str = "milk") -> tuple[CollectingSink, object]:
    fake.script(reply(text("I'll write it."), tool_use("writer", {"note": note})))
    sink = CollectingSink()
    await app.agent.handle(message(f"write {note}"), sink)
    (needed,) = sink.of(ApprovalNeeded)
    return sink, needed.approval


@pytest.mark.parametrize("provider_name", PROVIDERS)
async def test_a_medium_risk_call_waits_for_approval_with_its_preview(app_factory, fake_model):
    app = await app_factory(SUPERVISED)
    writer = Writer()
    app.services.registry.register(writer, "tests")
    sink, view = await ask_for_write(app, fake_model)
    # The tool's own words, shown as written under the catalog's line saying whose they are
    assert view.summary == "What writer says this call will do:\nWrite the note 'milk'"
    assert view.risk == "medium"
    assert sink.of(Done)[-1].waiting_for_approval
    assert writer.executed == []
    stored = await app.services.approvals.get(view.id)
    assert stored.status == "pending" and stored.args == {"note": "milk"}


async def test_an_answer_decides_first_and_resumes_once_into_the_sink_the_channel_chose(
        app_factory, fake_anthropic):
    app = await app_factory(SUPERVISED)
    writer = Writer()
    app.services.registry.register(writer, "tests")
    _, view = await ask_for_write(app, fake_anthropic)
    fake_anthropic.script(text("Written."))
    refused = await app.agent.resolve_approval(view.id, "telegram:666", "approve")
    assert not refused.ok and not app.agent.resume_approval(refused, CollectingSink())
    won = await app.agent.resolve_approval(view.id, "telegram:1", "approve")
    assert writer.executed == []            # deciding runs nothing: the channel resumes
    chosen, other = CollectingSink(), CollectingSink()
    assert app.agent.resume_approval(won, chosen)
    assert not app.agent.resume_approval(won, other)   # a second resume of the same answer
    await app.agent.queue.drain(5)
    assert writer.executed == ["milk"]
    assert chosen.text == "Written." and other.events == []


@pytest.mark.parametrize("provider_name", PROVIDERS)
async def test_approving_runs_the_tool_once_and_the_conversation_continues(app_factory, fake_model):
    app = await app_factory(SUPERVISED)
    writer = Writer()
    app.services.registry.register(writer, "tests")
    _, view = await ask_for_write(app, fake_model)
    fake_model.script(text("Written."))
    follow = CollectingSink()
    first = await answer(app.agent, view.id, "telegram:1", "approve", follow)
    second = await answer(app.agent, view.id, "telegram:1", "approve", follow)
    await app.agent.queue.drain(5)
    assert first.ok and not second.ok and "already" in second.reason
    assert writer.executed == ["milk"]
    assert follow.text == "Written."
    (result,) = tool_result_texts(fake_model, fake_model.last_request)
    assert not is_error_text(result)
    receipts = await app.services.store.fetchall("SELECT * FROM receipts")
    assert [(r["tool"], r["approver"]) for r in receipts] == [("writer", "telegram:1")]
    assert (await app.services.approvals.get(view.id)).status == "executed"


@pytest.mark.parametrize("provider_name", PROVIDERS)
async def test_denying_tells_the_model_and_runs_nothing(app_factory, fake_model):
    app = await app_factory(SUPERVISED)
    writer = Writer()
    app.services.registry.register(writer, "tests")
    _, view = await ask_for_write(app, fake_model)
    fake_model.script(text("OK, I won't."))
    follow = CollectingSink()
    assert (await answer(app.agent, view.id, "telegram:1", "deny", follow)).ok
    await app.agent.queue.drain(5)
    assert writer.executed == []
    (result,) = tool_result_texts(fake_model, fake_model.last_request)
    assert is_error_text(result) and "denied" in result
    assert follow.text == "OK, I won't."
    assert await app.services.store.fetchall("SELECT * FROM receipts") == []


async def test_a_strangers_tap_changes_nothing(app_factory, fake_anthropic):
    app = await app_factory(SUPERVISED)
    writer = Writer()
    app.services.registry.register(writer, "tests")
    _, view = await ask_for_write(app, fake_anthropic)
    resolution = await answer(app.agent, view.id, "telegram:2", "approve", CollectingSink())
    await app.agent.queue.drain(5)
    assert not resolution.ok and "telegram:1" in resolution.reason
    assert writer.executed == []
    assert (await app.services.approvals.get(view.id)).status == "pending"


async def test_always_approves_and_auto_approves_the_tool_for_the_session(app_factory, fake_anthropic):
    app = await app_factory(SUPERVISED)
    writer = Writer()
    app.services.registry.register(writer, "tests")
    _, view = await ask_for_write(app, fake_anthropic, "one")
    fake_anthropic.script(text("done one"))
    assert (await answer(app.agent, view.id, "telegram:1", "always", CollectingSink())).ok
    await app.agent.queue.drain(5)
    fake_anthropic.script(tool_use("writer", {"note": "two"}), text("done two"))
    sink = CollectingSink()
    await app.agent.handle(message("write two"), sink)
    assert sink.of(ApprovalNeeded) == [] and sink.text == "done two"
    assert writer.executed == ["one", "two"]


async def test_a_new_message_supersedes_a_pending_approval(app_factory, fake_anthropic):
    app = await app_factory(SUPERVISED)
    writer = Writer()
    app.services.registry.register(writer, "tests")
    _, view = await ask_for_write(app, fake_anthropic)
    fake_anthropic.script(text("never mind then"))
    sink = CollectingSink()
    await app.agent.handle(message("actually, forget it"), sink)
    assert sink.text == "never mind then"
    late = await answer(app.agent, view.id, "telegram:1", "approve", CollectingSink())
    assert not late.ok and writer.executed == []
    first_block = fake_anthropic.last_request.json["messages"][-1]["content"][0]
    assert first_block["type"] == "tool_result" and first_block["is_error"]


async def test_approve_and_deny_commands_follow_the_same_rules(app_factory, fake_anthropic):
    app = await app_factory(SUPERVISED)
    writer = Writer()
    app.services.registry.register(writer, "tests")
    _, view = await ask_for_write(app, fake_anthropic)
    stranger = CollectingSink()
    await app.agent.handle(message(f"/approve {view.id}", sender="telegram:2"), stranger)
    assert writer.executed == [] and "telegram:1" in stranger.of(Notice)[0].text
    fake_anthropic.script(text("written"))
    owner = CollectingSink()
    await app.agent.handle(message(f"/approve {view.id}"), owner)
    await app.agent.queue.drain(5)
    assert writer.executed == ["milk"] and owner.of(Notice)[0].text == "Approved: writer."


async def test_undo_reverts_the_last_change_of_the_session(app_factory, fake_anthropic):
    app = await app_factory()
    writer = Writer()
    app.services.registry.register(writer, "tests")
    fake_anthropic.script(tool_use("writer", {"note": "n1"}), text("done"))
    await app.agent.handle(IncomingMessage("cli:local", "local", "write"), CollectingSink())
    sink = CollectingSink()
    await app.agent.handle(IncomingMessage("cli:local", "local", "/undo"), sink)
    assert writer.reverted == ["n1"]
    assert "writer" in sink.of(Notice)[0].text


RESOLVE_IN_NEW_PROCESS = textwrap.dedent("""
    import asyncio, json, sys
    sys.path.insert(0, {root!r})
    from bot.config import settings as config_mod
    from bot.app import App
    from bot.core.events import CollectingSink
    from tests.support.runtime_tools import Writer, answer

    async def main():
        cfg = config_mod.from_dict({raw!r}, env={env!r})
        app = await App.open(cfg)
        writer = Writer()
        app.services.registry.register(writer, "tests")
        sink = CollectingSink()
        resolution = await answer(app.agent, {id!r}, "telegram:1", "approve", sink)
        await app.agent.queue.drain(10)
        again = await answer(app.agent, {id!r}, "telegram:1", "approve", sink)
        await app.close()
        print(json.dumps({{"ok": resolution.ok, "again": again.ok, "executed": writer.executed,
                           "answer": sink.text}}))
    asyncio.run(main())
""")


async def test_an_approval_pending_across_a_restart_resumes_in_a_new_process(app_factory,
                                                                             fake_anthropic, tmp_path):
    app = await app_factory(SUPERVISED)
    app.services.registry.register(Writer(), "tests")
    _, view = await ask_for_write(app, fake_anthropic)
    config = app.config
    await app.close()
    fake_anthropic.script(text("Written after restart."))
    raw = {"agent": {"workspace": str(config.workspace), "llm_max_retries": 0},
           "store": {"path": str(config.store_path)}, **SUPERVISED}
    script = RESOLVE_IN_NEW_PROCESS.format(root=str(__import__("pathlib").Path.cwd()), raw=raw,
                                           env=dict(config.env), id=view.id)
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", script,
                                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    outcome = json.loads(out.decode().strip().splitlines()[-1])
    assert outcome == {"ok": True, "again": False, "executed": ["milk"],
                       "answer": "Written after restart."}


async def test_a_sender_whose_level_comes_from_a_discord_role_can_approve_and_the_tool_runs(
        app_factory, fake_anthropic):
    app = await app_factory({"discord": {"roles": {"Admins": "supervised"}}})
    writer = Writer()
    app.services.registry.register(writer, "tests")
    fake_anthropic.script(tool_use("writer", {"note": "role"}))
    sink = CollectingSink()
    await app.agent.handle(IncomingMessage("discord:9", "chan", "write", "discord", roles=("Admins",)),
                           sink)
    (needed,) = sink.of(ApprovalNeeded)
    fake_anthropic.script(text("written by role"))
    follow = CollectingSink()
    assert (await answer(app.agent, needed.approval.id, "discord:9", "approve", follow)).ok
    await app.agent.queue.drain(5)
    assert writer.executed == ["role"] and follow.text == "written by role"


async def test_what_a_tool_keeps_for_undo_is_not_shown_to_the_model(app_factory, fake_anthropic):
    app = await app_factory()
    app.config.workspace.joinpath("notes.md").write_text("old secret draft " * 50)
    fake_anthropic.script(tool_use("fs_write", {"path": "notes.md", "content": "new"}), text("done"))
    await app.agent.handle(IncomingMessage("cli:local", "local", "overwrite"), CollectingSink())
    result = fake_anthropic.last_request.json["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and not result.get("is_error")
    assert "old secret draft" not in result["content"] and '"undo"' not in result["content"]
    sink = CollectingSink()
    await app.agent.handle(IncomingMessage("cli:local", "local", "/undo"), sink)
    assert app.config.workspace.joinpath("notes.md").read_text() == "old secret draft " * 50


async def test_an_edit_waiting_for_approval_shows_its_diff(app_factory, fake_anthropic):
    app = await app_factory(SUPERVISED)
    app.config.workspace.joinpath("todo.md").write_text("buy milk\ncall mum\n")
    fake_anthropic.script(tool_use("fs_edit", {"path": "todo.md", "old_text": "buy milk",
                                               "new_text": "buy oat milk"}))
    sink = CollectingSink()
    await app.agent.handle(message("edit my list"), sink)
    (needed,) = sink.of(ApprovalNeeded)
    summary = needed.approval.summary
    assert summary.splitlines()[0].startswith("Edit todo.md")
    assert "-buy milk" in summary and "+buy oat milk" in summary
    assert app.config.workspace.joinpath("todo.md").read_text() == "buy milk\ncall mum\n"
