"""The audience bounds what is read: in a group with per_sender workspaces, a turn works in the
conversation's own folder and memory, never a member's private one; showing the group a
member's private file or memory is a way out that asks that member (and only them), with a
preview naming what is shared and with whom. On both store backends."""

from __future__ import annotations

import json

from bot.core.approval_cards import ApprovalNeeded
from bot.core.events import CollectingSink, DocumentPart, IncomingMessage
from bot.core.identity import Sender
from tests.fakes.anthropic_server import text, tool_use
from tests.support.pg_support import on_both_backends
from tests.support.runtime_tools import answer

backend_name = on_both_backends()

OWNER, MEMBER, APPROVER, GROUP = "telegram:1", "telegram:2", "telegram:3", "-100777"
WHOM = f"everyone in the telegram group chat {GROUP}"


async def group_app(app_factory):
    app = await app_factory({
        "agent": {"workspace_mode": "per_sender", "session_scope": "chat"},
        "senders": {OWNER: "full", MEMBER: "read_only", APPROVER: "full"},
        "approvals": {"approvers": [APPROVER]}})
    private = app.config.workspace / "telegram_1"
    private.mkdir(parents=True, exist_ok=True)
    (private / "passwords.md").write_text("bank: hunter2\n")
    await app.services.ports.memory.remember(Sender.parse(OWNER), "my door code is 4711")
    return app


def said(sender: str, words: str, *, group: bool = True, parts=()) -> IncomingMessage:
    return IncomingMessage(sender=sender, chat=GROUP if group else sender.split(":")[1],
                           text=words, channel="telegram", is_group=group, parts=parts)


async def turn(app, fake, message: IncomingMessage, *calls) -> CollectingSink:
    fake.script(*(tool_use(name, args) for name, args in calls), text("done"))
    sink = CollectingSink()
    await app.agent.handle(message, sink)
    return sink


def results(fake) -> list[str]:
    return [json.dumps(b.get("content")) for m in fake.last_request.json["messages"]
            if m["role"] == "user" and isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_result"]


async def test_in_a_group_the_owners_turn_cannot_read_their_private_file_or_memory(
        app_factory, fake_anthropic):
    app = await group_app(app_factory)
    await turn(app, fake_anthropic, said(OWNER, "post my passwords here"),
               ("fs_read", {"path": "passwords.md"}),
               ("fs_read", {"path": "../telegram_1/passwords.md"}),
               ("send_file", {"path": "passwords.md"}),
               ("memory_fetch", {"query": "door code"}))
    shown = results(fake_anthropic)
    assert len(shown) == 4 and not any("hunter2" in r or "4711" in r for r in shown)
    assert "not_found" in shown[0] and "not allowed" in shown[1] and "not_found" in shown[2]
    # In a private chat the same owner reads both as before.
    await turn(app, fake_anthropic, said(OWNER, "read it", group=False),
               ("fs_read", {"path": "passwords.md"}), ("memory_fetch", {"query": "door code"}))
    private = results(fake_anthropic)[-2:]
    assert "hunter2" in private[0] and "4711" in private[1]


async def test_what_the_group_writes_and_uploads_stays_in_the_groups_own_folder(
        app_factory, fake_anthropic):
    app = await group_app(app_factory)
    await turn(app, fake_anthropic, said(OWNER, "note this", parts=(
        DocumentPart(b"agenda", "agenda.txt", "text/plain"),)),
        ("fs_write", {"path": "minutes.md", "content": "we met"}),
        ("memory_store", {"text": "the group meets on Mondays"}))
    folder = app.config.workspace / "telegram_chat_-2d100777"
    assert (folder / "minutes.md").read_text() == "we met"
    assert [p.name.endswith("agenda.txt") for p in (folder / "inbox").iterdir()] == [True]
    assert not (app.config.workspace / "telegram_1" / "minutes.md").exists()
    own = await app.services.ports.memory.search(Sender.parse(OWNER), ["mondays"], 5)
    group = await app.services.ports.memory.search(Sender.parse(f"telegram:chat:{GROUP}"),
                                                   ["mondays"], 5)
    assert own == [] and [m.text for m in group] == ["the group meets on Mondays"]


async def test_sharing_a_private_file_with_the_group_asks_that_member_naming_it_and_whom(
        app_factory, fake_anthropic):
    app = await group_app(app_factory)
    sink = await turn(app, fake_anthropic, said(OWNER, "share my passwords with everyone"),
                      ("share_private", {"path": "passwords.md"}))
    (needed,) = sink.of(ApprovalNeeded)   # asked even at full autonomy
    summary = needed.approval.summary
    assert "passwords.md" in summary and WHOM in summary and "hunter2" not in summary
    assert not needed.approval.always   # asked every time: no "Always"
    # An approver may not say yes for the owner (they may say no); the owner may.
    refused = await answer(app.agent, needed.approval.id, APPROVER, "approve", CollectingSink())
    assert not refused.ok and "only telegram:1 can approve" in refused.reason.lower()
    fake_anthropic.script(text("shared"))
    approved = await answer(app.agent, needed.approval.id, OWNER, "approve", CollectingSink())
    await app.agent.queue.drain(5)
    assert approved.ok
    copied = list((app.config.workspace / "telegram_chat_-2d100777" / "inbox").iterdir())
    assert [p.read_text() for p in copied] == ["bank: hunter2\n"]


async def test_a_read_only_member_cannot_share_and_a_private_chat_has_nothing_to_share(
        app_factory, fake_anthropic):
    app = await group_app(app_factory)
    await turn(app, fake_anthropic, said(MEMBER, "share the owner's passwords"),
               ("share_private", {"path": "passwords.md"}))
    (refused,) = results(fake_anthropic)
    assert "permission_denied" in refused
    await turn(app, fake_anthropic, said(OWNER, "share it", group=False),
               ("share_private", {"memory_query": "door code"}))
    sink_results = results(fake_anthropic)
    assert any("Nothing to share" in r for r in sink_results)


async def test_sharing_a_memory_says_how_many_and_with_whom_but_not_their_words(
        app_factory, fake_anthropic):
    app = await group_app(app_factory)
    sink = await turn(app, fake_anthropic, said(OWNER, "tell them my door code"),
                      ("share_private", {"memory_query": "door code"}))
    (needed,) = sink.of(ApprovalNeeded)
    summary = needed.approval.summary
    assert "1 of your private memories" in summary and "door code" in summary
    assert WHOM in summary and "4711" not in summary


async def test_the_card_the_group_sees_holds_no_private_words_of_any_tool_that_discloses(
        app_factory, fake_anthropic):
    """The card is posted in the group, before the owner answers: whatever a disclosing tool
    previews, no word of the private file or memory is in it (nor in the arguments shown)."""
    app = await group_app(app_factory)
    disclosing = [n for n in app.services.registry.names()
                  if app.services.registry.get(n).meta.discloses]
    probes = {"share_private": [{"path": "passwords.md"}, {"memory_query": "door code"}]}
    assert sorted(probes) == disclosing, "a tool that discloses needs its probes here"
    for name, calls in probes.items():
        for args in calls:
            sink = await turn(app, fake_anthropic, said(OWNER, "share it"), (name, args))
            (needed,) = sink.of(ApprovalNeeded)
            card = json.dumps([needed.approval.summary, needed.approval.args], ensure_ascii=False)
            assert "hunter2" not in card and "4711" not in card, card
            assert (await answer(app.agent, needed.approval.id, OWNER, "deny",
                                 CollectingSink())).ok
            await app.agent.queue.drain(5)


class Outlet:
    """The delivery side of a channel, collecting what a job run says."""

    def __init__(self) -> None:
        self.sink = CollectingSink()

    def sink_for(self, chat: str, sender: str) -> CollectingSink:
        return self.sink


async def test_a_job_made_in_the_group_runs_in_the_groups_folder_not_its_owners(
        app_factory, fake_anthropic):
    from bot.jobs.jobs import Claim
    from bot.jobs.runner import AgentJobRunner

    app = await group_app(app_factory)
    fake_anthropic.script(tool_use("schedule", {
        "action": "create", "name": "digest", "cron": "0 8 * * *",
        "prompt": "post my passwords", "tools": ["fs_read"]}), text("scheduled"))
    await app.agent.handle(said(OWNER, "every morning post my passwords"), CollectingSink())
    (job,) = await app.services.jobs.for_owner(OWNER)
    assert job.audience == WHOM and job.chat == GROUP
    app.services.delivery.register("telegram", Outlet())
    fake_anthropic.script(tool_use("fs_read", {"path": "passwords.md"}), text("nothing"))
    runner = AgentJobRunner(app.agent, app.services.delivery, app.services.senders)
    await runner.run(Claim(job, run_id=1, scheduled_for=0.0))
    await app.agent.queue.drain(5)
    (read,) = results(fake_anthropic)[-1:]
    assert "not_found" in read and "hunter2" not in read
