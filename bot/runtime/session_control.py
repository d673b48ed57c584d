"""Which conversation a message belongs to, who may start one, and the per-conversation queue:
sessions, /stop, shutdown, rate limits and pairing. Part of `bot.runtime.agent.Agent`.
"""

from __future__ import annotations

import logging
from typing import Any

from bot.access.audience import audience_of
from bot.config.settings import SessionScope
from bot.conversation import turns
from bot.conversation.journal import active_key
from bot.conversation.sessions import Stopped
from bot.core.errors import LLMError, ShuttingDown
from bot.core.events import (
    Button,
    ErrorEvent,
    IncomingMessage,
    Notice,
    Sink,
)
from bot.core.identity import OPERATOR, Level, Sender
from bot.language.phrase import Phrase
from bot.money.budgets import BudgetExceeded
from bot.runtime import commands
from bot.runtime.approval_flow import SessionBusy, open_calls
from bot.toolbox.hooks import run_session_hooks

log = logging.getLogger(__name__)

SESSION_CACHE_SIZE = 50_000


class SessionControl:
    """The session half of the Agent (mixed into `bot.runtime.agent.Agent`, whose state it uses)."""

    @property
    def shared_sessions(self) -> bool:
        """Everyone in a chat shares one conversation (`session_scope = "chat"`)."""
        return self.config.session_scope is SessionScope.CHAT

    def shared_with_others(self, message: IncomingMessage) -> bool:
        """Is this message's conversation shared with other people (a group, chat scope)?"""
        return self.shared_sessions and message.is_group

    def audience(self, message: IncomingMessage) -> str:
        """Who else reads this message's conversation ("" = the sender alone)."""
        return audience_of(message.channel, message.chat, message.is_group)

    def is_approver(self, sender: str) -> bool:
        """May `sender` act on other people's requests and turns (answer, stop, reset)?"""
        return self.services.approvals.is_approver(sender)

    def session_key(self, sender: str, chat: str) -> str:
        if self.shared_sessions:
            return f"chat:{Sender.parse(sender).channel}:{chat}"
        return f"{sender}|{chat}"

    def _owner(self, message: IncomingMessage) -> str:
        if self.shared_sessions:
            return f"{message.channel}:chat:{message.chat}"
        return message.sender

    async def session_id(self, message: IncomingMessage) -> str:
        """The active session of (sender, chat); remembered so a turn costs no lookup."""
        owner = self._owner(message)
        key = active_key(owner, message.chat)
        cached = self._sessions.get(key)
        if cached is None:
            generation = self._sessions_generation
            cached = await self.journal.active_session(owner, message.chat, message.channel)
            if len(self._sessions) >= SESSION_CACHE_SIZE:
                self._sessions.clear()
            if generation == self._sessions_generation:  # else it may be the replaced one
                self._sessions[key] = cached
        return cached

    def _session_changed_elsewhere(self, key: str | None) -> None:
        self._sessions_generation += 1
        if key is None:
            self._sessions.clear()
        else:
            self._sessions.pop(key, None)

    async def new_session(self, message: IncomingMessage, level: str) -> str:
        old = await self.session_id(message)
        async with self.services.store.transaction() as tx:
            superseded = await self.services.approvals.supersede_session(tx, old)
        await self.close_superseded(superseded)
        new = await self.journal.new_session(self._owner(message), message.chat, message.channel)
        self._sessions[active_key(self._owner(message), message.chat)] = new
        ctx = self.services.call_context(sender=message.sender, level=level, session_id=new,
                                         chat=message.chat, audience=self.audience(message))
        await run_session_hooks(self.services.registry, "new_session", ctx)
        return new

    def running_for(self, message: IncomingMessage) -> str | None:
        """Whose turn is running in this message's conversation (None: nothing runs)."""
        return self.queue.running_for(self.session_key(message.sender, message.chat))

    def stop(self, message: IncomingMessage) -> bool:
        return self.queue.stop(self.session_key(message.sender, message.chat))

    async def _queued(self, message: IncomingMessage, sink: Sink, work: Any) -> None:
        key = self.session_key(message.sender, message.chat)
        try:
            await self.queue.run(key, lambda: self._guarded(sink, work()), message.sender)
        except Stopped:
            await sink.emit(Notice(Phrase("Stopped.")))
        except ShuttingDown:
            if message.inbox_id is not None:
                raise   # stored in the inbox: it runs after the restart, nobody needs to resend
            await sink.emit(Notice(Phrase("I'm restarting right now; please send that again in a "
                                          "minute.")))

    async def shutdown(self, grace: float = 10.0) -> bool:
        """Finish or cancel the turns in flight; see SessionQueue.shutdown. Stored updates not
        started yet stay in the inbox for the next start."""
        if self.services.inbox is not None:
            self.services.inbox.stop_claiming()
        finished = await self.queue.shutdown(grace)
        await self.queue.drain(timeout=grace)
        await self.voice.stop(grace)   # voice replies still being spoken: the text is out
        return finished

    async def _guarded(self, sink: Sink, coro: Any) -> None:
        """Run a turn; a model failure becomes one clear line, never a lost message."""
        try:
            await coro
        except LLMError as exc:
            log.warning("model call failed: %s", exc)
            await sink.emit(ErrorEvent(exc.user_message))
            if isinstance(exc, BudgetExceeded) and exc.approver_note:
                await self._to_approvers(exc.sender, [Notice(exc.approver_note)])

    async def _within_rate(self, message: IncomingMessage, level: Level, sink: Sink) -> bool:
        limiter = self.services.rate_limits
        if limiter is None:
            return True
        decision = await limiter.admit(message.sender, str(level))
        if decision.notice:
            await sink.emit(Notice(decision.notice))
        return decision.allowed

    async def _pair(self, message: IncomingMessage, sink: Sink) -> None:
        """A stranger: /whoami tells them their id; anything else asks the approvers (once) to
        let them in, with buttons; writing again while waiting gets one reminder, then silence."""
        senders = self.services.senders
        if message.text.startswith("/") and commands.parse(message.text)[0] == "whoami":
            await sink.emit(Notice(Phrase("You are {sender}. You are not paired with this bot yet; "
                                          "write to me and I will ask the operator.",
                                          sender=message.sender), private=True))
            return
        code = await senders.pairing_code(message.sender, channel=message.channel,
                                          chat=message.chat, display_name=message.display_name)
        if code is None:
            if await senders.nudge(message.sender):
                await sink.emit(Notice(Phrase("Still waiting for the operator to let you in; I will "
                                              "tell you here when they do."), private=True))
            return
        log.info("pairing request from %s (%s): code %s", message.sender,
                 message.display_name or "no name", code)
        await sink.emit(Notice(Phrase(
            "Hi! I don't know you yet, so I have asked the operator to let you in; I will tell "
            "you here when they do. (Your pairing code is {code}: the operator can also run "
            "`myclaw pair approve {code}`.)", code=code), private=True))
        await self._ask_to_pair(message, code)

    async def _ask_to_pair(self, message: IncomingMessage, code: str) -> None:
        name = " ".join(message.display_name.replace("`", "'").split())[:64]
        who = f"{message.sender} (`{name}`)" if name else message.sender
        note = Notice(Phrase("👋 {who} wants to talk to the bot.", who=who), buttons=(
            Button(Phrase("Allow: {level}", level="read_only"), f"/pair allow {code} read_only"),
            Button(Phrase("Allow: {level}", level="supervised"), f"/pair allow {code} supervised"),
            Button(Phrase("Deny"), f"/pair deny {code}")))
        if self.services.delivery is not None:
            await self.services.delivery.tell_privately(
                sorted(self.services.approvals.approvers | {str(OPERATOR)}), [note])

    async def tell_paired(self, code: str, text: str) -> None:
        """Tell the stranger who asked with `code` the outcome, where they asked."""
        row = await self.services.senders.code_row(code)
        if row is None or not row["channel"] or self.services.delivery is None:
            return
        sink = self.services.delivery.sink(row["channel"], row["chat"], row["sender"])
        if sink is not None:
            await sink.emit(Notice(text, private=True))
            close = getattr(sink, "close", None)
            if close is not None:
                await close()

    async def _begin(self, turn: Any, message: IncomingMessage, user: dict[str, Any],
                     stored: list[dict[str, Any]], *, check: bool, autonomy: Level | str,
                     allowlist: frozenset[str] | None, model: str) -> list[Any]:
        """Store the turn's start with its user message; the requests it superseded. Raises
        SessionBusy (nothing stored) when `check` finds a call of the session whose tap was
        answered still without its result (bot.runtime.approval_flow)."""
        superseded: list[Any] = []
        # Concurrent-safe: every write here is to this session's rows (its approvals and turns
        # by session id, its messages), and the session's lock orders it after the others.
        async with self.journal.session_transaction(turn.session_id) as tx:
            if open_calls(stored):
                # Calls still waiting for a tap: the new message supersedes them (their tool_use
                # gets a "not completed" result from repair). Done before anything else, so a
                # late tap cannot run a call the model was told did not happen; one whose tap
                # won already is waited for.
                superseded = await self.services.approvals.supersede_session(tx, turn.session_id)
            if check and await self.session_busy(tx, stored):
                raise SessionBusy(turn.session_id)
            await turns.begin(tx, turn_id=turn.turn_id, session_id=turn.session_id,
                              sender=message.sender, chat=message.chat, channel=turn.channel,
                              level=str(autonomy), allowlist=allowlist,
                              inbox_id=message.inbox_id, owner=self.replica,
                              incarnation=self.incarnation, audience=turn.audience, model=model)
            await self.journal.append(tx, turn.session_id, [user])
        return superseded
