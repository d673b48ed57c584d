"""Pairing codes waiting for the operator: Allow at a level, or Deny (as `myclaw pair ...`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.access.senders import PairingError
from bot.core.errors import reason_of
from bot.core.identity import LEVELS
from bot.language.catalogs import N_
from bot.language.phrase import Phrase
from bot.ops.console.auth import OPERATOR
from bot.ops.console.web import Action, ConsoleContext, Outcome, Page


async def load(ctx: ConsoleContext, query: Mapping[str, str]) -> dict[str, Any]:
    return {"codes": await ctx.services.senders.list_codes(), "levels": LEVELS,
            "default_level": "supervised"}


async def allow(ctx: ConsoleContext, route: Mapping[str, str], form: Mapping[str, str]) -> Outcome:
    level = form.get("level", "")
    try:
        sender = await ctx.services.senders.approve(route["code"], level, by=OPERATOR)
    except PairingError as exc:
        return Outcome(False, reason_of(exc))
    return Outcome(True, Phrase("Granted {level} to {sender}.", level=level, sender=sender))


async def deny(ctx: ConsoleContext, route: Mapping[str, str], form: Mapping[str, str]) -> Outcome:
    try:
        sender = await ctx.services.senders.deny(route["code"], by=OPERATOR)
    except PairingError as exc:
        return Outcome(False, reason_of(exc))
    return Outcome(True, Phrase("Denied pairing for {sender}.", sender=sender))


PAGE = Page("/pairing", N_("Pairing"), "pairing.html", load,
            actions=(Action("/pairing/{code}/allow", "pair-allow", allow),
                     Action("/pairing/{code}/deny", "pair-deny", deny)))
