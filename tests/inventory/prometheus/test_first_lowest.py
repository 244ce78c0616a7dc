"""The step at which each card's lowest free memory was first reached, found from the hour holding
it (that hour's steps and the next's, then the rest of the window for a lowest no step saw),
against the comparison at every step."""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Sequence
from typing import cast

import pytest

from inventory.prometheus.range import Labels, Matrix, PromCards, PromClient, _Queries, _steps

LOOKBACK_S = 300  # Prometheus's default lookback
HOUR_S = 3600
START_S = 1_789_000_000 // HOUR_S * HOUR_S
WEEK_S = 7 * 86400


class Series:
    def __init__(self, card: int, samples: Sequence[tuple[float, float]], job: str = "") -> None:
        self.card = card
        self.labels: Labels = {"__name__": "free", "host": "h", "gpu": str(card), "job": job}
        self.samples = sorted(samples)
        self.times = [s for s, _ in self.samples]

    def visible(self, t: float) -> float | None:
        """The value an instant selector sees at `t`: the newest sample within the lookback."""
        at = bisect.bisect_right(self.times, t) - 1
        return self.samples[at][1] if at >= 0 and t - self.times[at] <= LOOKBACK_S else None

    def between(self, first: float, last: float) -> list[float]:
        """Values of the samples in [first, last]."""
        lo, hi = bisect.bisect_left(self.times, first), bisect.bisect_right(self.times, last)
        return [v for _, v in self.samples[lo:hi]]

    def lowest(self, start_s: float, end_s: float) -> float:
        return min(v for s, v in self.samples if start_s <= s < end_s)


class FakePrometheus:
    """Answers the two kinds of range query the search sends, and counts steps it evaluated."""

    def __init__(self, series: Sequence[Series]) -> None:
        self.series = series
        self.steps = 0

    def range(self, promql: str, start_s: float, end_s: float, step_s: float) -> Matrix:
        times = [start_s + k * step_s for k in range(int((end_s - start_s) // step_s) + 1)]
        cut = re.search(r'gpu=~"([^"]*)"', promql)
        chosen = [s for s in self.series if cut is None or re.fullmatch(cut[1], s.labels["gpu"])]
        self.steps += len(times) * len(chosen)
        out: Matrix = []
        for one in chosen:
            if promql.startswith("min_over_time("):  # hourly minima, both ends in
                points = [(t, min(vs)) for t in times if (vs := one.between(t - HOUR_S, t))]
            else:
                points = [(t, v) for t in times if (v := one.visible(t)) is not None]
            out.append(({k: v for k, v in one.labels.items() if k != "__name__"}, points))
        return out


def every_step(q: _Queries, card: Sequence[Series]) -> int | None:
    """`free == min_over_time(free[window] @ end)` at every --step over a card's series: the
    first step where one of them shows the card's lowest."""
    start, end, step = _steps(q, q.start_s, q.end_s)
    low = min(one.lowest(q.start_s, q.end_s) for one in card)
    for k in range(int((end - start) // step) + 1):
        if any(one.visible(start + k * step) == low for one in card):
            return round(start + k * step)
    return None


def first_hour(card: Sequence[Series], start_s: int, end_s: int) -> tuple[int, int, int]:
    """(start, end, lowest) of the card's first hour holding its lowest of the window, as
    `figures.card_usage` asks it."""
    low = min(one.lowest(start_s, end_s) for one in card)
    hour = min(s for one in card for s, v in one.samples if start_s <= s < end_s and v == low)
    begin = start_s + (int(hour) - start_s) // HOUR_S * HOUR_S
    return begin, begin + HOUR_S, round(low)


def minutes(
    values: dict[int, float], every_s: int = 60, offset_s: int = 0
) -> list[tuple[float, float]]:
    """A week of samples every `every_s` seconds, 100 unless `values` (minute → value) says."""
    return [
        (START_S + offset_s + i * every_s, values.get(i * every_s // 60, 100.0))
        for i in range(WEEK_S // every_s)
    ]


@pytest.mark.slow
@pytest.mark.parametrize("step_s", [60, 300, 600])
def test_the_first_lowest_step_is_the_one_every_step_finds(step_s: int) -> None:
    series = [
        Series(0, minutes({})),  # flat: its lowest is its first sample
        Series(1, minutes({3000: 40.0, 9000: 40.0})),  # a dip on day 3, again on day 7
        Series(2, minutes({30: 70.0, 6000: 20.0})),  # the first hours hold a dip, not the lowest
        Series(3, minutes({5000: 5.0}, every_s=420, offset_s=17)),  # sparse, off the step grid
        # The lowest between two steps, its next sample before the next step: a step of 5 or
        # 10 min never sees the first one, only the second (five hours later).
        Series(4, minutes({4001: 1.0, 4300: 1.0})),
    ]
    # A sample before the window is visible at its first step through the lookback.
    series.append(Series(5, [(START_S - 120, 0.5), *minutes({8000: 0.5}, offset_s=120)]))
    # Two series of one card (two scrape jobs): the second's lowest first seen at hour 50, when
    # the first's is seen again; the first's was first seen at hour 30 (after an unseen one).
    series.append(Series(6, minutes({601: 2.0, 1800: 2.0, 3000: 2.0}), job="a"))
    series.append(Series(6, minutes({3000: 3.0}), job="b"))
    q = _Queries(("h",), START_S, START_S + WEEK_S, step_s)
    prometheus = FakePrometheus(series)
    cards = {card: [one for one in series if one.card == card] for card in range(7)}
    wanted = {("h", c): first_hour(found, q.start_s, q.end_s) for c, found in cards.items()}
    found = PromCards(cast(PromClient, prometheus), q).first_lowest_free(wanted)
    expected = {("h", c): every_step(q, one) for c, one in cards.items()}
    assert found == expected
    assert found[("h", 4)] == START_S + (4001 if step_s == 60 else 4300) * 60
    assert found[("h", 5)] == START_S  # the sample before the window, through the lookback
    assert found[("h", 6)] == START_S + (601 if step_s == 60 else 1800) * 60
    if step_s == 60:  # a small part of the steps the comparison at every step evaluates
        assert prometheus.steps < len(series) * math.ceil(WEEK_S / step_s) / 4
