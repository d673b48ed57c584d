"""The ports a tool may use besides its args: narrow typed interfaces, implemented further out
(the store's table owners, the metered model client, the job planner) and handed to each call
in `CallContext.ports`.

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


class JobsPort(Protocol):
    """Reminders and scheduled jobs of one owner. Errors are the tool exceptions."""

    async def preview(self, request: JobRequest) -> str: ...

    async def create(self, request: JobRequest) -> dict[str, Any]: ...

    async def list(self, owner: Sender) -> list[dict[str, Any]]: ...

    async def describe(self, owner: Sender, job_id: str) -> str: ...

    async def cancel(self, owner: Sender, job_id: str) -> dict[str, Any]: ...
