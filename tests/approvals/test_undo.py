"""/undo: the newest revertible execution of the session is reverted through the tool's own
`revert`, refusals say why, and every attempt is audited."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bot.approvals.undo import NOTHING_TO_UNDO, UndoLog
from bot.core.tool import BaseTool, CallContext, ToolMeta, UnrevertibleError
from tests.support.pg_support import on_both_backends

backend_name = on_both_backends()

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
          "additionalProperties": False}


class NoteWrite(BaseTool):
    """Writes a file in the workspace; revert puts back what was there before."""

    meta = ToolMeta(name="note_write", description="write a note", schema=SCHEMA,
                    has_side_effects=True, risk="medium", supports_dry_run=True,
                    returns_untrusted=False)

    def __init__(self) -> None:
        self.reverts = 0

    async def execute(self, ctx: CallContext, **args: Any) -> dict[str, Any]:
        target = ctx.workspace / args["path"]
        previous = target.read_text() if target.exists() else None
        target.write_text(args["text"])
        return {"path": args["path"], "previous": previous}

    async def revert(self, ctx: CallContext, args: dict[str, Any], result: dict[str, Any]) -> dict:
        self.reverts += 1
        target = ctx.workspace / result["path"]
        if result["previous"] is None:
            target.unlink()
        else:
            target.write_text(result["previous"])
        return {"restored": result["path"]}


class MailSend(BaseTool):
    meta = ToolMeta(name="mail_send", description="send a mail", schema=SCHEMA,
                    has_side_effects=True, risk="high", supports_dry_run=True)

    async def execute(self, ctx: CallContext, **args: Any) -> dict[str, Any]:
        return {"sent": True}

    async def revert(self, ctx: CallContext, args: dict[str, Any], result: dict[str, Any]) -> dict:
        raise UnrevertibleError("the mail has already left")


class BuggyRevert(MailSend):
    meta = ToolMeta(name="buggy", description="revert has a bug", schema=SCHEMA)

    async def revert(self, ctx: CallContext, args: dict[str, Any], result: dict[str, Any]) -> dict:
        return result["missing key"]


@pytest.fixture
def undo(store) -> UndoLog:
    return UndoLog(store)


@pytest.fixture
def tools(services) -> dict[str, Any]:
    registered = {"note_write": NoteWrite(), "mail_send": MailSend(), "buggy": BuggyRevert()}
    for tool in registered.values():
        services.registry.register(tool, "tests")
    return registered


async def run(undo: UndoLog, ctx: CallContext, tool: Any, **args: Any) -> dict[str, Any]:
    """What the runtime does after a successful call of a revertible tool."""
    result = await tool.execute(ctx, **args)
    async with undo.store.transaction() as tx:
        await undo.record(tx, session_id=ctx.session_id, sender=str(ctx.sender), tool=tool.meta.name,
                          args=args, result=result)
    return result


async def undo_audit(store) -> list[tuple]:
    rows = await store.fetchall("SELECT tool, outcome, detail FROM audit WHERE decision = 'undo' ORDER BY id")
    return [tuple(r) for r in rows]


async def test_nothing_to_undo_in_a_fresh_session(undo, services, ctx, store):
    assert await undo.undo_last(ctx.session_id, services.registry, ctx) == NOTHING_TO_UNDO
    assert await undo_audit(store) == []


async def test_undo_reverts_the_newest_change_first_then_the_one_before(undo, services, ctx, tools,
                                                                        store):
    (ctx.workspace / "notes").mkdir()
    note = ctx.workspace / "notes" / "a.md"
    await run(undo, ctx, tools["note_write"], path="notes/a.md", text="one")
    await run(undo, ctx, tools["note_write"], path="notes/a.md", text="two")
    assert await undo.undo_last(ctx.session_id, services.registry, ctx) == "Undone: note_write notes/a.md."
    assert note.read_text() == "one"
    assert await undo.undo_last(ctx.session_id, services.registry, ctx) == "Undone: note_write notes/a.md."
    assert not note.exists()
    assert await undo.undo_last(ctx.session_id, services.registry, ctx) == NOTHING_TO_UNDO
    assert [(t, o) for t, o, _ in await undo_audit(store)] == [("note_write", "reverted")] * 2


async def test_an_unrevertible_action_says_why_and_stays_in_the_log(undo, services, ctx, tools, store):
    await run(undo, ctx, tools["mail_send"], path="boss", text="hi")
    message = await undo.undo_last(ctx.session_id, services.registry, ctx)
    assert message == "mail_send cannot be undone: the mail has already left"
    row = await store.fetchone("SELECT reverted_at FROM undo_log")
    assert row["reverted_at"] is None
    assert await undo_audit(store) == [("mail_send", "failed", "the mail has already left")]


async def test_a_bug_in_revert_gives_a_clean_sentence_not_a_traceback(undo, services, ctx, tools):
    await run(undo, ctx, tools["buggy"], path="x", text="y")
    message = await undo.undo_last(ctx.session_id, services.registry, ctx)
    assert message == "buggy cannot be undone: The tool failed unexpectedly (KeyError)."


async def test_a_tool_that_is_gone_cannot_be_undone(undo, services, ctx, tools):
    await run(undo, ctx, tools["note_write"], path="n.md", text="x")
    services.registry.unregister("note_write")
    message = await undo.undo_last(ctx.session_id, services.registry, ctx)
    assert message == "note_write cannot be undone: the tool is no longer available."
    assert (ctx.workspace / "n.md").exists()


async def test_undo_only_touches_its_own_session(undo, services, ctx, tools):
    await run(undo, ctx, tools["note_write"], path="mine.md", text="x")
    other = services.call_context(sender="telegram:2", level="full", session_id="other",
                                  chat="other", workspace=ctx.workspace)
    assert await undo.undo_last("other", services.registry, other) == NOTHING_TO_UNDO
    assert (ctx.workspace / "mine.md").exists()


async def test_two_quick_undos_never_revert_the_same_change_twice(undo, services, ctx, tools):
    await run(undo, ctx, tools["note_write"], path="n.md", text="x")
    answers = await asyncio.gather(*(undo.undo_last(ctx.session_id, services.registry, ctx)
                                     for _ in range(2)))
    assert sorted(answers) == [NOTHING_TO_UNDO, "Undone: note_write n.md."]
    assert tools["note_write"].reverts == 1
