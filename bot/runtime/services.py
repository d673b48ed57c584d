"""The long-lived parts one process shares, built once by `bot.app` (the composition root) and
used by the agent, its commands and the console. Every field is set: a process that does not
use a part still builds it (they are cheap), so no code checks for a missing one.

Tools never see this: each call gets a `CallContext` with the sender's level, the settings and
the typed ports (`call_context`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.access.audience import reach_for
from bot.core.identity import Level, Sender
from bot.core.ports import Network
from bot.core.tool import CallContext, Ports

if TYPE_CHECKING:
    import asyncio

    from bot.access.languages import Languages
    from bot.access.preferences import Preferences
    from bot.access.ratelimit import MessageRateLimiter, StoredRateLimiter
    from bot.access.senders import Senders
    from bot.approvals.receipts import Receipts
    from bot.approvals.service import Approvals
    from bot.approvals.undo import UndoLog
    from bot.config.settings import Config
    from bot.conversation.delivery import Delivery
    from bot.conversation.inbox import Inbox
    from bot.conversation.outbound import HeldMessages, SentMessages
    from bot.jobs.jobs import Jobs
    from bot.llm.client import LLMClient
    from bot.money.budgets import Budgets
    from bot.money.gate import PaidCalls
    from bot.money.spend import SpendLedger
    from bot.store.protocol import Store
    from bot.toolbox.registry import Registry


@dataclass
class Services:
    config: Config
    store: Store
    registry: Registry
    llm: LLMClient                     # model turns, summaries, supra_llm (through the port)
    approvals: Approvals
    receipts: Receipts
    undo: UndoLog
    senders: Senders
    preferences: Preferences           # each person's own settings (time zone, ...)
    jobs: Jobs                         # scheduled jobs (the schedule tool reaches them by port)
    delivery: Delivery                 # sinks for chats nobody is typing in
    spend: SpendLedger                 # every model call's cost, running totals
    budgets: Budgets                   # spend limits checked before a model call
    paid: PaidCalls                    # the one gate every paid call goes through
    # messages per minute per sender (in the store when other processes share it)
    rate_limits: MessageRateLimiter | StoredRateLimiter
    inbox: Inbox                       # incoming updates, stored before they are acknowledged
    held: HeldMessages                 # messages a platform would not deliver yet
    sent: SentMessages                 # messages a platform took (its later status callbacks)
    ports: Ports                       # what tools reach besides their args
    languages: Languages               # each person's language (the one resolver)
    network: Network = field(default_factory=Network)

    def call_workspace(self, sender: Sender | str, chat: str, audience: str = "") -> Path:
        """The folder a call for `sender` in this conversation runs in (as `call_context`)."""
        who = Sender.of_text(sender)
        return reach_for(self.config, str(who), who.channel, chat, audience).workspace

    def call_context(self, *, sender: Sender | str, level: Level | str, session_id: str,
                     chat: str, workspace: Path | None = None,
                     progress_sink: Callable[[str], Awaitable[None] | None] | None = None,
                     cancelled: asyncio.Event | None = None,
                     event_sink: Callable[[Any], Awaitable[None]] | None = None,
                     approved_by: str | None = None, audience: str = "") -> CallContext:
        """The context of one tool call (or session hook) for `sender` at `level`; `approved_by`
        the person who approved this very call, if one did; `audience` who else reads the
        conversation (its folder and memory are then the conversation's, see
        bot.access.audience)."""
        who = Sender.of_text(sender)
        extra: dict[str, Any] = {} if cancelled is None else {"cancelled": cancelled}
        reach = reach_for(self.config, str(who), who.channel, chat, audience)
        return CallContext(
            sender=who, level=Level(level), session_id=session_id, chat=chat,
            workspace=workspace or reach.workspace, settings=self.config,
            network=self.network, ports=self.ports, progress_sink=progress_sink,
            event_sink=event_sink, approved_by=approved_by, audience=audience,
            memory_owner=reach.memory_owner, private_workspace=reach.private_workspace, **extra)
