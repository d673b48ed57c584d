"""supra_llm: ask the stronger configured model one question, within a per-sender daily quota.

Side-effect free by contract (so dry_run is execute), which is why its risk is low: a preview
that asked for approval would itself spend a call. Money is guarded by the quota instead: one
slot is reserved atomically *before* the call (so concurrent calls cannot overshoot) and handed
back if the model fails, so the user is never charged for an error.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bot.core.errors import LLMError
from bot.core.tool import (
    BaseTool,
    CallContext,
    ToolExternalError,
    ToolMeta,
    ToolNetworkError,
    ToolQuotaError,
    ToolUnsupportedError,
)
from bot.money.prices import PriceTable
from bot.money.spend import SpendLedger

TOOL = "supra_llm"
SYSTEM_PROMPT = (
    "You are consulted by another AI assistant that needs a careful second opinion. Answer the "
    "question directly and precisely; show the key reasoning briefly; say plainly when you are "
    "unsure or when the question cannot be answered from what is given."
)
# Reserve one slot unless today's count already reached the quota; RETURNING yields no row then.
_RESERVE_SQL = """
INSERT INTO tool_quota(sender, tool, day, count) VALUES (?, ?, ?, 1)
ON CONFLICT(sender, tool, day) DO UPDATE SET count = count + 1 WHERE count < ?
RETURNING count
"""
_REFUND_SQL = ("UPDATE tool_quota SET count = count - 1"
               " WHERE sender = ? AND tool = ? AND day = ? AND count > 0")


class SupraLLM(BaseTool):
    meta = ToolMeta(
        name=TOOL,
        description=(
            "Ask a stronger, slower and more expensive model one hard question (deep reasoning, "
            "tricky maths or code, a second opinion). Put everything it needs in `question` and "
            "optional `context`: it does not see this conversation. Limited calls per day."
        ),
        schema={
            "type": "object",
            "properties": {
                "question": {"type": "string", "minLength": 1, "maxLength": 20_000,
                             "description": "The question, self-contained"},
                "context": {"type": "string", "maxLength": 100_000,
                            "description": "Background material the question refers to"},
            },
            "required": ["question"],
            "additionalProperties": False,
        },
        has_side_effects=False,
        risk="low",
        returns_untrusted=True,  # another model's answer may repeat the context it was given
        idempotent=False,
        supports_dry_run=True,
        capability_required="llm:supra",
    )

    async def execute(self, ctx: CallContext, question: str, context: str = "",
                      **_: Any) -> dict[str, Any]:
        llm = getattr(ctx.services, "llm", None)
        if llm is None:
            raise ToolUnsupportedError("supra_llm is not configured (no model client).",
                                       "Answer with your own reasoning instead.")
        config = ctx.services.config
        model = config["agent"]["supra_model"]
        quota = int(config["tools"]["supra_llm"]["daily_quota"])
        day = datetime.now(UTC).date().isoformat()
        used = await _reserve(ctx, day, quota)
        await ctx.progress(f"Asking {model}…")
        try:
            answer = await llm.ask(sender=ctx.sender, model=model,
                                   prompt=_prompt(question, context),
                                   system=SYSTEM_PROMPT, max_tokens=config["agent"]["max_tokens"])
        except LLMError as exc:
            async with ctx.services.store.transaction() as tx:
                await tx.execute(_REFUND_SQL, (ctx.sender, TOOL, day))
            raise _translate(exc, model) from exc
        await _record_usage(ctx, model, answer.usage)
        if not answer.text.strip():
            raise ToolExternalError(f"{model} returned an empty answer.",
                                    "Rephrase the question more concretely, or answer yourself.")
        return {"answer": answer.text, "model": model,
                "quota": {"used_today": used, "daily_limit": quota}}


async def _reserve(ctx: CallContext, day: str, quota: int) -> int:
    store = ctx.services.store
    row = None
    if quota > 0:
        async with store.transaction() as tx:
            row = await tx.fetchone(_RESERVE_SQL, (ctx.sender, TOOL, day, quota))
    if row is None:
        raise ToolQuotaError(
            f"The daily supra_llm quota ({quota} calls) is used up for today (UTC).",
            "Answer with your own reasoning, say that the stronger model is unavailable until "
            "tomorrow (UTC), or ask the user whether the question can wait.",
            {"daily_limit": quota, "day": day},
        )
    return int(row[0])


async def _record_usage(ctx: CallContext, model: str, usage: dict[str, int]) -> None:
    """The supra call costs money like any model call: account for it in the usage table (and
    the running totals budgets are checked against)."""
    services = ctx.services
    ledger = services.spend or SpendLedger(services.store, PriceTable.from_config(services.config))
    await ledger.record(session_id=ctx.session_id, sender=ctx.sender, model=model, usage=usage)


def _prompt(question: str, context: str) -> str:
    if not context.strip():
        return question
    return f"<context>\n{context}\n</context>\n\n{question}"


def _translate(exc: LLMError, model: str) -> Exception:
    if exc.retryable:
        return ToolNetworkError(
            f"{model} could not answer: {exc.user_message}",
            "Retry once later, or answer with your own reasoning now. The quota was not used.",
        )
    return ToolExternalError(
        f"{model} refused the request: {exc.user_message}",
        "Do not retry the same call; answer with your own reasoning and tell the user the "
        "stronger model is unavailable. The quota was not used.",
    )


def build() -> SupraLLM:
    return SupraLLM()
