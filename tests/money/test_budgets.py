"""Spend limits end to end: the real runtime and SDK against the fake Anthropic, whose replies
carry usage numbers chosen so each call costs a known amount."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.config.prices import PriceTable
from bot.core.events import CollectingSink, Done, ErrorEvent, Notice
from bot.money.budgets import BudgetExceeded, Budgets, until
from bot.money.spend import SpendLedger
from bot.store.sqlite import Store
from tests.conftest import make_config
from tests.fakes.anthropic_server import reply, text, tool_use
from tests.money.test_spend import Clock
from tests.runtime.test_runtime import say
from tests.support.pg_support import on_both_backends
from tests.support.providers import PROVIDERS
from tests.support.runtime_tools import Recorder

backend_name = on_both_backends()

SENDERS = {"telegram:1": "full", "telegram:2": "full", "telegram:3": "read_only",
           "telegram:4": "full"}


def costing(dollars: float, *parts):
    """A reply whose usage costs `dollars` at the Sonnet output rate ($15 per million)."""
    tokens = round(dollars / 15 * 1_000_000)
    return reply(*(parts or (text("answer"),)),
                 usage={"input_tokens": 0, "output_tokens": tokens,
                        "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0})


async def budget_app(app_factory, **budgets):
    limits = {"sender_daily": 2.0, "sender_monthly": 0, "global_daily": 0, **budgets}
    return await app_factory({"senders": SENDERS, "budgets": limits})


def notices(sink) -> list[str]:
    return [n.text for n in sink.of(Notice)]


@pytest.mark.parametrize("provider_name", PROVIDERS)
async def test_over_budget_a_sender_is_refused_with_the_reset_time_after_one_80_percent_notice(
        app_factory, fake_model):
    app = await budget_app(app_factory)
    fake_model.script(costing(1.65), costing(1.65))
    first = await say(app, "one", sender="telegram:1", chat="1")
    assert first.text == "answer"
    (warning,) = notices(first)
    assert warning.startswith("Heads-up: 82% of your model budget for today is used ($1.65 of "
                              "$2.00)") and "midnight UTC" in warning
    second = await say(app, "two", sender="telegram:1", chat="1")
    assert second.text == "answer" and notices(second) == []  # told once, not again
    third = await say(app, "three", sender="telegram:1", chat="1")
    (refusal,) = [e.message for e in third.of(ErrorEvent)]
    assert refusal.startswith("You have used today's model budget ($3.30 of $2.00)")
    assert "It resets at midnight UTC (in " in refusal
    assert "Only the operator can raise it ([budgets] sender_daily" in refusal
    assert len(fake_model.requests) == 2  # the refused turn never reached the model
    session = await app.agent.session_id(third_message := _msg("three", "telegram:1", "1"))
    history, _ = await app.agent.journal.stored(session)
    assert history[-1]["content"][0]["text"] == third_message.text  # the message is kept
    audit = await app.services.store.fetchall(
        "SELECT sender, outcome FROM audit WHERE decision = 'budget'")
    assert [tuple(r) for r in audit] == [("telegram:1", "refused")]


def _msg(text_: str, sender: str, chat: str):
    from bot.core.events import IncomingMessage
    return IncomingMessage(sender=sender, chat=chat, text=text_, channel="telegram")


async def test_another_sender_is_unaffected_by_one_senders_exhausted_budget(app_factory,
                                                                           fake_anthropic):
    app = await budget_app(app_factory)
    fake_anthropic.script(costing(2.5))
    await say(app, "expensive", sender="telegram:1", chat="1")
    refused = await say(app, "again", sender="telegram:1", chat="1")
    assert refused.of(ErrorEvent) and not refused.of(Done)
    other = await say(app, "hello", sender="telegram:2", chat="2")
    assert other.text == "ok: hello" and not other.of(ErrorEvent)


async def test_a_read_only_sender_gets_the_smaller_daily_limit_of_its_level(app_factory,
                                                                           fake_anthropic):
    app = await budget_app(app_factory, levels={"read_only": 0.25})
    fake_anthropic.script(costing(0.30))
    await say(app, "look", sender="telegram:3", chat="3")
    refused = await say(app, "look again", sender="telegram:3", chat="3")
    (message,) = [e.message for e in refused.of(ErrorEvent)]
    assert "($0.30 of $0.25)" in message and "[budgets] levels.read_only" in message
    fine = await say(app, "hi", sender="telegram:4", chat="4")  # a full sender: $2.00 applies
    assert fine.text == "ok: hi"


@pytest.mark.parametrize("provider_name", PROVIDERS)
async def test_a_turn_in_progress_finishes_its_call_but_starts_no_new_one_past_the_limit(
        app_factory, fake_model):
    app = await budget_app(app_factory)
    recorder = Recorder()
    app.services.registry.register(recorder, "tests")
    fake_model.script(costing(2.10, text("on it"), tool_use("recorder", {"value": "x"})))
    sink = await say(app, "record x", sender="telegram:1", chat="1")
    assert recorder.calls == [{"value": "x"}]  # the answer that came back was still acted on
    assert len(fake_model.requests) == 1   # ...but no second model call was started
    (message,) = [e.message for e in sink.of(ErrorEvent)]
    assert "model budget" in message
    session = await app.agent.session_id(_msg("record x", "telegram:1", "1"))
    history, _ = await app.agent.journal.stored(session)
    assert history[-1]["content"][0]["type"] == "tool_result"  # the step's result is stored


async def test_the_global_daily_limit_stops_everyone_and_says_it_is_shared(app_factory,
                                                                           fake_anthropic):
    app = await budget_app(app_factory, global_daily=3.0)
    fake_anthropic.script(costing(1.6), costing(1.6))
    await say(app, "a", sender="telegram:1", chat="1")
    await say(app, "b", sender="telegram:2", chat="2")
    refused = await say(app, "c", sender="cli:local", chat="local")  # the operator too
    (message,) = [e.message for e in refused.of(ErrorEvent)]
    assert message.startswith("The bot has used its shared model budget for today ($3.20 of "
                              "$3.00)") and "[budgets] global_daily" in message


async def test_the_terminal_operator_has_no_per_sender_limit(app_factory, fake_anthropic):
    app = await budget_app(app_factory, sender_daily=0.5)
    fake_anthropic.script(costing(1.0))
    await say(app, "big job")
    again = await say(app, "more")
    assert again.text == "ok: more" and not again.of(ErrorEvent)


async def budgets_at(tmp_path, moment: datetime, **limits) -> tuple[Budgets, SpendLedger, Store]:
    config = make_config(tmp_path, {"budgets": {"sender_daily": 0, "global_daily": 0, **limits}})
    store = await Store(config.store_path).open()
    ledger = SpendLedger(store, PriceTable.from_config(config), Clock(moment))
    return Budgets(config, ledger), ledger, store


async def spend(ledger: SpendLedger, sender: str, dollars: float) -> None:
    await ledger.record(session_id="s", sender=sender, model="claude-sonnet-5-5",
                        usage={"output_tokens": round(dollars / 15 * 1_000_000)})


async def test_the_monthly_limit_names_the_first_of_next_month_and_jobs_are_checked_for_their_owner(
        tmp_path):
    budgets, ledger, store = await budgets_at(tmp_path, datetime(2026, 12, 20, 12, tzinfo=UTC),
                                              sender_monthly=30.0)
    try:
        await spend(ledger, "telegram:1", 30.0)
        job = await budgets.check_owner("telegram:1", "full")
        assert not job.allowed and job.limit == "monthly"
        assert ("It resets on 1 Jan 2027 at 00:00 UTC (in 12 days). Only the operator can raise "
                "it ([budgets] sender_monthly") in job.message
        assert (await budgets.check_owner("telegram:2", "full")).allowed
    finally:
        await store.close()


async def test_the_80_percent_notice_comes_again_in_the_next_period(tmp_path):
    budgets, ledger, store = await budgets_at(tmp_path, datetime(2026, 12, 1, 22, tzinfo=UTC),
                                              sender_daily=1.0)
    try:
        await spend(ledger, "telegram:1", 0.85)
        assert "85% of your model budget for today" in await budgets.warning("telegram:1", "full")
        assert await budgets.warning("telegram:1", "full") is None
        ledger.clock.now += 3 * 3600  # the next UTC day
        await spend(ledger, "telegram:1", 0.9)
        assert "90%" in await budgets.warning("telegram:1", "full")
    finally:
        await store.close()


def budgets_on(store, tmp_path, moment: datetime, **limits) -> tuple[Budgets, SpendLedger]:
    """Budgets of one process (or one run of it) on `store`."""
    config = make_config(tmp_path, {"budgets": {"sender_daily": 0, "global_daily": 0, **limits}})
    ledger = SpendLedger(store, PriceTable.from_config(config), Clock(moment))
    return Budgets(config, ledger), ledger


async def test_the_80_percent_notice_is_said_once_whichever_process_or_run_comes_first(
        store, store_backend, tmp_path):
    moment = datetime(2026, 12, 1, 12, tzinfo=UTC)
    budgets, ledger = budgets_on(store, tmp_path, moment, sender_daily=1.0)
    await spend(ledger, "telegram:1", 0.85)
    async with store_backend.open() as other_store:
        elsewhere, _ = budgets_on(other_store, tmp_path, moment, sender_daily=1.0)
        restarted, _ = budgets_on(store, tmp_path, moment, sender_daily=1.0)
        said = [await b.warning("telegram:1", "full") for b in (elsewhere, budgets, restarted)]
    assert "85% of your model budget for today" in said[0] and said[1:] == [None, None]


async def test_a_budget_refusal_is_audited_and_announced_once_across_processes(
        store, store_backend, tmp_path):
    moment = datetime(2026, 12, 1, 12, tzinfo=UTC)
    budgets, ledger = budgets_on(store, tmp_path, moment, sender_daily=1.0)
    await spend(ledger, "telegram:1", 1.2)
    notes = []
    async with store_backend.open() as other_store:
        elsewhere, _ = budgets_on(other_store, tmp_path, moment, sender_daily=1.0)
        for process in (budgets, elsewhere, budgets):
            with pytest.raises(BudgetExceeded) as refused:
                await process.admit("telegram:1", "full")
            notes.append(refused.value.approver_note)
    assert notes[0].startswith("Budget: telegram:1 was refused") and notes[1:] == ["", ""]
    audited = await store.fetchall("SELECT detail FROM audit WHERE decision = 'budget'")
    assert len(audited) == 1 and audited[0]["detail"].startswith("You have used today's")


@pytest.mark.parametrize(("seconds", "text_"), [(59, "in 1 min"), (3 * 3600 + 20 * 60, "in 3 h 20 min"),
                                                (7200, "in 2 h"), (12 * 86400, "in 12 days")])
def test_reset_times_read_naturally(seconds, text_):
    assert until(seconds) == text_


async def test_slash_usage_shows_the_senders_own_spend_against_their_limits(app_factory,
                                                                            fake_anthropic):
    app = await budget_app(app_factory, sender_monthly=30.0, global_daily=20.0)
    fake_anthropic.script(costing(0.5))
    await say(app, "hi", sender="telegram:1", chat="1")
    (shown,) = (await say(app, "/usage", sender="telegram:1", chat="1")).of(Notice)
    lines = shown.text.splitlines()
    assert lines[0] == "Your model spend (USD):"
    assert lines[1].startswith("• today: $0.50 of $2.00 (25%), resets at midnight UTC (in ")
    assert lines[2].startswith("• this month: $0.50 of $30.00 (2%), resets on 1 ")
    assert lines[3].startswith("• everyone today: $0.50 of $20.00 (2%)")
    assert len(fake_anthropic.requests) == 1  # the command itself costs nothing


async def test_slash_usage_all_lists_everyone_for_an_approver_and_no_one_else(app_factory,
                                                                              fake_anthropic):
    app = await app_factory({"senders": SENDERS, "approvals": {"approvers": ["telegram:2"]},
                             "budgets": {"sender_daily": 1.0}})
    fake_anthropic.script(costing(1.2), costing(0.2))
    await say(app, "a", sender="telegram:1", chat="1")
    await say(app, "b", sender="telegram:3", chat="3")
    (refused,) = (await say(app, "/usage all", sender="telegram:1", chat="1")).of(Notice)
    assert refused.text.startswith("Only approvers can see everyone's usage")
    (shown,) = (await say(app, "/usage all", sender="telegram:2", chat="2")).of(Notice)
    assert shown.text.splitlines()[1:] == [
        "• telegram:1: $1.20 / $1.20 — at the daily limit",
        "• telegram:3: $0.20 / $0.20",
        "Everyone today: $1.40 of $20.00 (7%)"]


class PrivateOutlet:
    """Where a channel would deliver private messages: one collecting sink per recipient."""

    def __init__(self) -> None:
        self.sinks: dict[str, CollectingSink] = {}

    def sink_for(self, chat: str, sender: str) -> None:
        return None

    def private_sink_for(self, sender: str) -> CollectingSink:
        return self.sinks.setdefault(sender, CollectingSink())


async def test_approvers_are_told_privately_once_when_a_sender_is_refused_for_budget(
        app_factory, fake_anthropic):
    app = await app_factory({"senders": SENDERS, "budgets": {"sender_daily": 1.0},
                             "approvals": {"approvers": ["telegram:2", "telegram:4"]}})
    outlet = PrivateOutlet()
    app.services.delivery.register("telegram", outlet)
    fake_anthropic.script(costing(1.2))
    await say(app, "expensive", sender="telegram:1", chat="1")
    for attempt in ("again", "and again"):
        refused = await say(app, attempt, sender="telegram:1", chat="1")
        assert refused.of(ErrorEvent)
    assert set(outlet.sinks) == {"telegram:2", "telegram:4"}
    for approver in ("telegram:2", "telegram:4"):
        (note,) = notices(outlet.sinks[approver])  # the second refusal is not announced again
        assert note.startswith("Budget: telegram:1 was refused a model call. They have used "
                               "today's model budget ($1.20 of $1.00)")
        assert "their message is saved" in note and "You have" not in note


async def test_an_approver_refused_for_budget_is_not_told_about_themselves(app_factory,
                                                                          fake_anthropic):
    app = await app_factory({"senders": SENDERS, "budgets": {"sender_daily": 1.0},
                             "approvals": {"approvers": ["telegram:2"]}})
    outlet = PrivateOutlet()
    app.services.delivery.register("telegram", outlet)
    fake_anthropic.script(costing(1.2))
    await say(app, "expensive", sender="telegram:2", chat="2")
    assert (await say(app, "again", sender="telegram:2", chat="2")).of(ErrorEvent)
    assert outlet.sinks == {}
