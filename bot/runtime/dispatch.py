"""Tool dispatch: one `tool_use` block in, one `tool_result` block (or a pending approval) out.

validate → policy → (approval) → execute or refuse → wrap → result. Dispatch is a dictionary
lookup in the registry; adding a tool never changes this module. Every decision is audited: the
rows of a call (audit entries, the executed call's receipt and undo entry) are values left on the
turn, which bot.conversation.journal writes with the step's history in one transaction.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field, replace
from typing import Any

from bot.approvals.grants import Grant, Scope, covering, scope_of
from bot.conversation import history
from bot.conversation.journal import ExecutedCall, Record
from bot.core.events import (
    Sink,
    ToolFinished,
    ToolProgress,
    ToolStarted,
    valid_data,
    valid_text,
)
from bot.core.identity import Sender
from bot.core.logs import Redactor
from bot.core.policy import Caller, Decision, decide
from bot.core.secrets.files import SecretFiles
from bot.core.secrets.redaction import SecretRedaction
from bot.core.tool import (
    CallContext,
    Tool,
    ToolError,
    ToolInvalidArgsError,
    args_hash,
    egress_of,
    model_view,
    risk_of,
)
from bot.core.wrap import source_of, wrap_untrusted
from bot.language.phrase import Number, Phrase
from bot.runtime.previews import (  # noqa: F401 (visible_json: imported from here too)
    MAX_PREVIEW_CHARS,
    from_dry_run,
    visible_json,
    without_preview,
)
from bot.runtime.services import Services
from bot.store.audit import AuditEntry
from bot.toolbox.failures import to_tool_error

log = logging.getLogger(__name__)

MAX_RESULT_CHARS = 200_000




@dataclass
class Turn:
    """Per-turn state, created fresh for each turn; never stored on shared objects."""

    session_id: str
    sender: str
    chat: str
    autonomy: str   # a Level, or any text (refused by the policy)
    sink: Sink
    grants: tuple[Grant, ...] = ()    # what "Always" taps in this session allow
    run_allowlist: frozenset[str] | None = None
    model: str = ""   # a scheduled run's own model ("" = the configured choice)
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    records: list[Record] = field(default_factory=list)  # written with the step's history
    log_calls: list[str] = field(default_factory=list)
    # Untrusted content (a result of a `returns_untrusted` tool, a document, someone else's
    # words) has entered this turn: from now on the policy treats every call that can carry
    # data out as at least medium risk.
    tainted: bool = False
    # The session is shared by everyone in the chat: each person's words are marked with who
    # wrote them, and other people's are shown to the model as data (bot.conversation.members).
    shared: bool = False
    turn_id: str | None = None   # the turn's row in the store (bot.conversation.turns), when it has one
    # Whether the history may hold an attachment reference, which each model call then expands
    # (False only when known: a cached history without one and a message without media).
    attachments: bool = True
    told: set[str] = field(default_factory=set)   # notices about the model said this turn
    # Who else reads this conversation ("" = the sender alone; bot.access.audience): the reply
    # and anything a call shows reach all of them.
    audience: str = ""

    def take_records(self) -> list[Record]:
        """The rows left by the calls so far; the turn keeps none of them."""
        taken, self.records = self.records, []
        return taken

    @property
    def channel(self) -> str:
        return Sender.parse(self.sender).channel

    @property
    def caller(self) -> Caller:
        return Caller(self.sender, self.autonomy, self.run_allowlist)


@dataclass
class Planned:
    """What dispatch decided for one block before anything ran."""

    block: dict[str, Any]
    tool: Tool | None = None
    decision: Decision | None = None
    risk: str = "high"
    result: dict[str, Any] | None = None   # set when refused before execution
    scope: Scope | None = None             # what an "Always" for this call would cover
    grant: Grant | None = None             # the grant that lets it run unasked, if any


class StepCancelled(asyncio.CancelledError):
    """The step was cancelled while its calls ran; `results` has a block for every call (the
    ones that finished, "(cancelled)" for the rest), so the history stays valid."""

    def __init__(self, results: dict[str, dict[str, Any]]):
        super().__init__("step cancelled")
        self.results = results


def tainted_since_user(messages: list[dict[str, Any]]) -> bool:
    """Did untrusted content enter the current turn: did the user message that started it
    carry a document or someone else's words (a forwarded voice note's transcript), or is there
    a wrapped tool result after it? (A turn resumed after an approval starts from the stored
    history.)"""
    for message in reversed(messages):
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            continue
        results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
        if not results:  # the user's message: the turn started here
            return any(_carries_untrusted(b) for b in content)
        if any("<untrusted-" in json.dumps(b.get("content"), ensure_ascii=False) for b in results):
            return True
    return False


def _carries_untrusted(block: Any) -> bool:
    """A document's reference (bot.media.attachments: its text or pages are someone else's),
    or text holding wrapped data (a transcript of someone else's voice)."""
    if not isinstance(block, dict):
        return False
    if block.get("type") == "attachment":
        return block.get("untrusted") is True
    return block.get("type") == "text" and "<untrusted-" in str(block.get("text", ""))


def error_block(tool_use_id: str, error: ToolError, tool: Tool | None = None,
                args: Any = None) -> dict[str, Any]:
    """The error as the model reads it. The message of a tool that can carry outside content
    (a remote server's error text, a file name, a quoted page) goes inside the untrusted
    wrapper; the kind and the hint are ours and stay outside, so the model still knows what
    failed and what to do next."""
    if tool is not None and tool.meta.returns_untrusted:
        source = source_of(tool.meta.name, args if isinstance(args, dict) else {})
        text = (f"{error.kind}: {tool.meta.name} failed; its message follows as data.\n"
                f"{wrap_untrusted({'message': error.message}, source)}")
    else:
        text = f"{error.kind}: {error.message}"
    if error.llm_hint:
        text += f"\nHint: {error.llm_hint}"
    return {"type": "tool_result", "tool_use_id": tool_use_id, "is_error": True,
            "content": valid_text(text)}


AUDIT_CALL_CHARS = 300   # what ran, as shown in `myclaw audit` (the receipt has the exact args)


class Dispatcher:
    def __init__(self, services: Services):
        self.services = services
        self._redactor = Redactor(services.config.secret_values())
        # What leaves a call (result, error, preview) is scrubbed of secret values first.
        self._secrets = SecretRedaction(services.config.secret_values(),
                                        SecretFiles.from_config(services.config))
        self._root = services.config.workspace

    def what_ran(self, name: str, args: Any, summary: str | None = None) -> str:
        """One line for the audit: the approved preview, else the call itself; secrets redacted
        as in the logs."""
        text = summary or f"{name} {json.dumps(args, ensure_ascii=False, default=str)}"
        line = " ".join(self._redactor.text(text).split())
        return line if len(line) <= AUDIT_CALL_CHARS else line[:AUDIT_CALL_CHARS - 1] + "…"

    # --- planning ------------------------------------------------------------------------

    def plan(self, turn: Turn, block: dict[str, Any]) -> Planned:
        registry = self.services.registry
        name, args, call_id = block.get("name", ""), block.get("input"), block.get("id", "")
        tool = registry.get(name)
        if tool is None:
            visible = [t.meta.name for t in
                       registry.list_for_sender(turn.sender, turn.autonomy, turn.run_allowlist)]
            import difflib  # only for a name the model got wrong

            close = difflib.get_close_matches(name, visible, n=3, cutoff=0.5)
            hint = (f"Did you mean {', '.join(close)}? " if close else "") + \
                f"Available tools: {', '.join(visible) or '(none)'}."
            return self._refused(turn, block, ToolError("not_found", f"Unknown tool {name!r}.", hint))
        invalid = registry.validate(name, args)
        if invalid is not None:
            return self._refused(turn, block, invalid, tool)
        # What a path names depends on the folder the call runs in (a link to a secret file).
        where = self.services.call_workspace(turn.sender, turn.chat, turn.audience)
        risk = risk_of(tool, args, where)
        scope = scope_of(tool, args, where)
        grant = covering(turn.grants, name, scope.key, risk, self.services.approvals.grants.clock())
        # A grant counts like the profile's auto_approve, for this one call only: the pure
        # policy still decides (deny stays deny, always_ask still asks).
        caller = Caller(turn.sender, turn.autonomy, turn.run_allowlist,
                        frozenset({name}) if grant is not None else frozenset())
        meta = tool.meta if not egress_of(tool, args) else replace(tool.meta, egress=True)
        decision = decide(meta, risk, caller, registry.profile, tainted=turn.tainted)
        if decision.verdict != "allow":
            grant = None
        turn.log_calls.append(f"{name}:{decision.verdict}")
        if decision.verdict == "deny":
            error = ToolError("permission_denied", f"{name} was refused: {decision.reason}.",
                              "Do not retry this call. Tell the user it is not allowed for them, "
                              "or reach the goal with another available tool.")
            self._audit(turn, name, args, "deny", "blocked", decision.reason, call_id)
            return Planned(block, tool, decision, risk, error_block(call_id, error))
        return Planned(block, tool, decision, risk, scope=scope, grant=grant)

    def _refused(self, turn: Turn, block: dict[str, Any], error: ToolError,
                 tool: Tool | None = None) -> Planned:
        name = block.get("name", "")
        turn.log_calls.append(f"{name}:{error.kind}")
        self._audit(turn, name, block.get("input"), "refused", error.kind, error.message,
                    block.get("id"))
        return Planned(block, tool, None, "high", error_block(block.get("id", ""), error))

    def _audit(self, turn: Turn, tool: str, args: Any, decision: str, outcome: str,
               detail: str = "", call_id: str | None = None,
               approval_id: str | None = None) -> None:
        turn.records.append(self._entry(turn, tool, args, decision, outcome, detail, call_id,
                                        approval_id))

    @staticmethod
    def _entry(turn: Turn, tool: str, args: Any, decision: str, outcome: str, detail: str,
               call_id: str | None, approval_id: str | None) -> AuditEntry:
        return AuditEntry(
            sender=turn.sender, session_id=turn.session_id, tool=tool, args_hash=args_hash(args),
            decision=decision, outcome=outcome, detail=detail[:500], ts=time.time(),
            turn_id=turn.turn_id, call_id=call_id, approval_id=approval_id)

    def started(self, turn: Turn, tool: Tool, args: dict[str, Any], call_id: str, *,
                approver: str | None = None, approval_id: str | None = None,
                grant: Grant | None = None, summary: str | None = None) -> AuditEntry:
        """The write-ahead row of a call about to run: stored before it runs, so a process that
        dies meanwhile leaves a call known to be in doubt, never one that seems not to have run."""
        return self._entry(turn, tool.meta.name, args, "allow" if approver is None else "approved",
                           "started", self._ran_detail(tool.meta.name, args, approver, grant,
                                                       summary), call_id, approval_id)

    # --- running -------------------------------------------------------------------------

    def context(self, turn: Turn, call_id: str, tool_name: str,
                approver: str | None = None) -> CallContext:
        async def progress(text: str) -> None:
            await turn.sink.emit(ToolProgress(call_id, tool_name, text))
        return self.services.call_context(
            sender=turn.sender, level=turn.autonomy, session_id=turn.session_id, chat=turn.chat,
            progress_sink=progress, cancelled=turn.cancelled,
            event_sink=turn.sink.emit if turn.sink is not None else None, approved_by=approver,
            audience=turn.audience)

    async def preview(self, turn: Turn, tool: Tool, args: dict[str, Any], call_id: str) -> str:
        """The approval text, whole: the dry_run summary (and diff), or — for a tool without a
        preview of its own — every argument of the call (bot.runtime.previews). Never cut: one
        too long to read is refused instead (raises ToolInvalidArgsError)."""
        summary = ""
        ctx = self.context(turn, call_id, tool.meta.name)
        if tool.meta.supports_dry_run:
            summary = from_dry_run(tool, await tool.dry_run(ctx, **args))
        if not summary:
            summary = without_preview(tool, args)
        scrubbed = await self._secrets.scrub((self._root, ctx.workspace), str(summary))
        if scrubbed != summary:   # a secret was in it: the scrubbed text, and only the text
            summary = scrubbed
        if turn.tainted and egress_of(tool, args):
            summary = Phrase("{summary}\nAsked because this turn has read untrusted content: it "
                             "may be steering this call.", summary=summary)
        if len(summary) > MAX_PREVIEW_CHARS:
            # One this long could not be read on a phone anyway.
            raise ToolInvalidArgsError(
                Phrase("This {tool} call is too large to show for approval ({size} characters; "
                       "the limit is {limit}). It was not run.", tool=tool.meta.name,
                       size=Number(len(summary)), limit=Number(MAX_PREVIEW_CHARS)),
                "Split the work into smaller calls the user can read before approving.")
        return summary

    async def execute(self, turn: Turn, tool: Tool, args: dict[str, Any], call_id: str,
                      approver: str | None = None, grant: Grant | None = None,
                      summary: str | None = None,
                      approval_id: str | None = None) -> dict[str, Any]:
        name = tool.meta.name
        # Set before running: a result or an error of such a tool may carry outside content,
        # and a call cancelled midway may already have shown some to the model's next step.
        turn.tainted = turn.tainted or tool.meta.returns_untrusted
        await turn.sink.emit(ToolStarted(call_id, name, args))
        started = time.time()
        ctx = self.context(turn, call_id, name, approver)
        try:
            result = await tool.execute(ctx, **args)
        except asyncio.CancelledError:
            self._audit(turn, name, args, "allow", "cancelled", "", call_id, approval_id)
            await turn.sink.emit(ToolFinished(call_id, name, False, Phrase("cancelled")))
            raise
        except Exception as exc:  # translated for the model; to_tool_error logs unexpected ones
            error = await self._secrets.scrub_error((self._root, ctx.workspace),
                                                    to_tool_error(exc, name))
            self._audit(turn, name, args, "allow", "failed", f"{error.kind}: {error.message}",
                        call_id, approval_id)
            await turn.sink.emit(ToolFinished(call_id, name, False, error.message))
            return error_block(call_id, error, tool, args)
        # Any bytes a tool (or an MCP server) hands back become valid text before they are
        # hashed for the receipt, stored, or shown to the model.
        result = valid_data(await self._secrets.scrub((self._root, ctx.workspace), result))
        self._record_success(turn, tool, args, result, approver, started,
                             self._ran_detail(name, args, approver, grant, summary),
                             call_id, approval_id)
        await turn.sink.emit(ToolFinished(call_id, name, True))
        return self.result_block(tool, args, result, call_id)

    def _ran_detail(self, name: str, args: Any, approver: str | None, grant: Grant | None,
                    summary: str | None) -> str:
        detail = self.what_ran(name, args, summary)
        if approver:
            detail += f" | approved by {approver}"
        if grant is not None:
            detail += f" | under grant {grant.id} ({grant.scope_label})"
        return detail

    def _record_success(self, turn: Turn, tool: Tool, args: dict[str, Any], result: Any,
                        approver: str | None, started: float, detail: str, call_id: str,
                        approval_id: str | None) -> None:
        self._audit(turn, tool.meta.name, args, "allow" if approver is None else "approved",
                    "executed", detail, call_id, approval_id)
        turn.records.append(ExecutedCall(
            session_id=turn.session_id, sender=turn.sender, tool=tool.meta.name, args=args,
            result=result, approver=approver, started_at=started, finished_at=time.time(),
            revertible=callable(getattr(tool, "revert", None))))

    def result_block(self, tool: Tool, args: dict[str, Any], result: Any,
                     call_id: str) -> dict[str, Any]:
        shown = model_view(result)
        content = json.dumps(shown, ensure_ascii=False, default=str)
        if len(content) > MAX_RESULT_CHARS:
            # Cut the data, never the wrapper around it: an untrusted result keeps its closing
            # tag and notice however large it was.
            shown = {"truncated_by_myclaw": True, "partial_json": content[:MAX_RESULT_CHARS]}
            content = json.dumps(shown, ensure_ascii=False)
        if tool.meta.returns_untrusted:
            content = wrap_untrusted(shown, source_of(tool.meta.name, args))
        return {"type": "tool_result", "tool_use_id": call_id, "content": content}

    async def run_planned(self, turn: Turn, planned: Planned) -> dict[str, Any]:
        if planned.result is not None:
            return planned.result
        assert planned.tool is not None
        return await self.execute(turn, planned.tool, planned.block["input"], planned.block["id"],
                                  grant=planned.grant)

    async def run_allowed(self, turn: Turn, plans: list[Planned]) -> dict[str, dict[str, Any]]:
        """Run the allowed/refused calls; read-only ones together, others one by one in order.

        On cancellation, every call without a result gets "(cancelled)" so history stays valid;
        they are raised as `StepCancelled.results`.
        """
        results: dict[str, dict[str, Any]] = {}
        try:
            concurrent = all(p.result is not None or not p.tool.meta.has_side_effects
                             for p in plans if p.tool is not None)
            if concurrent and len(plans) > 1:
                blocks = await asyncio.gather(*(self.run_planned(turn, p) for p in plans))
                results.update({p.block["id"]: b for p, b in zip(plans, blocks, strict=True)})
            else:
                for plan in plans:
                    results[plan.block["id"]] = await self.run_planned(turn, plan)
        except asyncio.CancelledError as exc:
            for plan in plans:
                results.setdefault(plan.block["id"],
                                   history.error_result(plan.block["id"], history.CANCELLED))
            raise StepCancelled(results) from exc
        return results
