"""Turns that survive a crash: the first process is abandoned mid-turn (no shutdown, exactly as a
kill leaves the store), a second one opens on the same store and recovers what was left."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bot.conversation import turns
from bot.core.approval_cards import ApprovalNeeded, ApprovalResolved
from bot.core.events import CollectingSink, Done, IncomingMessage, Notice
from bot.core.tool import BaseTool, CallContext, ToolMeta
from tests.fakes.anthropic_server import reply, text, tool_use
from tests.support.pg_support import on_both_backends
from tests.support.runtime_tools import OBJECT, Recorder, Writer

backend_name = on_both_backends()

SENDERS = {"senders": {"telegram:1": "supervised"}, "approvals": {"approvers": ["telegram:9"]}}


class Outlets:
    """The channel's delivery outlet, at the wire: every sink it hands out keeps its events."""

    def __init__(self) -> None:
        self.sinks: dict[str, CollectingSink] = {}

    def sink_for(self, chat: str, sender: str) -> CollectingSink:
        return self.sinks.setdefault(chat, CollectingSink())

    def private_sink_for(self, sender: str) -> CollectingSink:
        return self.sinks.setdefault(f"private:{sender}", CollectingSink())

    def events(self, key: str, kind: type) -> list[Any]:
        return self.sinks[key].of(kind) if key in self.sinks else []


class Surface:
    """The channel's request messages: each edit it is asked to make."""

    def __init__(self) -> None:
        self.edits: list[ApprovalResolved] = []

    async def approval_resolved(self, outcome: ApprovalResolved) -> None:
        self.edits.append(outcome)


class SlowWriter(BaseTool):
    """A side effect that counts its runs and then waits until released (or the process dies)."""

    def __init__(self, risk: str = "low") -> None:
        self.meta = ToolMeta(
            name="slow_writer", description="Writes slowly.", risk=risk,
            schema={**OBJECT, "properties": {"note": {"type": "string"}}, "required": ["note"]},
            has_side_effects=True, returns_untrusted=False, supports_dry_run=True,
            capability_required="test:write")
        self.runs = 0
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def execute(self, ctx: CallContext, **args: Any) -> dict[str, Any]:
        self.runs += 1
        self.started.set()
        await self.release.wait()
        return {"written": args["note"]}

    async def dry_run(self, ctx: CallContext, **args: Any) -> dict[str, Any]:
        return {"summary": f"Slowly write the note {args['note']!r}"}


def message(text_: str, inbox_id: int | None = None) -> IncomingMessage:
    return IncomingMessage(sender="telegram:1", chat="1", text=text_, channel="telegram",
                           inbox_id=inbox_id)


@pytest.fixture
async def abandoned():
    """Turns of a process that 'died': left running until the test ends, never shut down."""
    tasks: list[asyncio.Task] = []
    yield tasks
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def restarted(app_factory, *tools: BaseTool) -> tuple[Any, Outlets, Surface]:
    """A fresh process on the same store, its channel up, the given tools registered."""
    app = await app_factory(SENDERS)
    for tool in tools:
        app.services.registry.register(tool, "tests")
    outlets, surface = Outlets(), Surface()
    app.services.delivery.register("telegram", outlets)
    app.agent.add_approval_surface("telegram", surface)
    return app, outlets, surface


async def recover(app) -> int:
    count = await app.recover()
    await app.agent.queue.drain(60)   # a bound for a hang, not a wait: it returns when done
    return count


async def turn_states(app) -> list[str]:
    rows = await app.services.store.fetchall("SELECT state FROM turns ORDER BY created_at")
    return [row["state"] for row in rows]


def user_texts(request_json: dict[str, Any]) -> list[list[str]]:
    """The text of each user message the model was sent (messages of tool results only left out)."""
    texts = [[b["text"] for b in m["content"] if b.get("type") == "text"]
             for m in request_json["messages"] if m["role"] == "user"]
    return [t for t in texts if t]


async def stall_forever(body: dict[str, Any]) -> Any:
    await asyncio.Event().wait()


async def cut_off_mid_call(app_factory, fake_anthropic, abandoned) -> SlowWriter:
    """A process that dies while a call with side effects ("pay rent") runs, unasked."""
    first = await app_factory(SENDERS)
    writer = SlowWriter()
    first.services.registry.register(writer, "tests")
    fake_anthropic.script(tool_use("slow_writer", {"note": "pay rent"}))
    abandoned.append(asyncio.create_task(first.agent.handle(message("note: pay rent"),
                                                            CollectingSink())))
    await writer.started.wait()
    return writer


async def cut_off_after_approval(app_factory, fake_anthropic, abandoned,
                                 ref: str) -> tuple[SlowWriter, Any]:
    """A process that dies while an approved call ("transfer") runs; its request was shown as
    message `ref`. Returns the tool and the request."""
    first = await app_factory(SENDERS)
    writer = SlowWriter(risk="medium")
    first.services.registry.register(writer, "tests")
    fake_anthropic.script(tool_use("slow_writer", {"note": "transfer"}))
    asked = CollectingSink()
    await first.agent.handle(message("transfer it"), asked)
    (needed,) = asked.of(ApprovalNeeded)
    await first.agent.set_approval_message_ref(needed.approval.id, ref, "telegram")
    won = await first.agent.resolve_approval(needed.approval.id, "telegram:1", "approve")
    first.agent.resume_approval(won, CollectingSink())
    await writer.started.wait()
    abandoned.extend(first.agent.queue._background)
    return writer, needed


async def test_a_turn_cut_off_while_the_model_was_answering_is_answered_once_after_a_restart(
        app_factory, fake_anthropic, abandoned):
    first = await app_factory(SENDERS)
    fake_anthropic.responder = stall_forever
    abandoned.append(asyncio.create_task(first.agent.handle(message("what is 2+2?"),
                                                            CollectingSink())))
    await fake_anthropic.wait_for_requests(1)

    fake_anthropic.script(text("4"))
    app, outlets, _ = await restarted(app_factory)
    assert await recover(app) == 1
    assert [d.text for d in outlets.events("1", Done)] == ["4"]
    assert await turn_states(app) == ["delivered"]
    assert await recover(app) == 0          # answered once: nothing is left to recover

    fake_anthropic.script(text("you are welcome"))
    await app.agent.handle(message("thanks"), CollectingSink())
    assert user_texts(fake_anthropic.last_request.json) == [["what is 2+2?"], ["thanks"]]


class HangsOn(CollectingSink):
    """A channel that dies while sending an event of `kind` (`sending` is set then)."""

    def __init__(self, kind: type, sending: asyncio.Event | None = None) -> None:
        super().__init__()
        self.kind = kind
        self.sending = sending or asyncio.Event()

    async def emit(self, event: Any) -> None:
        if isinstance(event, self.kind):
            self.sending.set()
            await asyncio.Event().wait()
        await super().emit(event)


async def test_an_answer_stored_but_not_sent_before_the_crash_is_sent_after_the_restart(
        app_factory, fake_anthropic, abandoned):
    first = await app_factory(SENDERS)
    fake_anthropic.script(text("the answer is 4"))
    channel = HangsOn(Done)
    abandoned.append(asyncio.create_task(first.agent.handle(message("2+2?"), channel)))
    await channel.sending.wait()
    assert await turn_states(first) == ["answered"]

    app, outlets, _ = await restarted(app_factory)
    await recover(app)
    assert [d.text for d in outlets.events("1", Done)] == ["the answer is 4"]
    assert len(fake_anthropic.requests) == 1
    assert await turn_states(app) == ["delivered"]


async def test_a_turn_cut_off_after_its_tool_ran_goes_on_from_the_stored_result(
        app_factory, fake_anthropic, abandoned):
    first = await app_factory(SENDERS)
    recorder = Recorder()
    first.services.registry.register(recorder, "tests")
    fake_anthropic.script(tool_use("recorder", {"value": "x"}))
    fake_anthropic.responder = stall_forever
    abandoned.append(asyncio.create_task(first.agent.handle(message("record x"),
                                                            CollectingSink())))
    await fake_anthropic.wait_for_requests(2)

    fake_anthropic.script(text("recorded"))
    app, outlets, _ = await restarted(app_factory, recorder)
    await recover(app)
    assert recorder.calls == [{"value": "x"}]
    assert [d.text for d in outlets.events("1", Done)] == ["recorded"]
    resumed = fake_anthropic.last_request.json["messages"]
    assert resumed[-1]["content"][0]["type"] == "tool_result"
    assert not resumed[-1]["content"][0].get("is_error")


async def test_a_call_cut_off_mid_run_is_reported_in_doubt_to_user_model_and_owner_and_never_rerun(
        app_factory, fake_anthropic, abandoned):
    writer = await cut_off_mid_call(app_factory, fake_anthropic, abandoned)
    requests_before = len(fake_anthropic.requests)

    app, outlets, _ = await restarted(app_factory, writer)
    await recover(app)
    assert writer.runs == 1
    assert len(fake_anthropic.requests) == requests_before   # nothing asked the model again
    (notice,) = outlets.events("1", Notice)
    assert notice.text.startswith("⚠️ I was restarted while working on this; the call to "
                                  "slow_writer may or may not have completed")
    assert "pay rent" in notice.text
    (owner,) = outlets.events("private:telegram:9", Notice)
    assert "slow_writer for telegram:1" in owner.text
    assert await turn_states(app) == ["in_doubt"]
    doubt = await app.services.store.fetchone("SELECT * FROM audit WHERE outcome = 'in_doubt'")
    assert doubt["tool"] == "slow_writer" and doubt["call_id"]
    assert await app.services.receipts.verify_all() == []

    fake_anthropic.script(text("I will check first"))
    await app.agent.handle(message("did it work?"), CollectingSink())
    sent = fake_anthropic.last_request.json["messages"]
    (result,) = [b for m in sent for b in m["content"] if b.get("type") == "tool_result"]
    assert result["is_error"] and result["content"].startswith("in_doubt:")
    assert "check whether it took effect" in result["content"]
    assert user_texts(fake_anthropic.last_request.json) == [["note: pay rent"], ["did it work?"]]
    assert writer.runs == 1


async def test_an_approved_call_that_never_ran_runs_exactly_once_after_a_restart(
        app_factory, fake_anthropic):
    first = await app_factory(SENDERS)
    writer = Writer()
    first.services.registry.register(writer, "tests")
    fake_anthropic.script(reply(text("I'll write it."), tool_use("writer", {"note": "milk"})))
    asked = CollectingSink()
    await first.agent.handle(message("write milk"), asked)
    (needed,) = asked.of(ApprovalNeeded)
    await first.agent.set_approval_message_ref(needed.approval.id, "1:55", "telegram")
    won = await first.agent.resolve_approval(needed.approval.id, "telegram:1", "approve")
    assert won.ok and writer.executed == []      # the process dies before the call runs

    fake_anthropic.script(text("Written."))
    app, outlets, surface = await restarted(app_factory, writer)
    await recover(app)
    assert writer.executed == ["milk"]
    assert [d.text for d in outlets.events("1", Done)] == ["Written."]
    assert (await app.services.approvals.get(needed.approval.id)).status == "executed"
    (edit,) = surface.edits
    assert edit.message_ref == "1:55" and edit.note == "✅ Ran after a restart."
    assert await app.services.receipts.verify_all() == []
    assert await app.services.receipts.count() == 1
    await recover(app)
    assert writer.executed == ["milk"]


async def test_an_approved_call_cut_off_mid_run_is_in_doubt_and_its_message_says_so(
        app_factory, fake_anthropic, abandoned):
    writer, needed = await cut_off_after_approval(app_factory, fake_anthropic, abandoned, "1:56")

    app, outlets, surface = await restarted(app_factory, writer)
    await recover(app)
    assert writer.runs == 1
    assert (await app.services.approvals.get(needed.approval.id)).status == "in_doubt"
    (edit,) = surface.edits
    assert edit.message_ref == "1:56" and edit.note.startswith("⚠️ In doubt")
    (notice,) = outlets.events("1", Notice)
    assert "the call to slow_writer may or may not have completed" in notice.text
    assert outlets.events("private:telegram:9", Notice)
    assert await turn_states(app) == ["in_doubt"]


async def test_a_turn_waiting_for_an_answer_keeps_waiting_across_a_restart(
        app_factory, fake_anthropic):
    first = await app_factory(SENDERS)
    writer = Writer()
    first.services.registry.register(writer, "tests")
    fake_anthropic.script(tool_use("writer", {"note": "eggs"}))
    asked = CollectingSink()
    await first.agent.handle(message("write eggs"), asked)
    (needed,) = asked.of(ApprovalNeeded)
    await first.agent.set_approval_message_ref(needed.approval.id, "1:57", "telegram")  # shown
    requests_before = len(fake_anthropic.requests)

    app, outlets, surface = await restarted(app_factory, writer)
    await recover(app)
    assert [s.events for s in outlets.sinks.values()] in ([], [[]])
    # not shown again, but its message is given its buttons again (a kill may have cut that off)
    assert [(e.choice, e.message_ref) for e in surface.edits] == [("pending", "1:57")]
    assert len(fake_anthropic.requests) == requests_before
    assert (await app.services.approvals.get(needed.approval.id)).status == "pending"
    assert await turn_states(app) == ["waiting"]


async def test_a_message_delivered_again_after_its_process_died_is_answered_once_by_the_taker(
        app_factory, fake_anthropic, abandoned):
    first = await app_factory(SENDERS)
    fake_anthropic.responder = stall_forever
    abandoned.append(asyncio.create_task(first.agent.handle(message("hi", inbox_id=7),
                                                            CollectingSink())))
    await fake_anthropic.wait_for_requests(1)

    fake_anthropic.script(text("hello"))
    app, _, _ = await restarted(app_factory)
    taker = CollectingSink()
    await app.agent.handle(message("hi", inbox_id=7), taker)   # its lease lapsed: redelivered
    assert [d.text for d in taker.of(Done)] == ["hello"]
    assert await turn_states(app) == ["delivered"]
    assert user_texts(fake_anthropic.last_request.json) == [["hi"]]


async def test_a_message_delivered_again_after_it_was_answered_does_not_start_a_second_turn(
        app_factory, fake_anthropic):
    app = await app_factory(SENDERS)
    await app.agent.handle(message("hello", inbox_id=41), CollectingSink())
    requests_before = len(fake_anthropic.requests)
    again = CollectingSink()
    await app.agent.handle(message("hello", inbox_id=41), again)
    assert again.events == [] and len(fake_anthropic.requests) == requests_before
    row = await turns.for_inbox(app.services.store, 41)
    assert row is not None and row.state == "delivered"


async def test_a_scheduled_run_cut_off_by_a_crash_is_not_repeated(app_factory, fake_anthropic,
                                                                  abandoned):
    first = await app_factory(SENDERS)
    fake_anthropic.responder = stall_forever
    abandoned.append(asyncio.create_task(first.agent.run_unattended(
        session_key="job:daily", sender="telegram:1", chat="1", channel="telegram",
        level="supervised", allowlist=frozenset({"time_now"}), text="daily summary",
        sink=CollectingSink())))
    await fake_anthropic.wait_for_requests(1)

    app, outlets, _ = await restarted(app_factory)
    await recover(app)
    assert len(fake_anthropic.requests) == 1     # the scheduler tells its owner instead
    assert [s.events for s in outlets.sinks.values()] in ([], [[]])
    assert await turn_states(app) == ["stopped"]


async def test_a_request_never_shown_before_the_crash_is_shown_after_the_restart_and_runs_once(
        app_factory, fake_anthropic, abandoned):
    first = await app_factory(SENDERS)
    writer = Writer()
    first.services.registry.register(writer, "tests")
    fake_anthropic.script(tool_use("writer", {"note": "bread"}))
    channel = HangsOn(ApprovalNeeded)
    abandoned.append(asyncio.create_task(first.agent.handle(message("write bread"), channel)))
    await channel.sending.wait()

    app, outlets, _ = await restarted(app_factory, writer)
    await recover(app)
    (shown,) = outlets.events("1", ApprovalNeeded)
    assert shown.approval.tool == "writer" and outlets.events("private:telegram:9", ApprovalNeeded)
    fake_anthropic.script(text("Written."))
    answered = CollectingSink()
    resolution = await app.agent.resolve_approval(shown.approval.id, "telegram:1", "approve")
    assert app.agent.resume_approval(resolution, answered)
    await app.agent.queue.drain(10)
    assert writer.executed == ["bread"] and answered.text == "Written."
    await recover(app)
    assert writer.executed == ["bread"]


async def test_a_deny_that_never_reached_the_model_is_answered_after_the_restart(
        app_factory, fake_anthropic):
    first = await app_factory(SENDERS)
    writer = Writer()
    first.services.registry.register(writer, "tests")
    fake_anthropic.script(tool_use("writer", {"note": "ham"}))
    asked = CollectingSink()
    await first.agent.handle(message("write ham"), asked)
    (needed,) = asked.of(ApprovalNeeded)
    await first.agent.set_approval_message_ref(needed.approval.id, "1:58", "telegram")
    denied = await first.agent.resolve_approval(needed.approval.id, "telegram:1", "deny")
    assert denied.ok                              # the process dies before the model is told

    fake_anthropic.script(text("Fine, I will not write it."))
    app, outlets, _ = await restarted(app_factory, writer)
    await recover(app)
    assert [d.text for d in outlets.events("1", Done)] == ["Fine, I will not write it."]
    result = fake_anthropic.last_request.json["messages"][-1]["content"][0]
    assert result["is_error"] and "denied" in result["content"]
    assert writer.executed == [] and await turn_states(app) == ["delivered"]


async def test_a_call_run_after_a_restart_has_its_message_edited_before_the_conversation_goes_on(
        app_factory, fake_anthropic):
    first = await app_factory(SENDERS)
    writer = Writer()
    first.services.registry.register(writer, "tests")
    fake_anthropic.script(tool_use("writer", {"note": "tea"}))
    asked = CollectingSink()
    await first.agent.handle(message("write tea"), asked)
    (needed,) = asked.of(ApprovalNeeded)
    await first.agent.set_approval_message_ref(needed.approval.id, "1:59", "telegram")
    await first.agent.resolve_approval(needed.approval.id, "telegram:1", "approve")

    app, _, surface = await restarted(app_factory, writer)
    edits_when_asked: list[int] = []

    def answer(body: dict[str, Any]) -> Any:
        edits_when_asked.append(len(surface.edits))
        return text("Written.")
    fake_anthropic.responder = answer
    await recover(app)
    assert edits_when_asked == [1] and writer.executed == ["tea"]


class HangsOnTheNotice(Outlets):
    """A channel whose chats die while sending a notice (`sending` is set then)."""

    def __init__(self) -> None:
        super().__init__()
        self.sending = asyncio.Event()

    def sink_for(self, chat: str, sender: str) -> CollectingSink:
        return self.sinks.setdefault(chat, HangsOn(Notice, self.sending))


async def dies_reporting(app_factory, writer: SlowWriter, abandoned) -> Any:
    """A second process that recovers the first one's turn and dies sending the report."""
    second = await app_factory(SENDERS)
    second.services.registry.register(writer, "tests")
    hanging = HangsOnTheNotice()
    second.services.delivery.register("telegram", hanging)
    await second.recover()
    await hanging.sending.wait()
    abandoned.extend(second.agent.queue._background)
    return second


async def test_a_report_of_a_call_in_doubt_cut_off_by_a_second_crash_is_sent_after_the_next_start(
        app_factory, fake_anthropic, abandoned):
    writer = await cut_off_mid_call(app_factory, fake_anthropic, abandoned)

    second = await dies_reporting(app_factory, writer, abandoned)
    assert await turn_states(second) == ["answered"]

    app, outlets, _ = await restarted(app_factory, writer)
    await recover(app)
    (notice,) = outlets.events("1", Notice)
    assert "the call to slow_writer may or may not have completed" in notice.text
    assert "pay rent" in notice.text
    (owner,) = outlets.events("private:telegram:9", Notice)
    assert "slow_writer for telegram:1" in owner.text
    assert await turn_states(app) == ["in_doubt"]
    assert writer.runs == 1 and len(fake_anthropic.requests) == 1
    counted = await app.services.store.fetchone(
        "SELECT COUNT(*) AS n FROM audit WHERE outcome = 'in_doubt'")
    assert counted["n"] == 1
    await recover(app)
    assert len(outlets.events("1", Notice)) == 1     # told once, not on every start


async def test_an_approved_call_in_doubt_whose_report_was_cut_off_is_reported_on_its_message_again(
        app_factory, fake_anthropic, abandoned):
    writer, needed = await cut_off_after_approval(app_factory, fake_anthropic, abandoned, "1:58")

    await dies_reporting(app_factory, writer, abandoned)

    app, outlets, surface = await restarted(app_factory, writer)
    await recover(app)
    assert writer.runs == 1
    assert (await app.services.approvals.get(needed.approval.id)).status == "in_doubt"
    (edit,) = surface.edits
    assert edit.message_ref == "1:58" and edit.note.startswith("⚠️ In doubt")
    (notice,) = outlets.events("1", Notice)
    assert "the call to slow_writer may or may not have completed" in notice.text
    assert await turn_states(app) == ["in_doubt"]


async def test_a_copy_of_a_request_whose_sending_ended_after_the_tap_shows_the_outcome(
        app_factory, fake_anthropic):
    app, _, surface = await restarted(app_factory, Writer())
    fake_anthropic.script(tool_use("writer", {"note": "tea"}))
    asked = CollectingSink()
    await app.agent.handle(message("write tea"), asked)
    (needed,) = asked.of(ApprovalNeeded)
    await app.agent.set_approval_message_ref(needed.approval.id, "1:60", "telegram")
    # Shown again (after a restart, say) while the user taps the first copy: the tap wins and
    # its outcome reaches the copies known by then; the second copy is stored after that.
    fake_anthropic.script(text("Written."))
    assert (await app.agent.resolve_approval(needed.approval.id, "telegram:1", "deny")).ok
    assert [e.message_ref for e in surface.edits] == ["1:60"]
    await app.agent.set_approval_message_ref(needed.approval.id, "1:61", "telegram")
    assert "1:61" in [e.message_ref for e in surface.edits]
    assert {e.choice for e in surface.edits} == {"deny"}
