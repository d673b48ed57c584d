"""The usage charts' value axis: it runs to a round number above the largest value, and its
labels are never the same twice (0.01 / 0.01 / 0.00 told an operator nothing)."""

from __future__ import annotations

import pytest

from bot.ops.console.charts import columns, nice_top, tick_texts


@pytest.mark.parametrize(("largest", "top"), [(0.012, 0.02), (7, 10), (8800, 10_000), (1, 1),
                                              (0.0031, 0.005), (230, 250)])
def test_the_axis_runs_to_a_round_number_at_or_above_the_largest_value(largest, top):
    assert nice_top(largest) == pytest.approx(top)


@pytest.mark.parametrize("money", [True, False])
@pytest.mark.parametrize("largest", [0.004, 0.012, 0.3, 3, 42, 999, 12_345])
def test_the_three_value_labels_always_differ(largest, money):
    chart = columns([("2026-12-01", largest / 3), ("2026-12-02", largest)], money=money)
    texts = [tick.text for tick in chart.ticks]
    assert len(texts) == 3 and len(set(texts)) == 3, texts


def test_money_labels_keep_two_decimals_and_small_amounts_get_more():
    assert tick_texts([0, 0.5, 1.0], money=True) == ["0.00", "0.50", "1.00"]
    assert tick_texts([0, 0.0025, 0.005], money=True) == ["0.000", "0.003", "0.005"]


def test_the_bars_stay_inside_the_axis_they_are_drawn_against():
    chart = columns([("2026-12-01", 0.012), ("2026-12-02", 0.004)], money=True)
    top_tick = min(tick.y for tick in chart.ticks)
    assert all(bar.y >= top_tick - 1e-6 for bar in chart.bars)
