"""L1 and Martello–Toth L2 lower bounds: hand cases and, against exhaustive search, never above the optimum."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement.pack.bounds import l1_bound, l2_bound
from tests.placement.pack.exhaustive import optimum_bins


def test_l1_is_the_ceiling_of_the_total() -> None:
    assert l1_bound([5, 5, 5], 10) == 2
    assert l1_bound([10, 10], 10) == 2
    assert l1_bound([], 10) == 0


def test_l2_counts_big_items_one_per_bin() -> None:
    # Three items over half the bin: L1 says 2 (sum 18 of 10 per bin), each needs its own bin.
    assert l1_bound([6, 6, 6], 10) == 2
    assert l2_bound([6, 6, 6], 10) == 3


def test_l2_spills_small_items_past_the_big_ones_room() -> None:
    # K = 3: J2 = {6, 6} leaves 8 of room, J3 = five 3s (15): 2 + ceil((15 − 8) / 10) = 3,
    # which is the optimum (6+3, 6+3, 3+3+3).
    sizes = [6, 6, 3, 3, 3, 3, 3]
    assert l2_bound(sizes, 10) == 3
    assert optimum_bins(sizes, 10) == 3


def test_l2_reaches_the_hard_case_l1_misses() -> None:
    # K = 4: J1 = {7, 7} (over 10 − 4 = 6), J3 = {4, 4, 4}: the 4s cannot join a 7.
    sizes = [7, 7, 4, 4, 4]
    assert l1_bound(sizes, 10) == 3
    assert l2_bound(sizes, 10) == 4
    assert optimum_bins(sizes, 10) == 4


def test_l2_refuses_an_item_over_capacity() -> None:
    with pytest.raises(ValueError, match="outside"):
        l2_bound([11], 10)
    with pytest.raises(ValueError, match="capacity must be positive"):
        l1_bound([1], 0)


@settings(max_examples=150, deadline=None)
@given(
    capacity=st.integers(min_value=5, max_value=40),
    data=st.data(),
)
@pytest.mark.slow
def test_bounds_never_exceed_the_optimum(capacity: int, data: st.DataObject) -> None:
    sizes = data.draw(
        st.lists(st.integers(min_value=1, max_value=capacity), min_size=0, max_size=8)
    )
    best = optimum_bins(sizes, capacity)
    assert l1_bound(sizes, capacity) <= l2_bound(sizes, capacity) <= best
