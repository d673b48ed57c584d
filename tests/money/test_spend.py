"""What model calls cost: prices from the config, cost stored beside the tokens, running totals
kept in memory from the store, and `myclaw usage` (real runtime, real SDK, fake Anthropic)."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import pytest

from bot.config import settings as config_mod
from bot.config.prices import Price, PriceTable
from bot.core.errors import ConfigError
from bot.money.spend import Period, SpendLedger
from bot.ops.cli.core import usage_report
from tests.conftest import make_config
from tests.fakes.anthropic_server import reply, text, tool_use
from tests.runtime.test_runtime import say
from tests.support.pg_support import on_both_backends
from tests.support.runtime_tools import Recorder

backend_name = on_both_backends()

SONNET = Price(input=3.0, output=15.0, cache_write=3.75, cache_read=0.30)


async def usage_rows(app) -> list[dict]:
    rows = await app.services.store.fetchall("SELECT * FROM usage ORDER BY id")
    return [dict(r) for r in rows]


async def test_a_conversation_with_cache_writes_and_reads_costs_what_a_hand_computation_says(
        app_factory, fake_anthropic):
    app = await app_factory()
    app.services.registry.register(Recorder(), "tests")
    fake_anthropic.script(
        reply(text("Let me record."), tool_use("recorder", {"value": "a"}),
              usage={"input_tokens": 1200, "output_tokens": 80,
                     "cache_creation_input_tokens": 3000, "cache_read_input_tokens": 0}),
        reply(text("Recorded."),
              usage={"input_tokens": 150, "output_tokens": 40,
                     "cache_creation_input_tokens": 200, "cache_read_input_tokens": 3000}))
    await say(app, "record a")
    rows = await usage_rows(app)
    # By hand, at $3 / $15 / $3.75 / $0.30 per million (input, output, cache write, cache read):
    first = (1200 * 3 + 80 * 15 + 3000 * 3.75 + 0 * 0.30) / 1e6      # 0.01605
    second = (150 * 3 + 40 * 15 + 200 * 3.75 + 3000 * 0.30) / 1e6    # 0.0027
    assert [r["cache_write_tokens"] for r in rows] == [3000, 200]
    assert [r["cache_read_tokens"] for r in rows] == [0, 3000]
    assert [r["cost"] for r in rows] == pytest.approx([first, second])
    assert first + second == pytest.approx(0.01875)
    totals = await app.services.spend.totals("cli:local")
    assert totals.day == pytest.approx(0.01875) and totals.month == pytest.approx(0.01875)


async def test_the_fakes_own_cache_accounting_is_priced_per_kind_of_token(app_factory,
                                                                          fake_anthropic):
    app = await app_factory()
    for words in ("one", "two", "three"):
        await say(app, f"tell me about {words}")
    rows = await usage_rows(app)
    answered = [r.usage for r in fake_anthropic.requests]
    assert sum(u["cache_read_input_tokens"] for u in answered) > 0  # later turns read the cache
    assert sum(u["cache_creation_input_tokens"] for u in answered) > 0
    expected = [SONNET.cost({"input_tokens": u["input_tokens"], "output_tokens": u["output_tokens"],
                             "cache_write_tokens": u["cache_creation_input_tokens"],
                             "cache_read_tokens": u["cache_read_input_tokens"]}) for u in answered]
    assert [r["cost"] for r in rows] == pytest.approx(expected)


def test_a_dated_model_id_is_priced_by_its_configured_name_and_an_unknown_one_at_the_top_rate():
    table = PriceTable({"claude-sonnet-5-5": SONNET,
                        "claude-opus-5-5": Price(5.0, 25.0, 6.25, 0.5)})
    usage = {"output_tokens": 1_000_000}
    assert table.cost("claude-sonnet-5-5-20261001", usage) == pytest.approx(15.0)
    assert table.cost("some-future-model", usage) == pytest.approx(25.0)


def test_the_shipped_prices_cover_every_configured_model(config):
    table = PriceTable.from_config(config)
    for key in ("model", "supra_model", "small_model"):
        model = config["agent"][key]
        assert model in config["prices"], model
        assert table.price(model).output > 0


def test_a_price_table_missing_a_rate_is_a_clear_config_error(tmp_path):
    with pytest.raises(ConfigError, match=r"\[prices.'my-model'\] is missing cache_read"):
        config_mod.from_dict({"prices": {"my-model": {"input": 1, "output": 2, "cache_write": 3}}})
    edited = make_config(tmp_path, {"prices": {"claude-sonnet-5-5": {"input": 2.5}}})
    assert edited["prices"]["claude-sonnet-5-5"]["output"] == 15.0  # one rate edited, rest kept


class Clock:
    def __init__(self, moment: datetime):
        self.now = moment.timestamp()

    def __call__(self) -> float:
        return self.now


async def record(ledger: SpendLedger, sender: str, output_tokens: int) -> float:
    return await ledger.record(session_id="s", sender=sender, model="claude-sonnet-5-5",
                               usage={"output_tokens": output_tokens})


async def test_running_totals_are_read_once_then_kept_in_memory_and_roll_over_at_midnight(
        store):
    clock = Clock(datetime(2026, 12, 31, 23, 0, tzinfo=UTC))
    ledger = SpendLedger(store, PriceTable({"claude-sonnet-5-5": SONNET}), clock)
    await record(ledger, "telegram:1", 100_000)          # $1.50, before any total is read
    assert (await ledger.totals("telegram:1")).day == pytest.approx(1.5)
    await record(ledger, "telegram:1", 100_000)          # added in memory
    await record(ledger, "telegram:2", 100_000)
    totals = await ledger.totals("telegram:1")
    assert (totals.day, totals.month, totals.global_day) == pytest.approx((3.0, 3.0, 4.5))
    async with store.transaction() as tx:  # proof the next read does not hit the store
        await tx.execute("DELETE FROM usage")
    assert (await ledger.totals("telegram:1")).day == pytest.approx(3.0)
    clock.now += 3600                                     # 2027-01-01 00:00 UTC
    await record(ledger, "telegram:1", 10_000)
    totals = await ledger.totals("telegram:1")
    assert (totals.day, totals.month, totals.global_day) == pytest.approx((0.15, 0.15, 0.15))


def test_periods_are_utc_days_and_months_with_the_year_turning_over():
    period = Period.at(datetime(2026, 12, 31, 23, 59, tzinfo=UTC).timestamp())
    assert (period.day, period.month) == ("2026-12-31", "2026-12")
    assert period.month_end == datetime(2027, 1, 1, tzinfo=UTC).timestamp()
    assert period.day_end - period.day_start == 86400


def test_the_usage_report_groups_by_utc_day_sender_and_model_and_prices_old_rows():
    def row(ts: str, sender: str, cost: float | None, output: int = 1000) -> dict:
        return {"ts": datetime.fromisoformat(ts).timestamp(), "sender": sender,
                "model": "claude-sonnet-5-5", "input_tokens": 0, "output_tokens": output,
                "cache_read_tokens": 0, "cache_write_tokens": 0, "cost": cost}
    rows = [row("2026-11-30T23:59:00+00:00", "telegram:1", 0.5),
            row("2026-12-01T00:01:00+00:00", "telegram:1", 0.25),
            row("2026-12-01T10:00:00+00:00", "telegram:1", 0.25),
            row("2026-12-01T11:00:00+00:00", "discord:2", None, output=100_000)]
    report = usage_report(rows, PriceTable({"claude-sonnet-5-5": SONNET}))
    assert [(r["day"], r["sender"], r["calls"]) for r in report["rows"]] == [
        ("2026-11-30", "telegram:1", 1), ("2026-12-01", "discord:2", 1),
        ("2026-12-01", "telegram:1", 2)]
    assert report["by_day"] == pytest.approx({"2026-11-30": 0.5, "2026-12-01": 2.0})
    assert report["by_sender"] == pytest.approx({"telegram:1": 1.0, "discord:2": 1.5})
    assert report["rows"][1]["estimated"] is True and report["rows"][2]["estimated"] is False
    assert math.isclose(report["total"], 2.5)
    json.dumps(report)  # what --json prints


async def test_compaction_summaries_are_charged_to_the_sender_at_the_small_models_price(
        app_factory, fake_anthropic):
    app = await app_factory({"agent": {"context_budget_tokens": 1000}})

    def responder(body):
        if body["model"] == "claude-haiku-5-5":
            return reply(text("SUMMARY"), usage={"input_tokens": 2000, "output_tokens": 100,
                                                 "cache_creation_input_tokens": 0,
                                                 "cache_read_input_tokens": 0})
        return text("noted")

    fake_anthropic.responder = responder
    for i in range(12):
        await say(app, f"message {i}: " + "words " * 60)
    summaries = [r for r in await usage_rows(app) if r["model"] == "claude-haiku-5-5"]
    assert summaries and all(r["sender"] == "cli:local" for r in summaries)
    # $1 per million input, $5 per million output: 2000 × 1 + 100 × 5 = 2500 millionths.
    assert all(r["cost"] == pytest.approx(0.0025) for r in summaries)
