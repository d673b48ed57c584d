"""How the agent asks for approvals (one request per call, a batch for several of one step;
a member's message waits while another's request holds a shared conversation) and answers
them: one answer wins (bot.approvals.service), the channel then
resumes the conversation; lapsed requests are closed; approvers get private copies. Part of
`bot.runtime.agent.Agent`, kept apart so the turn loop reads on its own.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any

from bot.approvals.display import requests_event
from bot.approvals.grants import may_offer
from bot.approvals.records import ApprovalRequest, Resolution
from bot.conversation import turns
from bot.core.approval_cards import SUPERSEDED, ApprovalSurface, ApprovalView
from bot.core.events import IncomingMessage, Notice, Sink
from bot.core.identity import LEVELS, Level
from bot.core.tool import ToolError, args_hash
from bot.language.phrase import Phrase, plural_phrase
from bot.runtime.dispatch import Planned, Turn, error_block
from bot.store.audit import write_audit
from bot.toolbox.failures import to_tool_error

log = logging.getLogger(__name__)

IN_FLIGHT_WAIT_S = 30.0    # a replica that died mid-call and never came back: go on after this
IN_FLIGHT_POLL_S = 0.1


class SessionBusy(Exception):
    """A new message met its session busy in another process (`ApprovalFlow.session_busy`)."""


def open_calls(messages: list[dict[str, Any]]) -> list[str]:
    """The ids of the calls the history ends with that have no result yet."""
    if not messages or messages[-1].get("role") != "assistant":
        return []
    return [b["id"] for b in messages[-1]["content"]
            if isinstance(b, dict) and b.get("type") == "tool_use"]


class ApprovalFlow:
    """The approval half of the Agent (mixed into `bot.runtime.agent.Agent`, whose state it uses)."""

    async def session_busy(self, reader: Any, stored: list[dict[str, Any]]) -> bool:
        """Is a call of the session whose tap was answered (on any process) still without its
        result in `stored`?"""
        return await self.services.approvals.tapped_in(reader, open_calls(stored))

    async def until_session_free(self, session_id: str) -> None:
        """Wait, for at most IN_FLIGHT_WAIT_S, until the stored history has the results of the
        session's answered calls: a message written right after a tap that another replica took
        comes after that call's result, as on one process (whose session queue orders them),
        and the model is never told that a call which ran did not."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + IN_FLIGHT_WAIT_S
        while True:
            stored, _ = await self.journal.stored(session_id)
            if not await self.session_busy(self.services.store, stored):
                await self.services.store.catch_up()   # the caches take its writes in too
                return
            if loop.time() >= deadline:
                break
            await asyncio.sleep(IN_FLIGHT_POLL_S)   # another process's work: polled in the store
        log.warning("session %s: still busy elsewhere after %.0f s; the new message goes on",
                    session_id, IN_FLIGHT_WAIT_S)

    # --- asking ------------------------------------------------------------------------

    def _may_offer_always(self, tool: str, risk: str) -> bool:
        registry = self.services.registry
        found = registry.get(tool)
        if found is not None and found.meta.discloses:   # asked every time: no "Always"
            return False
        profile = registry.profile
        return may_offer(tool, risk, profile.always_max_risk, profile.always_ask)

    async def ask_all(self, turn: Turn, asks: list[Planned],
                       results: dict[str, dict[str, Any]]) -> list[ApprovalView]:
        """One request per call to ask about; several asked in one step share a batch. A call
        whose preview fails gets its error in `results` instead (it cannot work)."""
        previewed: list[tuple[Planned, str]] = []
        for plan in asks:
            block, tool = plan.block, plan.tool
            try:
                previewed.append((plan, await self.dispatcher.preview(turn, tool, block["input"],
                                                                      block["id"])))
            except Exception as exc:  # a failing preview means the call cannot work: say so
                results[block["id"]] = error_block(block["id"], to_tool_error(exc, tool.meta.name),
                                                   tool, block["input"])
        batch = self.services.approvals.new_batch() if len(previewed) > 1 else None
        views = []
        for position, (plan, summary) in enumerate(previewed):
            block, name = plan.block, plan.tool.meta.name
            request = await self.services.approvals.create(
                session_id=turn.session_id, sender=turn.sender, chat=turn.chat,
                channel=turn.channel, tool=name, tool_use_id=block["id"], args=block["input"],
                risk=plan.risk, summary=summary, autonomy=turn.autonomy,
                allowlist=turn.run_allowlist, batch=batch, position=position,
                scope=plan.scope if self._may_offer_always(name, plan.risk) else None)
            views.append(request.view())
        return views

    async def held_by_another(self, turn: Turn) -> bool:
        """In a shared conversation, someone else's request waiting for an answer holds it: a
        member's message must not cancel it (that would be answering it for them). The member
        is told to write again later; the requester and approvers go on (their message
        supersedes it, as in a conversation of one)."""
        if self.is_approver(turn.sender):
            return False
        approvals = self.services.approvals
        held = [r for r in await approvals.pending_for_session(turn.session_id)
                if r.sender != turn.sender]
        if not held:
            return False
        minutes = max(1, math.ceil((max(r.expires_at for r in held) - approvals.clock()) / 60))
        await turn.sink.emit(Notice(plural_phrase(
            "{who} has a request waiting for an answer in this conversation, so I cannot take "
            "your message yet. Send it again once they answer, or in {n} minute when the "
            "request expires.",
            "{who} has a request waiting for an answer in this conversation, so I cannot take "
            "your message yet. Send it again once they answer, or in {n} minutes when the "
            "request expires.", minutes, who=held[0].sender)))
        return True

    # --- answers -----------------------------------------------------------------------

    async def resolve_approval(self, approval_id: str, resolver: str, choice: str) -> Resolution:
        """Decide one answer (bot.approvals.service decides who may answer, and only one answer wins).
        The channel, knowing where the conversation continues, then calls `resume_approval`."""
        resolution = await self.services.approvals.resolve(approval_id, resolver, choice)
        return await self._answered(resolution, choice, resolver)

    async def resolve_batch(self, batch: str, resolver: str, choice: str) -> Resolution:
        """"Approve all" / "Deny all" of a batch: the calls still pending, in one
        compare-and-set; then, like any answer, `resume_approval`."""
        resolution = await self.services.approvals.resolve_batch(batch, resolver, choice)
        return await self._answered(resolution, choice, resolver)

    async def _answered(self, resolution: Resolution, choice: str, resolver: str) -> Resolution:
        if resolution.lapsed_now and resolution.request is not None:
            await self.close_lapsed(list(resolution.lapsed) or [resolution.request])
        if resolution.ok and resolution.request is not None:
            request = resolution.request
            await self.show_outcome(request, choice, resolver)
            if request.batch is None or resolution.batch_done:
                self._won[request.id] = request   # a batch resumes once, when all is decided
        return resolution

    def resume_approval(self, resolution: Resolution, sink: Sink) -> bool:
        """Run the answered call and continue its conversation, streaming into `sink`; once per
        winning answer (False for a refused, unknown or already resumed one, and for an answer
        that leaves calls of its batch undecided: the batch resumes with its last answer)."""
        request = resolution.request
        if not resolution.ok or request is None or self._won.pop(request.id, None) is None:
            return False
        resolver = request.resolved_by or ""
        key = self.session_key(request.sender, request.chat)
        # The answer the conversation goes on to is spoken too, if the requester has voice on.
        sink = self.voice.wrapped(IncomingMessage(sender=request.sender, chat=request.chat,
                                                  text="", channel=request.channel),
                                  request.autonomy or "read_only", sink)
        work = self._resume_batch(request.batch, sink) if request.batch is not None \
            else self._resume(request, resolver, sink)
        self.queue.spawn(key, lambda: self._guarded(sink, work), request.sender)
        return True

    async def close_expired(self, request: Any) -> None:
        await self.close_lapsed([request])

    async def close_lapsed(self, requests: list[Any]) -> None:
        """Requests nobody answered in time: their messages say so and lose their buttons, the
        requester is told in the chat, and the model gets a result saying the calls did not
        run, so the turn ends cleanly and the next message starts fresh. A batch closes whole,
        with one note."""
        groups: dict[str, list[Any]] = {}
        for request in requests:
            groups.setdefault(request.batch or request.id, []).append(request)
        for group in groups.values():
            first = group[0]
            await self.show_outcome(first, "expire", "myclaw")
            sink = self.services.delivery.sink(first.channel, first.chat, first.sender) \
                if self.services.delivery is not None else None
            key = self.session_key(first.sender, first.chat)
            self.queue.spawn(key, lambda g=group, s=sink: self._guarded(  # type: ignore[misc]
                s or NoChannel(), self._expired(g, s)), first.sender)

    async def _expired(self, requests: list[Any], sink: Sink | None) -> None:
        await self.services.store.catch_up()
        first = requests[0]
        if first.batch is not None:  # the calls answered before the batch lapsed get a result too
            requests = await self.services.approvals.batch_members(first.batch)
        turn = await self._turn(first.session_id, first.sender, first.chat,
                                first.autonomy or "read_only", sink or NoChannel(),
                                first.allowlist)
        results = [denied_block(r) if r.status == "denied" else error_block(
            r.tool_use_id, ToolError("permission_denied", f"The call to {r.tool} was not approved "
                                     "in time; it did not run.",
                                     "Do not retry it unless the user asks again."))
            for r in requests]
        row = await turns.open_in_session(self.services.store, first.session_id)
        ended = (row is not None and row.state == turns.WAITING
                 and not await self.services.approvals.pending_for_session(first.session_id))
        turn.turn_id = row.id if ended else None
        await self.journal.write(turn, [{"role": "user", "content": results}],
                                 state=turns.EXPIRED if ended else None)
        if sink is not None:
            tools = ", ".join(dict.fromkeys(r.tool for r in requests))
            await sink.emit(Notice(Phrase("⌛ The request to run {tools} expired — nothing ran. "
                                          "Ask again if you still want it.", tools=tools)))
            close = getattr(sink, "close", None)
            if close is not None:
                await close()

    async def show_outcome(self, request: Any, choice: str, resolver: str, note: str = "") -> None:
        await self.display.show_outcome(request, choice, resolver, note)

    async def show_pending(self, request: ApprovalRequest) -> None:
        """A request still pending is shown with its buttons again on every message showing it
        (a restart may have cut off the edit that gives a recorded request its buttons)."""
        await self.display.show_outcome(request, "pending", "")

    async def close_superseded(self, requests: list[ApprovalRequest]) -> None:
        """Requests a newer message (or a restart) ended lose their buttons on every message
        showing them (a batch is redrawn once, whole)."""
        batches: set[str] = set()
        for request in requests:
            if request.batch is not None:
                if request.batch in batches:
                    continue
                batches.add(request.batch)
            await self.display.show_outcome(request, "expire", SUPERSEDED)

    async def notify_approvers(self, turn: Turn, views: list[ApprovalView]) -> None:
        """Each approver gets a private copy of the requests they may answer; whichever copy is
        tapped first wins (the compare-and-set), then every copy shows the outcome."""
        if views:
            await self._to_approvers(turn.sender, [requests_event(views)])

    async def _to_approvers(self, about: str, events: list[Any]) -> None:
        """Each approver but `about` gets `events` privately (when `notify_approvers` is on)."""
        delivery = self.services.delivery
        if delivery is None or not self.config["approvals"]["notify_approvers"]:
            return
        await delivery.tell_privately(sorted(self.services.approvals.approvers - {about}), events)

    def add_approval_surface(self, channel: str, surface: ApprovalSurface) -> None:
        """A running channel that can show approvals answered elsewhere (see resolve_elsewhere)."""
        self.display.add_surface(channel, surface)

    async def resolve_elsewhere(self, approval_id: str, resolver: str, choice: str) -> Resolution:
        """An answer from outside the request's channel (the web console): the same
        compare-and-set as a tap; the conversation resumes in the request's chat (through the
        channel's delivery outlet), and the channel edits its request message to show the outcome."""
        resolution = await self.resolve_approval(approval_id, resolver, choice)
        done = resolution.request
        if resolution.ok and done is not None:
            delivery = self.services.delivery
            sink = delivery.sink(done.channel, done.chat, done.sender) if delivery else None
            self.resume_approval(resolution, sink or NoChannel())
        return resolution

    async def set_approval_message_ref(self, approval_id: str, ref: str, channel: str = "") -> None:
        approvals = self.services.approvals
        await approvals.set_message_ref(approval_id, ref, channel)
        # Answered while this copy was on its way (a tap on another copy, say the one shown
        # before a restart): the outcome reached the copies known then, so this one shows it
        # now instead of keeping buttons that can no longer do anything.
        request = await approvals.get(approval_id)
        if request is not None and request.status != "pending":
            outcome = request.outcome()
            await self.display.show_outcome(request, outcome.choice, outcome.resolver)

    async def pending_approvals(self, channel: str) -> list[ApprovalView]:
        return [r.view() for r in await self.services.approvals.pending(channel)]

    async def capped_level(self, sender: str, recorded: str | None) -> Any:
        """The level a turn goes on at after a wait (an approval, a restart): the sender's
        level now (revoked means refused), never above the level the turn ran at — a job's
        turn ran at the job's cap, and its approved call and the rest of its turn stay there."""
        now = await self.services.senders.level_of(sender, recorded=recorded)
        started = Level(recorded) if recorded in LEVELS else None
        return min(now, started) if isinstance(now, Level) and started is not None else now


    # --- approvals resumed ---------------------------------------------------------------

    async def run_answered(self, request: ApprovalRequest, sink: Sink,
                           on_ran: Callable[[bool | None], Awaitable[None]]) -> None:
        """An answered request whose call nobody ran (or refused) yet: run it (the args hash
        and the policy checked again, started at most once), tell `on_ran` how it ended, and
        continue its conversation, as after the tap. A call of a batch runs with its batch,
        once every call of it is decided (its first answered call takes the batch up)."""
        if request.batch is None:
            await self._resume(request, request.resolved_by or "", sink, on_ran)
            return
        members = await self.services.approvals.batch_members(request.batch)
        answered = [m for m in members if m.status in ("approved", "denied")]
        if answered and answered[0].id == request.id and \
                not any(m.status == "pending" for m in members):
            await self._resume_batch(request.batch, sink)

    async def _resume(self, request: Any, resolver: str, sink: Sink,
                      on_ran: Callable[[bool | None], Awaitable[None]] | None = None) -> None:
        """Run (or refuse) the resolved call, then re-enter the loop from the stored history.
        `on_ran(ok)` is told how the call ended (None: not run) before the loop goes on."""
        await self.services.store.catch_up()
        autonomy = await self.capped_level(request.sender, request.autonomy)
        turn = await self._waiting_turn(request, autonomy, sink)
        result, ok = await self._resolved_result(turn, request, resolver)
        going_on = await self._store_results(turn, [result], [(request.id, ok)])
        if on_ran is not None:
            await on_ran(ok if request.status != "denied" else None)
        if going_on:
            await self._go_on(turn)

    async def _waiting_turn(self, request: Any, autonomy: Level | str, sink: Sink) -> Turn:
        """The turn a resolved request belongs to, as it was begun: its row, who else reads
        it, and the model a scheduled run named."""
        row = await turns.open_in_session(self.services.store, request.session_id)
        turn = await self._turn(request.session_id, request.sender, request.chat, autonomy, sink,
                                request.allowlist, row.model if row is not None else "")
        turn.turn_id = row.id if row is not None else None
        turn.audience = row.audience if row is not None else ""
        return turn

    async def _resume_batch(self, batch: str, sink: Sink) -> None:
        """Every call of the batch is decided: run the approved ones in the model's order, give
        each call its result, and continue the conversation once."""
        await self.services.store.catch_up()
        members = await self.services.approvals.batch_members(batch)
        first = members[0]
        autonomy = await self.capped_level(first.sender, first.autonomy)
        turn = await self._waiting_turn(first, autonomy, sink)
        results, ends = [], []
        for member in members:
            if member.status in ("approved", "denied"):
                result, ok = await self._resolved_result(turn, member, member.resolved_by or "")
                results.append(result)
                ends.append((member.id, ok))
            else:   # closed meanwhile (it cannot be pending: this is the batch's last answer)
                results.append(error_block(member.tool_use_id, ToolError(
                    "permission_denied", f"The call to {member.tool} was not approved; it did "
                                         "not run.", "Do not retry it unless the user asks again.")))
        if await self._store_results(turn, results, ends):
            await self._go_on(turn)

    async def _store_results(self, turn: Turn, results: list[dict[str, Any]],
                             ends: list[tuple[str, bool | None]]) -> bool:
        """Store the results; True when the model goes on: no call of the session waits for an
        answer any more (other calls of the same step may still wait: the turn waits on)."""
        waiting = await self.services.approvals.pending_for_session(turn.session_id)
        active = await self.journal.session_info(turn.session_id)
        going_on = not waiting and bool(active and active.get("active"))
        # The results, the calls' outcome rows and the requests' final status in one commit: a
        # crash leaves either all of them or a call started with no outcome (in doubt).
        async with self.services.store.transaction() as tx:
            await self.journal.write_in(tx, turn, [{"role": "user", "content": results}], state=(
                turns.RUNNING if going_on else turns.WAITING if waiting else turns.SUPERSEDED))
            for approval_id, ok in ends:
                if ok is not None:
                    await self.services.approvals.finish_in(tx, approval_id, ok)
        return going_on

    async def _go_on(self, turn: Turn) -> None:
        stored, size, _ = await self.journal.history(turn.session_id)
        await self._loop(turn, await self._prepared(turn, stored, size))

    async def _resolved_result(self, turn: Turn, request: Any,
                               resolver: str) -> tuple[dict[str, Any], bool | None]:
        """The call's result, and how the request ends (False: refused or failed, None: its
        status stays as it is)."""
        call_id = request.tool_use_id
        if request.status == "denied":
            return error_block(call_id, ToolError(
                "permission_denied", f"The user denied the call to {request.tool}.",
                "Do not retry the same call. Ask the user what they would like instead.")), None
        plan = self.dispatcher.plan(turn, {"id": call_id, "name": request.tool, "input": request.args})
        if args_hash(request.args) != request.args_hash:
            plan.result = error_block(call_id, ToolError(
                "permission_denied", "The stored approval does not match the approved arguments.",
                "Do not retry; tell the user the approval was invalid."))
        if plan.result is not None:
            return plan.result, False
        if not await self._claim_run(turn, plan, request, resolver):
            return error_block(call_id, ToolError(
                "in_doubt", f"This approved call to {request.tool} was already started once; "
                            "it was not run again.",
                "Do not retry it blindly: check whether it happened first.")), None
        result = await self.dispatcher.execute(turn, plan.tool, request.args, call_id,
                                               approver=resolver, summary=request.summary,
                                               approval_id=request.id)
        return result, not result.get("is_error")

    async def _claim_run(self, turn: Turn, plan: Planned, request: Any, resolver: str) -> bool:
        """Write-ahead for an approved call, with the compare-and-set that lets it start once
        (approved → started), whoever resumes it: the tap, or a restart's recovery."""
        started = self.dispatcher.started(turn, plan.tool, request.args, request.tool_use_id,
                                          approver=resolver, approval_id=request.id,
                                          summary=request.summary)
        async with self.services.store.transaction() as tx:
            if not await self.services.approvals.claim_run(tx, request.id):
                return False
            await write_audit(tx, started)
        return True




def denied_block(request: Any) -> dict[str, Any]:
    return error_block(request.tool_use_id, ToolError(
        "permission_denied", f"The user denied the call to {request.tool}.",
        "Do not retry the same call. Ask the user what they would like instead."))


class NoChannel:
    """Where a resumed conversation goes when its channel is not running: the history keeps
    it; the events are only logged."""

    async def emit(self, event: Any) -> None:
        log.info("approval resumed with no channel to show %s", type(event).__name__)
