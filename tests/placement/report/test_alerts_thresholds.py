"""The thresholds the report's flags and the alerts share (placement/report/thresholds.py)."""

from __future__ import annotations

import pytest

from placement.fit.reserves import reserve_allowance_bytes
from placement.report import thresholds
from placement.report.advice import unexplained_now
from placement.report.rows import DriftThreshold, parse_threshold
from seats.units import GiB, MiB
from tests.placement.report.test_advice import card


def test_the_report_defaults_are_the_shared_ones() -> None:
    default = DriftThreshold()
    assert (default.percent, default.size_bytes) == (
        thresholds.DRIFT_PERCENT,
        thresholds.DRIFT_BYTES,
    )
    assert parse_threshold("5%,1GiB") == default


@pytest.mark.parametrize(
    "threshold", [DriftThreshold(), DriftThreshold(10.0, None), DriftThreshold(None, 2 * GiB)]
)
@pytest.mark.parametrize("declared", [638 * MiB, 10740 * MiB, 30105 * MiB, 93 * GiB])
def test_the_drift_bound_flags_exactly_what_the_report_flags(
    threshold: DriftThreshold, declared: int
) -> None:
    bound = thresholds.drift_bound_bytes(declared, threshold.percent, threshold.size_bytes)
    # The first whole byte that flags.
    edge = int(bound) if float(bound).is_integer() else int(bound) + 1
    for drift in (edge - 1, edge, edge + 1, -(edge - 1), -edge, 3 * edge, MiB):
        assert threshold.flags(drift, declared) == (abs(drift) >= bound), drift


def test_a_threshold_needs_a_bound() -> None:
    with pytest.raises(ValueError, match="percentage or a size"):
        thresholds.drift_bound_bytes(GiB, None, None)


def test_foreign_memory_is_flagged_from_a_gib_in_the_report_too() -> None:
    assert not thresholds.foreign_memory_flags(None)
    assert not thresholds.foreign_memory_flags(GiB - 1)
    assert thresholds.foreign_memory_flags(GiB)
    assert unexplained_now(None, card(GiB - 1)) is None  # type: ignore[arg-type]
    assert unexplained_now(None, card(GiB)) is not None  # type: ignore[arg-type]


def test_reserve_allowance_and_margin() -> None:
    assert reserve_allowance_bytes(95 * GiB, None) == 0  # a whole-card reserve
    assert reserve_allowance_bytes(95 * GiB, 80 * GiB) == 15 * GiB
    assert reserve_allowance_bytes(95 * GiB, 96 * GiB) == 0
    assert thresholds.below_margin(255 * MiB, 256 * MiB)
    assert not thresholds.below_margin(256 * MiB, 256 * MiB)
    assert not thresholds.below_margin(0, 0)
