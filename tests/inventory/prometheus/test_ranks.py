"""Percentiles from Prometheus are nearest rank, as the ledger's: `kth_samples` asks
`quantile_over_time` at the φ that lands on the sample of rank ceil(p·n/100), per group of series
of one sample count n, and cuts the query to the series of the smaller groups."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import cast

import pytest

from inventory.history.figures import nearest_rank
from inventory.prometheus.range import PromClient, kth_samples


def prometheus_quantile(phi: float, samples: Sequence[float]) -> float:
    """Prometheus 2.42's `quantile` (promql/quantile.go), which quantile_over_time applies to a
    series' samples: rank φ·(n − 1), linear between its two neighbours."""
    values = sorted(samples)
    n = float(len(values))
    rank = phi * (n - 1)
    lower = max(0.0, math.floor(rank))
    upper = min(n - 1, lower + 1)
    weight = rank - math.floor(rank)
    return values[int(lower)] * (1 - weight) + values[int(upper)] * weight


class FakePrometheus:
    """Series by name, each with its samples; answers `quantile_over_time(φ, {names})` where
    `{names}` is a regex of the series asked, and remembers what it was asked."""

    def __init__(self, series: Mapping[str, list[float]]) -> None:
        self.series = series
        self.asked: list[str] = []

    @property
    def client(self) -> PromClient:
        """This fake where the client is asked for (it answers `instants` alone)."""
        return cast(PromClient, self)

    def instants(
        self, exprs: Sequence[str], at_s: float
    ) -> list[list[tuple[dict[str, str], float]]]:
        out = []
        for expr in exprs:
            self.asked.append(expr)
            found = re.fullmatch(r"quantile_over_time\(([^,]+), \{(.*)\}\)", expr)
            assert found is not None, expr
            phi, names = float(found.group(1)), found.group(2).split("|")
            out.append([({"name": n}, prometheus_quantile(phi, self.series[n])) for n in names])
        return out


def name(labels: Mapping[str, str]) -> str:
    return labels["name"]


def ranged(everyone: Sequence[str]) -> Callable[[Collection[str] | None], str]:
    def cut(keys: Collection[str] | None) -> str:
        return "{" + "|".join(sorted(everyone if keys is None else keys)) + "}"

    return cut


def test_a_worked_example_p95_of_twenty_samples_is_the_nineteenth() -> None:
    # 20 samples 1 … 20 GiB: nearest rank of p95 is ceil(0.95 × 20) = 19, so 19 GiB; p50's is
    # ceil(0.5 × 20) = 10, so 10 GiB. quantile_over_time(0.95) would say 19.05 GiB and
    # quantile_over_time(0.5) 10.5 GiB: values no reading ever held.
    gib = 2**30
    samples = [float(i * gib) for i in range(1, 21)]
    assert prometheus_quantile(0.95, samples) == 19.05 * gib
    assert prometheus_quantile(0.5, samples) == 10.5 * gib
    prom = FakePrometheus({"a": samples})
    found = kth_samples(prom.client, 0.0, {"a": (20, (10, 19))}, ranged(["a"]), name)
    assert found == {"a": (10 * gib, 19 * gib)}
    # φ = (rank − 1)/(n − 1): 9/19 and 18/19.
    assert prom.asked == [
        f"quantile_over_time({9 / 19!r}, {{a}})",
        f"quantile_over_time({18 / 19!r}, {{a}})",
    ]


@pytest.mark.parametrize("n", [1, 2, 3, 7, 19, 20, 21, 100, 1439, 4319, 10080])
def test_every_count_lands_on_its_nearest_rank(n: int) -> None:
    # Distinct values of a card's size, scrambled: the one at the rank must come back exactly.
    samples = [float(150_754_820_096 - ((i * 7919) % n) * 8 * 2**20) for i in range(n)]
    ordered = sorted(samples)
    ranks = (nearest_rank(50, n), nearest_rank(95, n))
    found = kth_samples(
        FakePrometheus({"s": samples}).client, 0.0, {"s": (n, ranks)}, ranged(["s"]), name
    )
    for i, rank in enumerate(ranks):
        assert round(found["s"][i]) == ordered[rank - 1], rank


def test_series_of_other_counts_are_asked_cut_to_themselves() -> None:
    series = {
        "a": [float(v) for v in range(10)],
        "b": [float(v) for v in range(100, 110)],
        "c": [float(v) for v in range(1000, 1004)],  # stopped early: 4 samples
    }
    prom = FakePrometheus(series)
    wanted = {
        key: (len(values), (nearest_rank(50, len(values)),)) for key, values in series.items()
    }
    found = kth_samples(prom.client, 0.0, wanted, ranged(sorted(series)), name)
    assert {k: round(v[0]) for k, v in found.items()} == {"a": 4, "b": 104, "c": 1001}
    # The common count (10) over every series, the odd one out over its own series only;
    # answers for series of another count are not taken from a query whose φ is not theirs.
    assert prom.asked == [
        f"quantile_over_time({1 / 3!r}, {{c}})",
        f"quantile_over_time({4 / 9!r}, {{a|b|c}})",
    ]
