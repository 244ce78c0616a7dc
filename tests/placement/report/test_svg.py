"""The HTML page's SVG charts: scales, ticks, lines that keep spikes, and what each chart shows."""

from __future__ import annotations

import re
from dataclasses import replace
from xml.etree import ElementTree

import pytest

from placement.report.svg import (
    Plot,
    Scale,
    card_chart,
    decimate,
    fleet_chart,
    headroom_scale,
    nice_ticks,
    path,
    tile_fraction,
    time_ticks,
)
from seats.units import GiB
from tests.placement.report.test_charts import series

SVG = "{http://www.w3.org/2000/svg}"


def parsed(markup: str) -> ElementTree.Element:
    """The chart as XML: it must be well-formed, text escaped."""
    return ElementTree.fromstring(markup)


def texts(markup: str) -> list[str]:
    return ["".join(t.itertext()) for t in parsed(markup).iter(f"{SVG}text")]


@pytest.mark.parametrize(
    ("low", "high", "most", "ticks"),
    [
        (0.0, 5.4, 6, [0, 1, 2, 3, 4, 5]),
        (0.0, 105.0, 5, [0, 25, 50, 75, 100]),
        (-0.55, 0.55, 4, [-0.5, 0, 0.5]),
        (0.0, 1.08, 6, [0, 0.2, 0.4, 0.6, 0.8, 1.0]),
    ],
)
def test_ticks_are_round(low: float, high: float, most: int, ticks: list[float]) -> None:
    assert nice_ticks(low, high, most) == pytest.approx(ticks)


def test_a_long_series_keeps_its_spike_and_its_dip() -> None:
    # 10,000 readings across 100 pixels: one spike and one dip, each a single reading.
    points: list[tuple[float, float | None]] = [(i / 100, 50.0) for i in range(10_000)]
    points[4_321] = (43.21, 90.0)
    points[7_654] = (76.54, 3.0)
    kept = decimate(points)
    assert len(kept) <= 2 * 101
    ys = [y for _, y in kept]
    assert 90.0 in ys and 3.0 in ys
    assert [x for x, _ in kept] == sorted(x for x, _ in kept)  # still in time order


def test_a_gap_stays_a_gap() -> None:
    points: list[tuple[float, float | None]] = [(i / 100, 1.0) for i in range(1_000)]
    points[500] = (5.0, None)
    assert (5.0, None) in decimate(points)
    assert path([(0.0, 1.0), (1.0, None), (2.0, 3.0), (3.0, 4.0)]) == "M0.0 1.0M2.0 3.0L3.0 4.0"


@pytest.mark.parametrize(
    ("value", "top", "height"),
    [
        (2.0, 8.0, 0.25),
        (0.0, 100.0, 0.0),
        (4.0, 100.0, 0.4),
        (100.0, 100.0, 1.0),
        (500.0, 8.0, 1.0),
    ],
)
def test_tiles_show_the_last_four_gib_linearly(value: float, top: float, height: float) -> None:
    assert tile_fraction(value, top) == pytest.approx(height)


def test_headroom_axis_keeps_the_last_four_gib_linear() -> None:
    small, ticks = headroom_scale(5.0)
    assert not small.log and ticks[-1] <= small.top and small.top == pytest.approx(5.4)
    large, ticks = headroom_scale(80.0)
    assert large.log and ticks == [0, 1, 2, 3, 4, 8, 16, 32, 64]
    assert large.fraction(2.0) == pytest.approx(large.fraction(4.0) / 2)
    # Above 4 GiB each doubling takes the same height.
    step = large.fraction(16.0) - large.fraction(8.0)
    assert large.fraction(32.0) - large.fraction(16.0) == pytest.approx(step)
    assert large.fraction(1_000.0) == 1.0  # clamped: nothing is drawn outside the plot


def test_a_week_is_marked_at_midnights() -> None:
    first = 1_789_300_000  # 2026-09-13 11:46:40Z
    marks = time_ticks(first, first + 7 * 86400)
    assert [label for _, label in marks][:2] == ["Sep 14", "Sep 15"]
    assert all(at % 86400 == 0 for at, _ in marks) and len(marks) == 7
    assert [label for _, label in time_ticks(first, first + 3 * 3600)][:2] == ["12:00", "12:30"]


def test_plot_maps_time_and_value_to_pixels() -> None:
    plot = Plot(10, 20, 100, 50, 1000, 2000, Scale(0, 10))
    assert (plot.x(1500), plot.y(0), plot.y(10)) == (60.0, 70.0, 20.0)


def test_card_chart_draws_each_series_and_the_lines_that_matter() -> None:
    one = series("h<1>&", 0, [6.0, None, 2.5, 8.0], held=2 * GiB)
    markup = card_chart(one)
    root = parsed(markup)
    words = texts(markup)
    assert (
        "h<1>& · card 0 · headroom: free and plannable (per 30 min; held and margin as now)"
        in words
    )
    # The lowest plannable (what fit all window), the held band and the margin in the legend.
    assert "0 B" in words and "held 2.00 GiB + margin" in words
    assert {"CUDA total 99.00 GiB", "declared 9.00 GiB", "a", "unexplained (no seat)"} <= set(words)
    paths = [p.get("d", "") for p in root.iter(f"{SVG}path")]
    # free and plannable break at the bucket with no reading: two runs each.
    assert sum(d.count("M") == 2 for d in paths) >= 2
    dashed = [line for line in root.iter(f"{SVG}line") if line.get("stroke-dasharray")]
    assert dashed, "the lowest plannable and the declared total are dashed lines"


def test_card_chart_draws_the_plannable_bytes_the_figures_computed() -> None:
    # Plannable comes from the report's figures (fit's room, in bytes): the chart draws those
    # and never works its own out of free, held and margin.
    given = replace(
        series("h", 0, [6.0, 2.5], held=2 * GiB), plannable_min=(3 * GiB + 7, 3 * GiB + 5)
    )
    words = texts(card_chart(given))
    assert "3.00 GiB" in words  # the lowest plannable given, not max(0, 2.5 − 2 − 1) = 0
    assert "0 B" not in words


def test_card_chart_without_readings_says_so() -> None:
    markup = card_chart(series("h", 0, [None, None]))
    assert "no free-memory reading" in texts(markup)


def test_fleet_chart_shows_hosts_worst_first() -> None:
    fleet = [
        series("roomy", 0, [40.0, 30.0]),
        series("tight", 0, [40.0, 2.5]),
        series("tight", 1, [60.0, 60.0]),
    ]
    titles = [t for t in texts(fleet_chart(fleet)) if re.match(r"\d+\. ", t)]
    assert titles == [
        "1. tight · lowest free 2.50 GiB (card 0, Mon 14:43)",
        "2. roomy · lowest free 30.00 GiB (card 0, Mon 14:43)",
    ]
