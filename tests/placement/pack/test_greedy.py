"""First-fit-decreasing and best-fit-decreasing: valid packings, the textbook cases, groups kept apart."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement.pack.greedy import best_fit_decreasing, first_fit_decreasing, is_valid_packing
from tests.placement.pack.exhaustive import optimum_bins


def test_ffd_takes_items_largest_first_into_the_first_bin_with_room() -> None:
    sizes = [2, 5, 4, 7, 1, 3, 8]
    bins = first_fit_decreasing(sizes, 10)
    assert [[sizes[i] for i in b] for b in bins] == [[8, 2], [7, 3], [5, 4, 1]]


def test_bfd_prefers_the_fullest_bin_that_fits() -> None:
    # Before the 1: bins 8+2 (full), 7, 5+4. FFD takes the first with room (7),
    # BFD the fullest with room (5+4 → 10).
    sizes = [5, 1, 8, 4, 2, 7]
    ffd = first_fit_decreasing(sizes, 10)
    bfd = best_fit_decreasing(sizes, 10)
    assert [[sizes[i] for i in b] for b in ffd] == [[8, 2], [7, 1], [5, 4]]
    assert [[sizes[i] for i in b] for b in bfd] == [[8, 2], [7], [5, 4, 1]]


def test_groups_never_share_a_bin() -> None:
    # Two parts of one 2-card seat (3 each) would share a bin of 10 without the group.
    sizes = [3, 3, 3]
    groups = ["tp", "tp", None]
    bins = first_fit_decreasing(sizes, 10, groups=groups)
    assert is_valid_packing(bins, sizes, 10, groups)
    assert not any(0 in b and 1 in b for b in bins)
    assert len(bins) == 2
    assert is_valid_packing(best_fit_decreasing(sizes, 10, groups=groups), sizes, 10, groups)


def test_an_item_over_capacity_is_refused() -> None:
    with pytest.raises(ValueError, match="does not fit"):
        first_fit_decreasing([11], 10)
    with pytest.raises(ValueError, match="one entry per item"):
        first_fit_decreasing([1, 2], 10, groups=["a"])


def test_is_valid_packing_catches_each_fault() -> None:
    sizes = [6, 5]
    assert is_valid_packing([[0], [1]], sizes, 10)
    assert not is_valid_packing([[0, 1]], sizes, 10)  # over capacity
    assert not is_valid_packing([[0]], sizes, 10)  # item 1 missing
    assert not is_valid_packing([[0], [0, 1]], sizes, 12)  # item 0 twice
    assert not is_valid_packing([[0, 1]], sizes, 12, ["g", "g"])  # group twice


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(capacity=st.integers(min_value=4, max_value=30), data=st.data())
def test_greedy_packings_are_valid_and_within_the_ffd_guarantee(
    capacity: int, data: st.DataObject
) -> None:
    sizes = data.draw(st.lists(st.integers(min_value=1, max_value=capacity), max_size=9))
    best = optimum_bins(sizes, capacity)
    for pack in (first_fit_decreasing, best_fit_decreasing):
        bins = pack(sizes, capacity)
        assert is_valid_packing(bins, sizes, capacity)
        # Dósa (2007): FFD ≤ 11/9 · OPT + 6/9; BFD satisfies the same bound.
        assert 9 * len(bins) <= 11 * best + 6
