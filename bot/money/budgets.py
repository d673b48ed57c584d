"""Spend limits: per sender per day and per month, per level per day, and for everyone per day.

Checked before every model call starts (bot.llm.client), from the ledger's in-memory totals: a turn in
progress finishes the call it is in, and starts no new one once a limit is reached. A sender is
told once per period when they pass 80% of a limit (`warning`); a refused call raises
`BudgetExceeded`, whose user message says which limit, when it resets and who can raise it.
There is no channel-neutral way to message the approvers, so each refusal is logged for the
operator and audited once per sender, limit and period; `/usage all` shows who is at a limit.

Terminal senders (`cli:*`) are the operator at the machine, paying the bill: only the global
daily limit applies to them. Scheduled jobs run as their owner and count against the owner's
budget: a scheduler asks `check_owner` before starting one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from bot.core.errors import LLMError
from bot.core.identity import is_operator
from bot.language.catalogs import N_
from bot.language.phrase import Amount, Day, Lines, Phrase, plural_phrase
from bot.money.spend import Period, SpendLedger, Totals
from bot.store.audit import AuditEntry, write_audit
from bot.store.notices import OnceNotices

log = logging.getLogger(__name__)

WARN_AT = 0.8
SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£"}


class BudgetExceeded(LLMError):
    """A spend limit is reached; `user_message` says which, when it resets, who can raise it.
    `approver_note` is set on the first refusal of a sender per limit and day: what the
    approvers are told (later refusals are only audited once, never re-announced)."""

    def __init__(self, sender: str, user_message: str, approver_note: str = ""):
        super().__init__(f"budget reached for {sender}", user_message)
        self.sender, self.approver_note = sender, approver_note


@dataclass(frozen=True)
class Limits:
    """A sender's limits; 0 means no limit."""

    daily: float
    monthly: float
    global_daily: float
    daily_setting: str = "sender_daily"   # the config key that sets `daily`, for the message


@dataclass(frozen=True)
class Measure:
    kind: str          # "daily" | "monthly" | "global"
    spent: float
    limit: float
    period_key: str    # the day or month it counts in


@dataclass(frozen=True)
class Admission:
    allowed: bool
    message: str = ""  # why not, for the user (empty when allowed)
    limit: str = ""    # which limit refused: "daily" | "monthly" | "global"
    for_approvers: str = ""   # the same, about the user, for the approvers who may raise it


class Budgets:
    def __init__(self, config: object, ledger: SpendLedger):
        budgets = config["budgets"]  # type: ignore[index]
        self.ledger = ledger
        self.currency = str(budgets["currency"])
        self._sender_daily = float(budgets["sender_daily"])
        self._sender_monthly = float(budgets["sender_monthly"])
        self._global_daily = float(budgets["global_daily"])
        self._levels = {level: float(v) for level, v in budgets["levels"].items()}
        # Said once per sender, limit and period, whichever process or run gets there first.
        self._once = OnceNotices(ledger.store, ledger.clock)

    @property
    def configured(self) -> bool:
        """Does any limit apply to paired senders at all?"""
        return bool(self._sender_daily or self._sender_monthly or self._global_daily
                    or any(self._levels.values()))

    def limits(self, sender: str, level: str | None) -> Limits:
        if is_operator(sender):
            return Limits(0.0, 0.0, self._global_daily)
        daily, setting = self._sender_daily, "sender_daily"
        name = str(getattr(level, "value", level))  # a Level enum or its text
        by_level = self._levels.get(name, 0.0) if level else 0.0
        if by_level and (not daily or by_level < daily):
            daily, setting = by_level, f"levels.{name}"
        return Limits(daily, self._sender_monthly, self._global_daily, setting)

    def measures(self, totals: Totals, limits: Limits, period: Period) -> list[Measure]:
        return [Measure("daily", totals.day, limits.daily, period.day),
                Measure("monthly", totals.month, limits.monthly, period.month),
                Measure("global", totals.global_day, limits.global_daily, period.day)]

    async def check(self, sender: str, level: str | None) -> Admission:
        """May `sender` start a model call now? (In memory after the first look per day.)"""
        totals = await self.ledger.totals(sender)
        period = self.ledger.period()
        for measure in self.measures(totals, self.limits(sender, level), period):
            if measure.limit and measure.spent >= measure.limit:
                limits = self.limits(sender, level)
                return Admission(False, self._refusal(measure, limits, period), measure.kind,
                                 self._refusal(measure, limits, period, for_approvers=True))
        return Admission(True)

    async def check_owner(self, owner: str, level: str | None) -> Admission:
        """For the scheduler: may a job of `owner` start? Jobs count against their owner; when
        refused, skip the job and send the owner `message`."""
        return await self.check(owner, level)

    async def admit(self, sender: str, level: str | None) -> None:
        """Raise BudgetExceeded when `sender` may not start a model call now."""
        admission = await self.check(sender, level)
        if admission.allowed:
            return
        first = await self._report_refusal(sender, admission)
        note = Phrase("Budget: {who} was refused a model call. {why}", who=sender,
                      why=admission.for_approvers) if first else ""
        raise BudgetExceeded(sender, admission.message, note)

    async def warning(self, sender: str, level: str | None) -> str | None:
        """The 80% notice, once per sender, limit and period; None when there is nothing new."""
        totals = await self.ledger.totals(sender)
        period = self.ledger.period()
        for measure in self.measures(totals, self.limits(sender, level), period):
            if not measure.limit or not WARN_AT * measure.limit <= measure.spent:
                continue
            if not await self._once.first(_key("budget-warning", sender, measure.kind,
                                               measure.period_key)):
                continue
            if measure.spent < measure.limit:
                return self._warning_text(measure, period)
        return None

    # --- texts ---------------------------------------------------------------------------

    def money(self, amount: float) -> str:
        symbol = SYMBOLS.get(self.currency.upper())
        return f"{symbol}{amount:,.2f}" if symbol else f"{amount:,.2f} {self.currency}"

    def amount(self, value: float) -> Amount:
        """Money in the budget's currency, as each reader's language writes it."""
        return _Amount(value, self.currency.upper(), self.money(value))

    def _refusal(self, measure: Measure, limits: Limits, period: Period,
                 for_approvers: bool = False) -> str:
        """Why a call may not start, to the sender (or, `for_approvers`, about them)."""
        values = {"spent": self.amount(measure.spent), "limit": self.amount(measure.limit),
                  "resets": resets_text(measure.kind, period, self.ledger.clock())}
        if measure.kind == "global":
            return Phrase("The bot has used its shared model budget for today ({spent} of "
                          "{limit}), so I cannot answer right now. It resets {resets}. Only the "
                          "operator can raise it ([budgets] global_daily in the config).", **values)
        values["setting"] = limits.daily_setting if measure.kind == "daily" else "sender_monthly"
        if for_approvers:
            return (Phrase("They have used today's model budget ({spent} of {limit}), so I cannot "
                           "answer right now. It resets {resets}. Only the operator can raise it "
                           "([budgets] {setting} in the config); their message is saved.", **values)
                    if measure.kind == "daily" else
                    Phrase("They have used this month's model budget ({spent} of {limit}), so I "
                           "cannot answer right now. It resets {resets}. Only the operator can "
                           "raise it ([budgets] {setting} in the config); their message is saved.",
                           **values))
        if measure.kind == "daily":
            return Phrase("You have used today's model budget ({spent} of {limit}), so I cannot "
                          "answer right now. It resets {resets}. Only the operator can raise it "
                          "([budgets] {setting} in the config); your message is saved.", **values)
        return Phrase("You have used this month's model budget ({spent} of {limit}), so I cannot "
                      "answer right now. It resets {resets}. Only the operator can raise it "
                      "([budgets] {setting} in the config); your message is saved.", **values)

    def _warning_text(self, measure: Measure, period: Period) -> str:
        values = {"share": f"{round(100 * measure.spent / measure.limit)}%",
                  "spent": self.amount(measure.spent), "limit": self.amount(measure.limit),
                  "resets": resets_text(measure.kind, period, self.ledger.clock())}
        if measure.kind == "daily":
            return Phrase("Heads-up: {share} of your model budget for today is used ({spent} of "
                          "{limit}). It resets {resets}.", **values)
        if measure.kind == "monthly":
            return Phrase("Heads-up: {share} of your model budget for this month is used "
                          "({spent} of {limit}). It resets {resets}.", **values)
        return Phrase("Heads-up: {share} of the bot's shared model budget for today is used "
                      "({spent} of {limit}). It resets {resets}.", **values)

    async def _report_refusal(self, sender: str, admission: Admission) -> bool:
        """Audit the first refusal per sender, limit and day; True when this was the first."""
        message = admission.message
        key = _key("budget-refusal", sender, admission.limit, self.ledger.period().day)
        async with self.ledger.store.transaction(serial=False) as tx:
            if not await self._once.claim(tx, key):
                return False
            await write_audit(tx, AuditEntry(sender=sender, decision="budget",
                                             outcome="refused", detail=message[:500]))
        log.warning("budget: refused a model call for %s: %s", sender, message)
        return True


def _key(*parts: str) -> str:
    return "\x1f".join(parts)


@dataclass(frozen=True)
class _Amount(Amount):
    """An amount whose English text is the budget's own ("$1.25")."""

    english: str = ""

    def __str__(self) -> str:
        return self.english


def resets_text(kind: str, period: Period, now: float) -> str:
    """"at midnight UTC (in 5 h 12 min)" or "on 1 Jan 2027 at 00:00 UTC (in 30 days)"."""
    if kind == "monthly":
        return Phrase("on {day} at 00:00 UTC ({left})", day=Day(period.month_end),
                      left=until(period.month_end - now))
    return Phrase("at midnight UTC ({left})", left=until(period.day_end - now))


def until(seconds: float) -> str:
    minutes = max(1, int(seconds // 60))
    if minutes < 60:
        return Phrase("in {minutes} min", minutes=minutes)
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return (Phrase("in {hours} h {minutes} min", hours=hours, minutes=minutes) if minutes
                else Phrase("in {hours} h", hours=hours))
    return plural_phrase("in {n} day", "in {n} days", round(hours / 24))


# --- /usage ------------------------------------------------------------------------------

async def own_report(budgets: Budgets, sender: str, level: str | None) -> str:
    """A sender's spend today and this month against their limits."""
    totals = await budgets.ledger.totals(sender)
    period, now = budgets.ledger.period(), budgets.ledger.clock()
    limits = budgets.limits(sender, level)
    lines = [Phrase("Your model spend ({currency}):", currency=budgets.currency)]
    for measure, label in zip(budgets.measures(totals, limits, period),
                              (Phrase("today"), Phrase("this month"), Phrase("everyone today")),
                              strict=True):
        spent = _against(budgets, measure.spent, measure.limit)
        lines.append(Phrase("• {what}: {spent}, resets {resets}", what=label, spent=spent,
                            resets=resets_text(measure.kind, period, now)) if measure.limit
                     else Phrase("• {what}: {spent}", what=label, spent=spent))
    return Phrase("{lines}", lines=Lines(lines))


async def everyone_report(budgets: Budgets, levels: dict[str, str | None],
                          spent: dict[str, tuple[float, float]], limit: int = 30) -> Phrase:
    """Every sender's spend today / this month (for approvers), the biggest first."""
    if not spent:
        return Phrase("No model spend recorded this month.")
    lines = [Phrase("Model spend by sender ({currency}), today / this month:",
                    currency=budgets.currency)]
    for sender, (day, month) in list(spent.items())[:limit]:
        limits = budgets.limits(sender, levels.get(sender))
        at = tuple(name for name, used, cap in (("daily", day, limits.daily),
                                                ("monthly", month, limits.monthly))
                   if cap and used >= cap)
        lines.append(Phrase(_AT_LIMIT[at], who=sender, day=budgets.amount(day),
                            month=budgets.amount(month)))
    if len(spent) > limit:
        lines.append(plural_phrase("… and {n} more (see `myclaw usage`)",
                                   "… and {n} more (see `myclaw usage`)", len(spent) - limit))
    global_day = sum(day for day, _ in spent.values())
    lines.append(Phrase("Everyone today: {spent}", spent=_against(
        budgets, global_day, budgets.limits('', None).global_daily)))
    return Phrase("{lines}", lines=Lines(lines))


# A sender's line of everyone's spend, by the limits they have reached.
_AT_LIMIT = {(): N_("• {who}: {day} / {month}"),
             ("daily",): N_("• {who}: {day} / {month} — at the daily limit"),
             ("monthly",): N_("• {who}: {day} / {month} — at the monthly limit"),
             ("daily", "monthly"): N_("• {who}: {day} / {month} — at the daily and monthly "
                                      "limits")}


def _against(budgets: Budgets, spent: float, limit: float) -> str:
    if not limit:
        return Phrase("{spent} (no limit)", spent=budgets.amount(spent))
    return Phrase("{spent} of {limit} ({share})", spent=budgets.amount(spent),
                  limit=budgets.amount(limit), share=f"{round(100 * spent / limit)}%")
