"""Bar charts as plain geometry, drawn as inline SVG by the templates (no script, no library).

`columns` is one bar per period (days along the bottom); `rows` is one labelled bar per name
(senders), which stays readable on a narrow phone because each label sits above its bar.
Labels are data: the templates escape them like any other text.

The value axis runs to a round number just above the largest value (1, 2 or 5 × a power of
ten), and its three labels get as many decimals as it takes to tell them apart (a top of 0.012
is labelled 0, 0.01, 0.02, never 0.01 / 0.01 / 0.00). Text sizes are in the SVG's own units,
which a phone shrinks: the stylesheet enlarges them on narrow screens (≥ 11 px as seen).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

WIDTH = 640
COLUMNS_HEIGHT = 220
AXIS_BOTTOM = 30          # room for the day labels
AXIS_LEFT = 80            # room for the value labels (TICK_X, right-aligned)
TICK_X = 74
AXIS_RIGHT = 30           # room for half of the last day's label
ROW_HEIGHT = 48           # label line + bar
ROW_LABEL = 28            # from a row's top to its bar: the label above it
MAX_LABEL_CHARS = 60


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    text: str             # the value as shown
    x: float
    y: float
    width: float
    height: float
    show_label: bool = True


@dataclass(frozen=True)
class Tick:
    y: float
    text: str


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    bars: tuple[Bar, ...]
    ticks: tuple[Tick, ...] = ()
    empty: bool = False
    tick_x: int = TICK_X      # where the value labels end (right-aligned)


def compact(value: float, money: bool = False) -> str:
    """12345 -> '12.3k'; money keeps two decimals (the currency is named by the page)."""
    if money:
        return f"{value:,.2f}"
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.1f}{suffix}"
    return f"{value:g}"


def nice_top(value: float) -> float:
    """The round number (1, 2, 2.5 or 5 × a power of ten) at or just above `value`."""
    if value <= 0:
        return 0.0
    power = 10 ** math.floor(math.log10(value))
    return next(step * power for step in (1, 2, 2.5, 5, 10) if step * power >= value * (1 - 1e-9))


def tick_texts(values: Sequence[float], money: bool = False) -> list[str]:
    """The labels of `values`, with the fewest decimals that keep them apart (money: at least
    two, as amounts are read)."""
    if not money and max(values, default=0) >= 1000:
        return [compact(v) for v in values]
    for decimals in range(2 if money else 0, 7):
        shown = [f"{v:,.{decimals}f}" for v in values]
        if len(set(shown)) == len(shown):
            return shown
    return shown


def columns(series: Sequence[tuple[str, float]], money: bool = False) -> Chart:
    """One bar per (label, value), left to right; every few labels shown so they never overlap."""
    top = nice_top(max((v for _, v in series), default=0.0))
    plot_w, plot_h = WIDTH - AXIS_LEFT - AXIS_RIGHT, COLUMNS_HEIGHT - AXIS_BOTTOM
    slot = plot_w / max(len(series), 1)
    every = max(1, round(len(series) / 6))
    bars = []
    for i, (label, value) in enumerate(series):
        h = (value / top) * (plot_h - 8) if top > 0 else 0.0
        bars.append(Bar(label[-5:], value, compact(value, money), AXIS_LEFT + i * slot + slot * 0.15,
                        plot_h - h, slot * 0.7, h, show_label=(len(series) - 1 - i) % every == 0))
    fractions = (0.0, 0.5, 1.0)
    ticks = tuple(Tick(plot_h - f * (plot_h - 8), shown) for f, shown in
                  zip(fractions, tick_texts([top * f for f in fractions], money), strict=True))
    return Chart(WIDTH, COLUMNS_HEIGHT, tuple(bars), ticks if top > 0 else (), empty=top <= 0)


def rows(series: Sequence[tuple[str, float]], money: bool = False) -> Chart:
    """One labelled bar per (label, value), largest first."""
    ordered = sorted(series, key=lambda item: item[1], reverse=True)
    top = max((v for _, v in ordered), default=0.0)
    bars = []
    for i, (label, value) in enumerate(ordered):
        w = (value / top) * (WIDTH - 4) if top > 0 else 0.0
        shown = label if len(label) <= MAX_LABEL_CHARS else label[:MAX_LABEL_CHARS - 1] + "…"
        bars.append(Bar(shown, value, compact(value, money), 0.0, i * ROW_HEIGHT + ROW_LABEL,
                        max(w, 1.0), 14))
    return Chart(WIDTH, max(len(bars), 1) * ROW_HEIGHT + 4, tuple(bars), empty=top <= 0)
