"""One question to a model for a tool (supra_llm): the model port of `bot.core.ports`.

Metered like every paid call: the client's `ask` goes through the one gate
(bot.money.gate), which admits the caller's budget (sender, level) before the call and records
the cost in `usage` right after it, before the next check.
"""

from __future__ import annotations

from bot.core.identity import Level, Sender
from bot.core.ports import ModelAnswer
from bot.llm.client import LLMClient


class MeteredModel:
    def __init__(self, llm: LLMClient):
        self.llm = llm

    async def ask(self, *, sender: Sender, level: Level, session_id: str, model: str,
                  prompt: str, system: str, max_tokens: int) -> ModelAnswer:
        answer = await self.llm.ask(sender=str(sender), level=level, model=model, prompt=prompt,
                                    system=system, max_tokens=max_tokens, session_id=session_id)
        return ModelAnswer(answer.text, answer.model or model, answer.usage)
