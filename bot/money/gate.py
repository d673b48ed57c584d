"""The one gate every paid call goes through: model turns, summaries, `supra_llm`,
transcription, speech, and whatever is added later.

A paid call is made *for* someone, the `Payer`: the sender whose limits apply (their daily and
monthly limits, their level's daily limit, the global daily limit), at the level of the turn
(a job's turn runs as its owner at the job's capped level, so the owner's limits apply), in
the session its cost is booked under. The gate refuses before the call when a limit is
reached (`BudgetExceeded`, whose `user_message` is one line for the person) and writes the cost
to `usage` as soon as the call is over, before the next admission.

The whole surface, for a new kind of paid call (say speech out):

    async with paid.call(Payer(sender, level, session_id), "speech") as bill:
        audio = await engine.speak(text)          # not reached when over budget
        bill.charge("tts-1", cost=0.015)          # or bill.charge(model, usage={tokens...})

`bill.charge(model, usage=..., cost=...)` says what the call cost: `usage` (token counts under
`bot.llm.client`'s names) is priced from `[prices]`; `cost` is an amount in the budget's
currency for services priced otherwise (per minute, per character). The row is written when the
block exits — also when it exits with an error after `charge` (the service was paid). A call that
charges nothing records nothing. `admit(payer)` alone is the check, for a call whose cost is
booked with other rows in one transaction: a model turn's step (admitted by bot.llm.client,
booked by bot.conversation.journal in the step's transaction, on the same ledger).

`paid` is `Services.paid` in the runtime; bot/media and anything else below bot.money hold it
as `bot.core.ports.PaidCallsPort` (with `Payer` from there too). `tests/money/test_gate.py`
lists the places that call a paid service and fails for one that does not go through here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from bot.core.ports import Payer
from bot.money.budgets import Budgets
from bot.money.spend import SpendLedger


@dataclass
class Bill:
    """What one call cost, said by the caller once it knows (`charge`)."""

    kind: str
    model: str = ""
    usage: dict[str, int] = field(default_factory=dict)
    cost: float | None = None
    charged: bool = False

    def charge(self, model: str, *, usage: Mapping[str, int] | None = None,
               cost: float | None = None) -> None:
        self.model, self.usage, self.cost = model, dict(usage or {}), cost
        self.charged = True


class PaidCalls:
    """The gate: `budgets` None means no spend limits (costs are still recorded)."""

    def __init__(self, ledger: SpendLedger, budgets: Budgets | None = None):
        self.ledger = ledger
        self.budgets = budgets

    async def admit(self, payer: Payer) -> None:
        """Raise BudgetExceeded when `payer` may not start a paid call now."""
        if self.budgets is not None:
            await self.budgets.admit(payer.sender, payer.level)

    @asynccontextmanager
    async def call(self, payer: Payer, kind: str) -> AsyncIterator[Bill]:
        """Admit, let the caller make the call, record what it charged (see the docstring)."""
        await self.admit(payer)
        bill = Bill(kind)
        try:
            yield bill
        finally:
            if bill.charged:
                await self.ledger.record(session_id=payer.session_id, sender=payer.sender,
                                         model=bill.model or kind, usage=bill.usage,
                                         cost=bill.cost)
