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
)
from bot.language.phrase import Phrase, plural_phrase

TOOL = "supra_llm"
SYSTEM_PROMPT = (
    "You are consulted by another AI assistant that needs a careful second opinion. Answer the "
    "question directly and precisely; show the key reasoning briefly; say plainly when you are "
    "unsure or when the question cannot be answered from what is given."
)
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
        # local: the operator's own model provider, which reads the conversation anyway
        egress=False,
    )

    async def execute(self, ctx: CallContext, question: str, context: str = "",
                      **_: Any) -> dict[str, Any]:
        agent = ctx.settings["agent"]
        model = agent["supra_model"]
        quota = int(ctx.settings["tools"]["supra_llm"]["daily_quota"])
        day = datetime.now(UTC).date().isoformat()
        used = await _reserve(ctx, day, quota)
        await ctx.progress(Phrase("Asking {model}…", model=model))
        try:
            answer = await ctx.ports.model.ask(
                sender=ctx.sender, level=ctx.level, session_id=ctx.session_id, model=model,
                prompt=_prompt(question, context), system=SYSTEM_PROMPT,
                max_tokens=agent["max_tokens"])
        except LLMError as exc:
            await ctx.ports.quota.refund(ctx.sender, TOOL, day)
            raise _translate(exc, model) from exc
        if not answer.text.strip():
            raise ToolExternalError(Phrase("{model} returned an empty answer.", model=model),
                                    "Rephrase the question more concretely, or answer yourself.")
        return {"answer": answer.text, "model": model,
                "quota": {"used_today": used, "daily_limit": quota}}


async def _reserve(ctx: CallContext, day: str, quota: int) -> int:
    used = await ctx.ports.quota.reserve(ctx.sender, TOOL, day, quota)
    if used is None:
        raise ToolQuotaError(
            plural_phrase("The daily supra_llm quota ({n} call) is used up for today (UTC).",
                          "The daily supra_llm quota ({n} calls) is used up for today (UTC).", quota),
            "Answer with your own reasoning, say that the stronger model is unavailable until "
            "tomorrow (UTC), or ask the user whether the question can wait.",
            {"daily_limit": quota, "day": day},
        )
    return used


def _prompt(question: str, context: str) -> str:
    if not context.strip():
        return question
    return f"<context>\n{context}\n</context>\n\n{question}"


def _translate(exc: LLMError, model: str) -> Exception:
    if exc.retryable:
        return ToolNetworkError(
            Phrase("{model} could not answer: {why}", model=model, why=exc.user_message),
            "Retry once later, or answer with your own reasoning now. The quota was not used.",
        )
    return ToolExternalError(
        Phrase("{model} refused the request: {why}", model=model, why=exc.user_message),
        "Do not retry the same call; answer with your own reasoning and tell the user the "
        "stronger model is unavailable. The quota was not used.",
    )


def build() -> SupraLLM:
    return SupraLLM()
