"""The long-lived objects one process shares, built once by `bot.app` and passed to tools
through `CallContext.services`. Tools read from them; they keep no per-call state here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.config import Config
    from bot.registry import Registry
    from bot.store import Store


@dataclass
class Services:
    config: Config
    store: Store
    registry: Registry
    llm: Any = None          # bot.llm.LLMClient — used by supra_llm and compaction
    approvals: Any = None    # bot.approvals.Approvals
    receipts: Any = None     # bot.receipts.Receipts
    undo: Any = None         # bot.undo.UndoLog
    senders: Any = None      # bot.senders.Senders
    jobs: Any = None         # bot.jobs.Jobs — scheduled jobs, used by the schedule tool
    delivery: Any = None     # bot.delivery.Delivery — sinks for chats nobody is typing in
    spend: Any = None        # bot.spend.SpendLedger — every model call's cost, running totals
    budgets: Any = None      # bot.budgets.Budgets — spend limits checked before a model call
    rate_limits: Any = None  # bot.ratelimit.MessageRateLimiter — messages per minute per sender
    extras: dict[str, Any] = field(default_factory=dict)  # e.g. the resolver the net guard uses
