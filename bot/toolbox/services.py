"""The long-lived objects one process shares, built once by `bot.app` and passed to tools
through `CallContext.services`. Tools read from them; they keep no per-call state here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

    from bot.access.ratelimit import MessageRateLimiter, StoredRateLimiter
    from bot.access.senders import Senders
    from bot.approvals.receipts import Receipts
    from bot.approvals.service import Approvals
    from bot.approvals.undo import UndoLog
    from bot.config.settings import Config
    from bot.conversation.delivery import Delivery
    from bot.conversation.inbox import Inbox
    from bot.jobs.jobs import Jobs
    from bot.llm.client import LLMClient
    from bot.money.budgets import Budgets
    from bot.money.spend import SpendLedger
    from bot.store.sqlite import Store
    from bot.toolbox.registry import Registry

Resolver = Callable[[str], Awaitable[list[str]]]   # host name -> its addresses


@dataclass(frozen=True)
class Network:
    """How tools reach the network; `None` means the system's (tests point these at fakes)."""

    resolver: Resolver | None = None
    http_transport: httpx.AsyncBaseTransport | None = None


@dataclass
class Services:
    config: Config
    store: Store
    registry: Registry
    llm: LLMClient | None = None       # used by supra_llm and compaction
    approvals: Approvals | None = None
    receipts: Receipts | None = None
    undo: UndoLog | None = None
    senders: Senders | None = None
    jobs: Jobs | None = None           # scheduled jobs, used by the schedule tool
    delivery: Delivery | None = None   # sinks for chats nobody is typing in
    spend: SpendLedger | None = None        # every model call's cost, running totals
    budgets: Budgets | None = None          # spend limits checked before a model call
    # messages per minute per sender (in the store when other processes share it)
    rate_limits: MessageRateLimiter | StoredRateLimiter | None = None
    network: Network = field(default_factory=Network)
    inbox: Inbox | None = None              # incoming updates, stored before they are acknowledged
