"""One question to a model for a tool (supra_llm): the model port of `bot.core.ports`.

Metered like every model call: the caller's budget (sender, level) is admitted before the call
by the client, and the cost is recorded in `usage` right after it, before the next check.
"""

from __future__ import annotations

from bot.core.identity import Level, Sender
from bot.core.ports import ModelAnswer
from bot.llm.client import LLMClient
from bot.money.spend import SpendLedger


class MeteredModel:
    def __init__(self, llm: LLMClient, spend: SpendLedger):
        self.llm = llm
        self.spend = spend

    async def ask(self, *, sender: Sender, level: Level, session_id: str, model: str,
                  prompt: str, system: str, max_tokens: int) -> ModelAnswer:
        answer = await self.llm.ask(sender=str(sender), level=level, model=model, prompt=prompt,
                                    system=system, max_tokens=max_tokens)
        await self.spend.record(session_id=session_id, sender=str(sender),
                                model=answer.model or model,   # an alias: the id that answered
                                usage=answer.usage)
        return ModelAnswer(answer.text, answer.model or model, answer.usage)
