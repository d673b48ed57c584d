"""The ports: narrow typed interfaces the outer rings use, implemented further out. A tool's
(memory, the metered model, quotas, jobs) are handed to each call in `CallContext.ports`; a
channel's (the durable inbox, held messages) are handed out by the agent (`AgentAPI.inbox`,
`AgentAPI.held`, `AgentAPI.sent`).

A tool never reaches the store, the budgets or the scheduler any other way. The bundle a call
gets, and what stands in for a port a process has not wired, are in `bot.core.tool` (`Ports`,
`Unavailable`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from bot.core.identity import Level, Sender

if TYPE_CHECKING:
    import asyncio

    import httpx

Resolver = Callable[[str], Awaitable[list[str]]]   # host name -> its addresses


@dataclass(frozen=True)
class Network:
    """How tools reach the network; `None` means the system's (tests point these at fakes)."""

    resolver: Resolver | None = None
    http_transport: httpx.AsyncBaseTransport | None = None


@dataclass(frozen=True)
class Memory:
    id: int
    text: str
    created_at: float


class MemoryPort(Protocol):
    """A sender's long-term memory (the `memories` table's owner)."""

    async def remember(self, owner: Sender, text: str) -> int | None: ...

    async def forget(self, owner: Sender, memory_id: int) -> bool: ...

    async def search(self, owner: Sender, words: list[str], limit: int) -> list[Memory]: ...


@dataclass(frozen=True)
class ModelAnswer:
    text: str
    model: str
    usage: dict[str, int]


class ModelPort(Protocol):
    """One question to a model, no tools, metered: the caller's limits are checked before the
    call and its cost recorded after it."""

    async def ask(self, *, sender: Sender, level: Level, session_id: str, model: str,
                  prompt: str, system: str, max_tokens: int) -> ModelAnswer: ...


@dataclass(frozen=True)
class Payer:
    """Whose limits a paid call counts against (the sender, at the turn's level: a job's turn
    runs as its owner at the job's capped level), and the session its cost is booked under."""

    sender: str
    level: str | None = None
    session_id: str = ""


class BillPort(Protocol):
    """What one paid call cost, said by its caller (see bot.money.gate)."""

    def charge(self, model: str, *, usage: Mapping[str, int] | None = None,
               cost: float | None = None) -> None: ...


class PaidCallsPort(Protocol):
    """The one gate for paid calls (bot.money.gate.PaidCalls): `call` refuses before the call
    when the payer is over a limit (raises bot.money.budgets.BudgetExceeded, an LLMError with a
    `user_message`) and records what the call charged when the block exits."""

    def call(self, payer: Payer, kind: str) -> AbstractAsyncContextManager[BillPort]: ...


class QuotaPort(Protocol):
    """Per-sender daily call counts of a tool (the `tool_quota` table's owner)."""

    async def reserve(self, sender: Sender, tool: str, day: str, limit: int) -> int | None: ...

    async def refund(self, sender: Sender, tool: str, day: str) -> None: ...


@dataclass(frozen=True)
class JobRequest:
    """What a schedule call asks for, with who asks (their level for this turn, roles applied)."""

    owner: Sender
    level: Level
    chat: str
    name: str = ""
    at: str | None = None
    cron: str | None = None
    message: str = ""
    prompt: str = ""
    tools: tuple[str, ...] = ()
    audience: str = ""   # who else reads the chat it posts in (a group): its runs work there
    model: str = ""      # a configured model its runs ask ("" = the default for jobs)


class JobsPort(Protocol):
    """Reminders and scheduled jobs of one owner. Errors are the tool exceptions."""

    async def preview(self, request: JobRequest) -> str: ...

    async def create(self, request: JobRequest) -> dict[str, Any]: ...

    async def list(self, owner: Sender) -> list[dict[str, Any]]: ...

    async def describe(self, owner: Sender, job_id: str) -> str: ...

    async def cancel(self, owner: Sender, job_id: str) -> dict[str, Any]: ...


# --- the ports channels use ---------------------------------------------------------------

@dataclass(frozen=True)
class Entry:
    """An update as received: its platform id, its conversation ("" = runs out of order) and
    what is needed to run it again after a restart (text, usually the update's JSON)."""

    update_key: str
    conversation: str
    payload: str


@dataclass(frozen=True)
class InboxRow:
    """A stored update (`Entry`) with its row id, as the inbox hands it back to run."""

    id: int
    channel: str
    update_key: str
    conversation: str
    payload: str
    attempts: int = 0    # claims so far: more than one means an earlier run was cut off
    claimed: bool = False   # claimed by this process as it was stored (`put`)


Adopt = Callable[[list[InboxRow]], Awaitable[int] | int]   # queue rows; how many were new


class InboxPort(Protocol):
    """What a channel may ask of the durable inbox (`AgentAPI.inbox`; implemented by
    `bot.conversation.inbox.Inbox`): store updates before acknowledging them, run each under
    its claim, and find the rows a restart or another process left."""

    async def put(self, channel: str, entries: list[Entry], *, claim: bool = False
                  ) -> list[InboxRow]: ...

    async def run(self, row: InboxRow, work: Callable[[], Awaitable[bool | None]],
                  limit: asyncio.Semaphore | None = None) -> bool: ...

    async def recover(self, channel: str) -> list[InboxRow]: ...

    async def sweep(self, channel: str, adopt: Adopt) -> None:
        """Forever: hand `adopt` the rows of `channel` nobody else will run."""
        ...

    def active_conversations(self) -> int: ...


@dataclass(frozen=True)
class HeldMessage:
    """A message a platform would not deliver yet, kept for its recipient."""

    recipient: str
    kind: str             # reminder | job | approval | reply | notice
    text: str
    reason: str           # why it was not delivered, as the operator sees it
    created_at: float
    approval_id: str = ""


class ChannelConfig(Protocol):
    """What a channel reads of the configuration (implemented by bot.config.settings.Config):
    its sections by name, and secrets from the environment (never from the file)."""

    def __getitem__(self, section: str) -> Any: ...

    def secret(self, name: str) -> str | None: ...


@dataclass(frozen=True)
class Sent:
    """A message a platform took, kept for its later status callbacks and quoted replies."""

    to: str
    kind: str                    # reply | reminder | job | approval | notice
    text: str
    payload: dict[str, Any]
    retried: bool = False


class SentPort(Protocol):
    """What was sent, by the platform's message id (`AgentAPI.sent`; implemented by
    `bot.conversation.outbound.SentMessages`)."""

    async def remember(self, message_id: str, sent: Sent) -> None: ...

    async def recall(self, message_id: str) -> Sent | None: ...


class HeldPort(Protocol):
    """Messages held until their recipient can be reached (`AgentAPI.held`; implemented by
    `bot.conversation.outbound.HeldMessages`). `take` hands each held message out once."""

    async def hold(self, recipient: str, kind: str, text: str, reason: str,
                   approval_id: str = "") -> None: ...

    async def take(self, recipient: str) -> list[HeldMessage]: ...

    async def count(self, recipient: str) -> int: ...
