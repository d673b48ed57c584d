"""Bar charts as plain geometry, drawn as inline SVG by the templates (no script, no library).

`columns` is one bar per period (days along the bottom); `rows` is one labelled bar per name
(senders), which stays readable on a narrow phone because each label sits above its bar.
Labels are data: the templates escape them like any other text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

WIDTH = 640
COLUMNS_HEIGHT = 220
AXIS_BOTTOM = 24          # room for the day labels
AXIS_LEFT = 56            # room for the value labels
AXIS_RIGHT = 24           # room for half of the last day's label
ROW_HEIGHT = 40           # label line + bar
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


def compact(value: float, money: bool = False) -> str:
    """12345 -> '12.3k'; money keeps two decimals (the currency is named by the page)."""
    if money:
        return f"{value:,.2f}"
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.1f}{suffix}"
    return f"{value:g}"


def columns(series: Sequence[tuple[str, float]], money: bool = False) -> Chart:
    """One bar per (label, value), left to right; every few labels shown so they never overlap."""
    top = max((v for _, v in series), default=0.0)
    plot_w, plot_h = WIDTH - AXIS_LEFT - AXIS_RIGHT, COLUMNS_HEIGHT - AXIS_BOTTOM
    slot = plot_w / max(len(series), 1)
    every = max(1, round(len(series) / 6))
    bars = []
    for i, (label, value) in enumerate(series):
        h = (value / top) * (plot_h - 8) if top > 0 else 0.0
        bars.append(Bar(label[-5:], value, compact(value, money), AXIS_LEFT + i * slot + slot * 0.15,
                        plot_h - h, slot * 0.7, h, show_label=(len(series) - 1 - i) % every == 0))
    ticks = tuple(Tick(plot_h - f * (plot_h - 8), compact(top * f, money)) for f in (0.0, 0.5, 1.0))
    return Chart(WIDTH, COLUMNS_HEIGHT, tuple(bars), ticks if top > 0 else (), empty=top <= 0)


def rows(series: Sequence[tuple[str, float]], money: bool = False) -> Chart:
    """One labelled bar per (label, value), largest first."""
    ordered = sorted(series, key=lambda item: item[1], reverse=True)
    top = max((v for _, v in ordered), default=0.0)
    bars = []
    for i, (label, value) in enumerate(ordered):
        w = (value / top) * (WIDTH - 4) if top > 0 else 0.0
        shown = label if len(label) <= MAX_LABEL_CHARS else label[:MAX_LABEL_CHARS - 1] + "…"
        bars.append(Bar(shown, value, compact(value, money), 0.0, i * ROW_HEIGHT + 22, max(w, 1.0), 14))
    return Chart(WIDTH, max(len(bars), 1) * ROW_HEIGHT + 4, tuple(bars), empty=top <= 0)
