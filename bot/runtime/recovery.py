"""Start-up recovery: the turns a process left unfinished when it died are finished or reported.

Run by the composition root before the channels receive anything: each unfinished turn of this
replica (bot.conversation.turns) is queued on its conversation, so a new message waits behind it and is never
merged into it, and starts once the channels' delivery outlets are up. Then:

- a turn that was running with no call in flight goes on from its last stored step (except a
  scheduled job's run, which is never repeated: the scheduler tells its owner it was cut off);
- an answer stored but maybe not shown (the process died while sending it) is sent again;
- a call recorded as started with no outcome (write-ahead, bot.runtime.dispatch) is *in doubt*: it may or
  may not have run to the end. It is never run again: the model gets a result saying so (check
  before retrying), the user one message saying what is known, the approvers a note;
- an approved call that never started runs once (the normal resume path: the args hash and the
  policy checked again, the start a compare-and-set), and its request message shows the outcome;
- a turn waiting for an approval keeps waiting (lapsed requests are closed by bot.approvals.expiry).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from bot.approvals.display import requests_event
from bot.conversation import turns
from bot.conversation.history import error_result
from bot.core.approval_cards import SUPERSEDED, ApprovalView
from bot.core.errors import LLMError
from bot.core.events import Done, ErrorEvent, Notice, Sink
from bot.language.phrase import Lines, Moment, Phrase, plural_phrase
from bot.runtime.dispatch import Turn
from bot.store import audit
from bot.store.audit import AuditEntry, write_audit

if TYPE_CHECKING:
    from bot.approvals.records import ApprovalRequest
    from bot.conversation.journal import Journal


class Agent(Protocol):
    """What recovery asks of the agent (`bot.runtime.agent.Agent`)."""

    journal: Journal

    async def stored_turn(self, *args: Any, **kwargs: Any) -> Any: ...
    async def continue_turn(self, *args: Any, **kwargs: Any) -> Any: ...
    async def show_outcome(self, *args: Any, **kwargs: Any) -> Any: ...
    async def close_superseded(self, *args: Any, **kwargs: Any) -> Any: ...
    async def show_pending(self, *args: Any, **kwargs: Any) -> Any: ...
    async def notify_approvers(self, *args: Any, **kwargs: Any) -> Any: ...
    async def run_answered(self, *args: Any, **kwargs: Any) -> Any: ...

log = logging.getLogger(__name__)

IN_DOUBT_RESULT = (
    "in_doubt: the process was restarted while this call was running, and no outcome was "
    "recorded: it may or may not have completed.\nHint: check whether it took effect (read the "
    "file, list the state, ask the user) before calling it again; never simply retry it.")
NOT_FINISHED_RESULT = (
    "interrupted: the process was restarted while this call was running. It has no side "
    "effects, so calling it again is safe if you still need it.")
NOT_STARTED_RESULT = "not run: the process was restarted before this call started."
IN_DOUBT_NOTE = Phrase("⚠️ In doubt: the bot was restarted while this ran; it may or may not "
                       "have completed.")
# What a request's message says of its call, run (or not) after a restart.
RAN_NOTES = {True: Phrase("✅ Ran after a restart."),
             False: Phrase("❌ Ran after a restart, and failed."),
             None: Phrase("It did not run.")}


def user_notice(calls: list[dict[str, Any]]) -> Phrase:
    """The one message the user gets about calls in doubt: what is known of each (in their
    language; its English is what the conversation's history keeps)."""
    names = ", ".join(sorted({c["tool"] for c in calls}))
    known = Lines(Phrase("• {tool}, started {time}: {detail}", tool=c["tool"],
                         time=Moment(c["ts"]), detail=c["detail"]) for c in calls)
    return plural_phrase(
        "⚠️ I was restarted while working on this; the call to {tools} may or may not have "
        "completed — here is what I know:\n{calls}\nI have not run it again. Please check "
        "whether it took effect before asking me to retry.",
        "⚠️ I was restarted while working on this; the calls to {tools} may or may not have "
        "completed — here is what I know:\n{calls}\nI have not run them again. Please check "
        "whether they took effect before asking me to retry.", len(calls), tools=names,
        calls=known)


class Recovery:
    def __init__(self, agent: Agent):
        self.agent = agent
        self.services = agent.services

    async def queue(self, ready: asyncio.Event) -> int:
        """Queue the recovery of each unfinished turn of this replica on its conversation; the
        work starts once `ready` is set. Returns how many turns were queued."""
        agent = self.agent
        rows = await turns.unfinished(self.services.store, agent.replica, agent.incarnation)
        for row in rows:
            key = agent.session_key(row.sender, row.chat)
            agent.queue.spawn(key, lambda row=row: self._when_ready(row, ready))
        if rows:
            log.info("recovering %d unfinished turn(s) left by the previous process", len(rows))
        return len(rows)

    async def take_over(self, row: turns.TurnRow, sink: Sink) -> None:
        """The inbox row that started `row` came back (its process lost the lease): a turn its
        gone process was running, or answering, is recovered here, into `sink`; any other (one
        finished, or waiting for a tap, or this process's own) is left as it is."""
        agent = self.agent
        if row.state not in (turns.RUNNING, turns.ANSWERED) or row.incarnation == agent.incarnation:
            return
        if await turns.take_over(self.services.store, row, agent.replica, agent.incarnation):
            await self._recover(row, sink)

    async def _when_ready(self, row: turns.TurnRow, ready: asyncio.Event) -> None:
        await ready.wait()
        agent = self.agent
        if not await turns.take_over(self.services.store, row, agent.replica, agent.incarnation):
            return   # another run of this replica took it first
        sink = self._sink(row)
        try:
            await self._recover(row, sink)
        finally:
            close = getattr(sink, "close", None)
            if close is not None:
                await close()

    async def _recover(self, row: turns.TurnRow, sink: Sink) -> None:
        try:
            await self._settle_finished_approvals(row)
            info = await self.agent.journal.session_info(row.session_id)
            if not (info and info.get("active")):
                await turns.set_state_now(self.services.store, row.id, turns.SUPERSEDED)
            elif row.state == turns.WAITING:
                await self._finish_approved(row, sink)
            elif row.state == turns.ANSWERED:
                await self._redeliver(row, sink)
            else:
                await self._resume(row, sink)
        except LLMError as exc:   # the turn is marked failed; the user gets the one clear line
            log.warning("recovering turn %s: model call failed: %s", row.id, exc)
            await sink.emit(ErrorEvent(exc.user_message))
        except Exception:  # one turn's failure must not stop the others
            log.exception("recovering turn %s failed", row.id)

    def _sink(self, row: turns.TurnRow) -> Sink:
        delivery = self.services.delivery
        sink = delivery.sink(row.channel, row.chat, row.sender) if delivery else None
        return sink or _Unreachable(row)

    async def _redeliver(self, row: turns.TurnRow, sink: Sink) -> None:
        """An answer stored but maybe never shown (the process died while sending it): sent
        again — twice rather than never. A stored report of calls in doubt goes out again as
        the report it is (to the user, the approvers and on the requests' messages)."""
        stored, _ = await self.agent.journal.stored(row.session_id)
        last = stored[-1] if stored and stored[-1]["role"] == "assistant" else None
        text = "".join(b.get("text", "") for b in last["content"]
                       if isinstance(b, dict) and b.get("type") == "text") if last else ""
        doubts = await audit.calls_in_doubt(self.services.store, row.id)
        if doubts:
            await self._deliver_report(await self.agent.stored_turn(row, sink), doubts)
            return
        if text:
            await sink.emit(Done(text))
        await turns.set_state_now(self.services.store, row.id, turns.DELIVERED, (turns.ANSWERED,))

    # --- a running turn -------------------------------------------------------------------

    async def _resume(self, row: turns.TurnRow, sink: Sink) -> None:
        # Requests of the cut-off step were never shown (its turn was not waiting yet): the
        # step's calls are answered below or asked again by the model.
        approvals = self.services.approvals
        async with self.services.store.transaction() as tx:
            await approvals.supersede_session(tx, row.session_id)
        turn = await self.agent.stored_turn(row, sink)
        stored, _ = await self.agent.journal.stored(row.session_id)
        open_calls = _open_tool_uses(stored)
        # They may have been shown after all (the turn was not marked waiting yet): their
        # messages lose their buttons, on every restart until the step is answered.
        asked = {block["id"] for block in open_calls}
        await self.agent.close_superseded([
            request for request in await approvals.in_session(row.session_id, ("expired",))
            if request.tool_use_id in asked and request.resolved_by == SUPERSEDED])
        # A scheduled run (it has an allowlist) cut off by a crash is not repeated: the
        # scheduler tells its owner. Its calls in doubt are reported all the same.
        scheduled = row.allowlist is not None
        if not open_calls:
            if scheduled:
                await turns.set_state_now(self.services.store, row.id, turns.STOPPED)
            else:
                await self.agent.continue_turn(turn)
            return
        in_flight = {c["call_id"]: c for c in await audit.calls_in_flight(self.services.store,
                                                                           row.id)}
        results, doubts = [], []
        for block in open_calls:
            started = in_flight.get(block["id"])
            tool = self.services.registry.get(block.get("name", ""))
            if started is None:
                results.append(error_result(block["id"], NOT_STARTED_RESULT))
            elif tool is not None and not tool.meta.has_side_effects:
                results.append(error_result(block["id"], NOT_FINISHED_RESULT))
            else:
                results.append(error_result(block["id"], IN_DOUBT_RESULT))
                doubts.append(started)
        if doubts:
            await self._report(turn, results, doubts)
            return
        await self.agent.journal.write(turn, [{"role": "user", "content": results}],
                                       state=turns.STOPPED if scheduled else None)
        if not scheduled:
            await self.agent.continue_turn(turn)

    async def _report(self, turn: Turn, results: list[dict[str, Any]],
                      doubts: list[dict[str, Any]], approval: ApprovalRequest | None = None
                      ) -> None:
        """Calls in doubt: the model's results, the user's one message (kept in the history as
        the turn's answer) and the approvers' note, stored with an audit row per call."""
        text = user_notice(doubts)
        async with self.services.store.transaction() as tx:
            await self.agent.journal.append(tx, turn.session_id, [
                {"role": "user", "content": results},
                {"role": "assistant", "content": [{"type": "text", "text": text}]}])
            for call in doubts:
                await write_audit(tx, AuditEntry(
                    sender=call["sender"], decision=call["decision"], outcome="in_doubt",
                    session_id=call["session_id"], tool=call["tool"],
                    args_hash=call["args_hash"], detail=call["detail"], turn_id=turn.turn_id,
                    call_id=call["call_id"], approval_id=call["approval_id"]))
            if turn.turn_id is not None:   # the report is the turn's answer, shown below
                await turns.set_state(tx, turn.turn_id, turns.ANSWERED)
        if approval is not None:
            await self.services.approvals.mark_finished(approval.id, None)
        log.warning("turn %s: %d call(s) in doubt after a restart", turn.turn_id, len(doubts))
        await self._deliver_report(turn, doubts)

    async def _deliver_report(self, turn: Turn, doubts: list[dict[str, Any]]) -> None:
        """Show a stored report of calls in doubt; until the turn is marked in_doubt, a restart
        shows it again (a kill between the store and the send loses nothing)."""
        for approval_id in sorted({c["approval_id"] for c in doubts if c["approval_id"]}):
            request = await self.services.approvals.get(approval_id)
            if request is not None:
                await self.agent.show_outcome(request, "approve", request.resolved_by or "",
                                              note=IN_DOUBT_NOTE)
        # Made again from what is known (not the history's English): in the reader's language.
        await turn.sink.emit(Notice(user_notice(doubts)))
        await self._tell_approvers(turn, doubts)
        if turn.turn_id is not None:
            await turns.set_state_now(self.services.store, turn.turn_id, turns.IN_DOUBT,
                                      (turns.ANSWERED,))

    async def _tell_approvers(self, turn: Turn, doubts: list[dict[str, Any]]) -> None:
        delivery = self.services.delivery
        if delivery is None:
            return
        lines = [Phrase("• {tool} for {who}, started {time}: {detail}", tool=c["tool"],
                        who=c["sender"], time=Moment(c["ts"]), detail=c["detail"]) for c in doubts]
        note = Notice(plural_phrase(
            "⚠️ After a restart, this call may or may not have completed (the process stopped "
            "before its outcome was recorded):\n{calls}",
            "⚠️ After a restart, these calls may or may not have completed (the process stopped "
            "before their outcome was recorded):\n{calls}", len(lines), calls=Lines(lines)))
        await delivery.tell_privately(sorted(self.services.approvals.approvers - {turn.sender}),
                                      [note])

    # --- a turn waiting for approvals --------------------------------------------------------

    async def _show_unshown(self, row: turns.TurnRow, sink: Sink) -> None:
        """Requests stored but never shown (the process died while sending them): shown now,
        to the requester and the approvers, so the turn does not wait for a tap nobody can
        make."""
        approvals = self.services.approvals
        unshown = []
        for request in await approvals.pending_for_session(row.session_id):
            if await approvals.message_refs(request.id):
                await self.agent.show_pending(request)   # its buttons, if they were cut off
            else:
                unshown.append(request.view())
        if not unshown:
            return
        turn = await self.agent.stored_turn(row, sink)
        asked_together: dict[str, list[ApprovalView]] = {}
        for view in unshown:    # a batch is shown again as the one page it was asked as
            asked_together.setdefault(view.batch or view.id, []).append(view)
        for views in asked_together.values():
            await sink.emit(requests_event(sorted(views, key=lambda v: v.position)))
        await self.agent.notify_approvers(turn, unshown)

    async def _settle_finished_approvals(self, row: turns.TurnRow) -> None:
        """Approved calls whose outcome was stored but not yet copied to the request."""
        for request in await self.services.approvals.approved_unfinished(row.session_id):
            last = await audit.approved_call(self.services.store, request.id)
            if last is not None and last["outcome"] != "started":
                ok = None if last["outcome"] == "in_doubt" else last["outcome"] == "executed"
                await self.services.approvals.mark_finished(request.id, ok)

    async def _finish_approved(self, row: turns.TurnRow, sink: Sink) -> None:
        """Approved calls that never started run now, once; started ones are in doubt. Calls
        still waiting for their answer keep waiting (shown again if never shown)."""
        approvals = self.services.approvals
        await self._show_unshown(row, sink)
        for request in await approvals.approved_unfinished(row.session_id):
            if request.status == "started":
                # Its write-ahead row was stored with the compare-and-set that started it.
                started = await audit.approved_call(self.services.store, request.id)
                assert started is not None, "a started approval has its started row"
                turn = await self.agent.stored_turn(row, sink)
                await self._report(turn, [error_result(request.tool_use_id, IN_DOUBT_RESULT)],
                                   [started], approval=request)
                continue
            await self.agent.run_answered(request, sink, self._shows_outcome(request))
        await self._answer_denied(row, sink)

    def _shows_outcome(self, request: ApprovalRequest) -> Callable[[bool | None], Awaitable[None]]:
        """What edits the request's message once its call ran after the restart (before the
        conversation goes on, so a later crash cannot leave the buttons on it)."""
        async def show(ok: bool | None) -> None:
            await self.agent.show_outcome(request, "approve", request.resolved_by or "",
                                          note=RAN_NOTES[ok])
        return show

    async def _answer_denied(self, row: turns.TurnRow, sink: Sink) -> None:
        """A "Deny" whose answer never reached the model (the process died right after the
        tap): the model is told now, and the conversation goes on."""
        stored, _ = await self.agent.journal.stored(row.session_id)
        answered = {b.get("tool_use_id") for m in stored if m["role"] == "user"
                    for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"}
        for request in await self.services.approvals.in_session(row.session_id, ("denied",)):
            if request.tool_use_id not in answered:
                await self.agent.run_answered(request, sink, self._shows_denied(request))

    def _shows_denied(self, request: ApprovalRequest) -> Callable[[bool | None], Awaitable[None]]:
        """The process may have died between the Deny and the edit of the request's message:
        it is edited (again) to say so, and loses its buttons."""
        async def show(ok: bool | None) -> None:
            await self.agent.show_outcome(request, "deny", request.resolved_by or "")
        return show


def _open_tool_uses(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool_use blocks of the last message when it is the assistant's (no results yet)."""
    if not messages or messages[-1].get("role") != "assistant":
        return []
    return [b for b in messages[-1]["content"]
            if isinstance(b, dict) and b.get("type") == "tool_use"]


class _Unreachable:
    """Where a recovered turn's events go when its channel is not running: the history keeps
    them; the events are only logged."""

    def __init__(self, row: turns.TurnRow):
        self.row = row

    async def emit(self, event: Any) -> None:
        log.info("turn %s recovered with no channel to show %s", self.row.id,
                 type(event).__name__)
