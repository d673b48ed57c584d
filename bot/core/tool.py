"""The Tool contract: what every tool (built-in, custom or MCP) is and how its errors look.

A tool is a small typed record (`ToolMeta`) plus async methods. The runtime passes each call a
`CallContext` (who is calling at which level, where, and the typed ports of `bot.core.ports`);
tools keep no per-call state on themselves. Tools raise the typed exceptions below; the runtime
turns them into `ToolError`s through `bot.toolbox.failures.to_tool_error`, so the model never
sees a stack trace.
A tool whose safety depends on the machine (a sandbox, say) may also define
`environment_report() -> (summary, [Finding])`, which `myclaw doctor --security` shows.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, Protocol, runtime_checkable

from bot.core.identity import OPERATOR, Level, Sender
from bot.core.ports import JobsPort, MemoryPort, ModelPort, Network, QuotaPort

Severity = Literal["high", "medium", "low"]


@dataclass(frozen=True)
class Finding:
    """One security finding about the configuration or the machine."""

    severity: Severity
    key: str          # the setting, as it is spelled in the config file ("senders.unknown")
    problem: str
    fix: str


class Risk(StrEnum):
    """The risk of one call, ordered: low < medium < high (equal to its text, as in config)."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"

    @property
    def rank(self) -> int:
        return RISKS.index(self.value)

    def __lt__(self, other: object) -> bool:
        return self.rank < Risk(other).rank if isinstance(other, str) else NotImplemented

    def __le__(self, other: object) -> bool:
        return self.rank <= Risk(other).rank if isinstance(other, str) else NotImplemented

    def __gt__(self, other: object) -> bool:
        return self.rank > Risk(other).rank if isinstance(other, str) else NotImplemented

    def __ge__(self, other: object) -> bool:
        return self.rank >= Risk(other).rank if isinstance(other, str) else NotImplemented

    @classmethod
    def of(cls, value: object) -> Risk:
        """A risk from config or a tool's answer; anything unknown counts as high."""
        return cls(value) if value in RISKS else cls.HIGH


RISKS: tuple[str, ...] = ("low", "medium", "high")
NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
NO_PREVIEW = "(preview not available for this tool)"

ErrorKind = Literal[
    "invalid_args",
    "not_found",
    "permission_denied",
    "network_error",
    "external_error",
    "quota_exceeded",
    "unsupported",
    "unknown",
]
ERROR_KINDS: tuple[str, ...] = ErrorKind.__args__  # type: ignore[attr-defined]


@dataclass(frozen=True)
class ToolMeta:
    """What a tool is. `risk` is the least risk any of its calls has, settled here once: a
    tool with side effects and no dry_run cannot be previewed, so its risk is high whatever it
    declares (an unknown value is high too). Everything downstream trusts `risk`."""

    name: str
    description: str
    schema: dict[str, Any]
    has_side_effects: bool = True
    risk: Risk = "high"
    returns_untrusted: bool = True
    idempotent: bool = False
    supports_dry_run: bool = False
    capability_required: str = ""
    cli_only: bool = False
    # The call can put data in front of anyone other than the requester, now or later (the
    # network, a file sent to the chat, a reminder posted later, an MCP server): after the
    # turn has read untrusted content the policy never lets such a call run unasked. None:
    # not declared — every built-in declares it (the conformance suite holds it), a custom tool
    # that does not say is taken as a way out, and a tool whose answer depends on its arguments
    # declares False and says when in `egress_for(args)`.
    egress: bool | None = None
    # The call puts the requester's private files or memory in front of the other people of a
    # shared conversation: asked every time (of the requester, whose data it is), never covered
    # by auto_approve or an "Always", refused at read_only. Its preview is shown in that
    # conversation, so it names what (a file's name, how many memories) and with whom, never the
    # private content itself (tests/runtime/test_audience.py holds every such tool to it).
    discloses: bool = False

    def __post_init__(self) -> None:
        unpreviewable = self.has_side_effects and not self.supports_dry_run
        risk = Risk.HIGH if unpreviewable else Risk.of(self.risk)
        object.__setattr__(self, "risk", risk)  # frozen: settled before anyone reads it


PORT_NAMES = {"memory": "Long-term memory", "model": "The stronger model",
              "quota": "The daily quota", "jobs": "Scheduling"}


class Unavailable:
    """A port this process has not wired: every method raises PortUnavailableError."""

    def __init__(self, port: str):
        self._port = port

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        if name.startswith("__"):
            raise AttributeError(name)

        async def refuse(*_: Any, **__: Any) -> Any:
            raise PortUnavailableError(self._port)
        return refuse


@dataclass(frozen=True)
class Ports:
    """The typed ports of one process, the same for every call (see `bot.core.ports`)."""

    memory: MemoryPort = field(default_factory=lambda: Unavailable("memory"))
    model: ModelPort = field(default_factory=lambda: Unavailable("model"))
    quota: QuotaPort = field(default_factory=lambda: Unavailable("quota"))
    jobs: JobsPort = field(default_factory=lambda: Unavailable("jobs"))


NO_SETTINGS: Mapping[str, Any] = MappingProxyType({})


@dataclass
class CallContext:
    """Everything one tool call may need besides its args. Built fresh for every call.

    `sender` and `level` are the turn's (roles applied); `settings` is the configuration,
    read-only; `ports` reach the store, the metered model and the jobs. `progress` reports
    partial progress; `cancelled` is set by /stop.
    """

    sender: Sender = OPERATOR
    level: Level = Level.FULL
    session_id: str = "local"
    chat: str = "local"
    workspace: Path = field(default_factory=Path.cwd)
    settings: Mapping[str, Any] = field(default_factory=lambda: NO_SETTINGS)
    network: Network = field(default_factory=Network)
    ports: Ports = field(default_factory=Ports)
    progress_sink: Callable[[str], Awaitable[None] | None] | None = None
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    # The turn's sink: a tool hands the channel a `bot.core.events` event (e.g. FileOut) through
    # `emit`, never calling a platform itself. None where no conversation is attached.
    event_sink: Callable[[Any], Awaitable[None]] | None = None
    # Who approved this very call, when a person did (None: it runs unasked, under an "Always"
    # grant or the profile's auto_approve). What only an approval naming it may reach (a
    # secret file) is refused, or masked, without one.
    approved_by: str | None = None
    # Who else reads this conversation ("" = the sender alone; e.g. "everyone in the telegram
    # group chat -100…"): what the call shows may end up in front of all of them. There, with
    # per_sender workspaces, `workspace` and the memory are the conversation's own and
    # `private_workspace` is the sender's folder (bot.access.audience).
    audience: str = ""
    memory_owner: Sender | None = None
    private_workspace: Path | None = None

    @property
    def channel(self) -> str:
        return self.sender.channel

    @property
    def memory_scope(self) -> Sender:
        """Whose memory this call reads and writes: the sender's, or the conversation's."""
        return self.memory_owner or self.sender

    async def emit(self, event: Any) -> bool:
        """Give the channel an event; False when there is no conversation to show it in."""
        if self.event_sink is None:
            return False
        await self.event_sink(event)
        return True

    async def progress(self, text: str) -> None:
        """Report partial progress ("Scanning 120 files…"); channels show it throttled. A
        `bot.language` Phrase is shown in each reader's language; plain text (a custom tool's,
        an MCP server's) is shown as it is written."""
        if self.progress_sink is None:
            return
        outcome = self.progress_sink(text)
        if outcome is not None:
            await outcome


@runtime_checkable
class Tool(Protocol):
    meta: ToolMeta

    async def execute(self, ctx: CallContext, **args: Any) -> dict[str, Any]: ...

    async def dry_run(self, ctx: CallContext, **args: Any) -> dict[str, Any]: ...

    # Optional, looked up with getattr:
    #   async def revert(self, ctx, args: dict, result: dict) -> dict   (raises UnrevertibleError)
    #   def risk_for(self, args: dict) -> Risk
    #       or risk_for(self, args, workspace: Path | None = None): also given the folder the
    #       call will run in, when the caller knows it (what a path there is: a link to a
    #       secret file); approval_scope(args[, workspace]) likewise (bot.approvals.grants)
    #   async def on_session(self, event: str, ctx: CallContext) -> None
    #       event in {"start", "new_session", "shutdown"}


def model_view(result: Any) -> Any:
    """What the model sees of a result: everything but the keys kept for `revert`.

    A tool may put what its revert needs (previous file content, ids) under `undo` or under
    keys starting with `_`; the runtime stores the whole result in the undo log and the receipt
    but leaves those keys out of the prompt (they can be large, and the model has no use for
    them).
    """
    if isinstance(result, dict) and any(k == "undo" or k.startswith("_") for k in result):
        return {k: v for k, v in result.items() if k != "undo" and not k.startswith("_")}
    return result


class BaseTool:
    """Convenience base: side-effect-free tools without egress get `dry_run = execute` for free."""

    meta: ToolMeta

    async def execute(self, ctx: CallContext, **args: Any) -> dict[str, Any]:
        raise NotImplementedError

    async def dry_run(self, ctx: CallContext, **args: Any) -> dict[str, Any]:
        # An egress call is previewed to be asked about: running it to preview it would send
        # the very data the approval is meant to stop. Its preview is its arguments, whole.
        if not self.meta.has_side_effects and not self.meta.egress:
            return await self.execute(ctx, **args)
        return {"summary": NO_PREVIEW}


def risk_of(tool: Tool, args: dict[str, Any], workspace: Path | None = None) -> Risk:
    """The risk of one invocation: `meta.risk` (the tool's floor, see ToolMeta), raised by
    `risk_for(args)` when the tool has it (an answer that is not a risk counts as high).
    `workspace`: the folder the call will run in, for a hook that takes it."""
    risk = Risk.of(tool.meta.risk)
    risk_for = getattr(tool, "risk_for", None)
    if callable(risk_for):
        risk = max(risk, Risk.of(call_hook(risk_for, args, workspace)))
    return risk


def call_hook(hook: Callable[..., Any], args: dict[str, Any], workspace: Path | None) -> Any:
    """A tool's `risk_for` or `approval_scope`, given the call's folder when it takes one."""
    code = getattr(hook, "__code__", None)   # a method's is its function's
    if workspace is not None and code is not None and _takes_workspace(code):
        return hook(args, workspace=workspace)
    return hook(args)


@functools.lru_cache(maxsize=1024)
def _takes_workspace(code: Any) -> bool:
    return "workspace" in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]


def args_hash(args: Any) -> str:
    """sha256 hex of the canonical JSON of a call's args: the same args always give the same
    hash (approvals, receipts, audit rows); a value JSON cannot encode counts by its str."""
    canonical = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                           default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def egress_of(tool: Tool, args: dict[str, Any]) -> bool:
    """Can this call carry data out? `meta.egress`, or the tool's `egress_for(args)` (a tool
    that reaches the network only for some arguments, like a shell command with network)."""
    if tool.meta.egress:
        return True
    egress_for = getattr(tool, "egress_for", None)
    return callable(egress_for) and egress_for(args) is True


# --- errors ------------------------------------------------------------------------------


@dataclass
class ToolError:
    """A structured error the model can act on. `llm_hint` is a menu of next steps."""

    kind: ErrorKind
    message: str
    llm_hint: str = ""
    details: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if data["details"] is None:
            del data["details"]
        return data


class ToolException(Exception):
    """Base of the exceptions a tool raises; each maps to one ToolError kind."""

    kind: ErrorKind = "unknown"
    default_hint = ""

    def __init__(self, message: str, llm_hint: str = "", details: dict[str, Any] | None = None):
        super().__init__(message)
        self.message = message
        self.llm_hint = llm_hint or self.default_hint
        self.details = details

    def to_error(self) -> ToolError:
        return ToolError(self.kind, self.message, self.llm_hint, self.details)


class ToolInvalidArgsError(ToolException):
    kind = "invalid_args"
    default_hint = "Fix the arguments so they match the tool's input schema, then call it again."


class ToolNotFoundError(ToolException):
    kind = "not_found"
    default_hint = "Check the name or path; list what exists first, or ask the user to confirm it."


class ToolPermissionError(ToolException):
    kind = "permission_denied"
    default_hint = "This is not allowed here. Try a different approach or ask the user."


class ToolNetworkError(ToolException):
    kind = "network_error"
    default_hint = "The network failed. Retry once later, or tell the user the service is down."


class ToolExternalError(ToolException):
    kind = "external_error"
    default_hint = "The remote service refused the request; read its message and adjust."


class ToolQuotaError(ToolException):
    kind = "quota_exceeded"
    default_hint = "The quota is used up. Answer without this tool or ask the user to wait."


class ToolUnsupportedError(ToolException):
    kind = "unsupported"
    default_hint = "This combination of arguments is not supported; try a simpler request."


class PortUnavailableError(ToolUnsupportedError):
    """A port of `PORT_NAMES` this process has not wired; the person's words for it are the
    toolbox's (bot.toolbox.failures), the contract keeps only the model's English."""

    default_hint = "Do without it and tell the user why."

    def __init__(self, port: str):
        super().__init__(f"{PORT_NAMES[port]} is not available here.")
        self.port = port


class UnrevertibleError(ToolException):
    kind = "unsupported"
    default_hint = "This action cannot be undone automatically."


class ToolUnavailable(Exception):
    """Raised by `build()` when a tool's prerequisites are missing; the reason is shown."""
