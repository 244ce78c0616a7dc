"""First-fit-decreasing and best-fit-decreasing: the greedy baselines for packing seats onto cards.

`pack` starts from them (an upper bound), the benchmarks compare the solver against them.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

Bins = list[list[int]]


def _order(sizes: Sequence[int], capacity: int) -> list[int]:
    if capacity <= 0:
        raise ValueError(f"capacity must be positive, got {capacity}")
    for i, size in enumerate(sizes):
        if size < 0 or size > capacity:
            raise ValueError(f"item {i} of size {size} does not fit a bin of {capacity}")
    # Decreasing size; ties keep input order, so the answer is deterministic.
    return sorted(range(len(sizes)), key=lambda i: (-sizes[i], i))


def _fits(
    item: int,
    load: int,
    members: set[Hashable],
    sizes: Sequence[int],
    capacity: int,
    groups: Sequence[Hashable | None] | None,
) -> bool:
    if load + sizes[item] > capacity:
        return False
    # Parts of one multi-card seat share a group: they must land on different cards.
    return groups is None or groups[item] is None or groups[item] not in members


def _pack(
    sizes: Sequence[int],
    capacity: int,
    groups: Sequence[Hashable | None] | None,
    best: bool,
) -> Bins:
    if groups is not None and len(groups) != len(sizes):
        raise ValueError("groups must give one entry per item")
    bins: Bins = []
    loads: list[int] = []
    members: list[set[Hashable]] = []
    for item in _order(sizes, capacity):
        chosen = -1
        for b in range(len(bins)):
            if not _fits(item, loads[b], members[b], sizes, capacity, groups):
                continue
            if not best:
                chosen = b
                break
            if chosen < 0 or loads[b] > loads[chosen]:
                chosen = b
        if chosen < 0:
            bins.append([])
            loads.append(0)
            members.append(set())
            chosen = len(bins) - 1
        bins[chosen].append(item)
        loads[chosen] += sizes[item]
        group = groups[item] if groups is not None else None
        if group is not None:
            members[chosen].add(group)
    return bins


def first_fit_decreasing(
    sizes: Sequence[int], capacity: int, *, groups: Sequence[Hashable | None] | None = None
) -> Bins:
    """Items by decreasing size, each into the first bin with room; bins as lists of item indices.

    Items with the same non-None `groups` entry never share a bin.
    """
    return _pack(sizes, capacity, groups, best=False)


def best_fit_decreasing(
    sizes: Sequence[int], capacity: int, *, groups: Sequence[Hashable | None] | None = None
) -> Bins:
    """Items by decreasing size, each into the fullest bin that still has room for it."""
    return _pack(sizes, capacity, groups, best=True)


def is_valid_packing(
    bins: Sequence[Sequence[int]],
    sizes: Sequence[int],
    capacity: int,
    groups: Sequence[Hashable | None] | None = None,
) -> bool:
    """Every item exactly once, no bin over capacity, no group twice in one bin."""
    seen = sorted(i for b in bins for i in b)
    if seen != list(range(len(sizes))):
        return False
    for b in bins:
        if sum(sizes[i] for i in b) > capacity:
            return False
        if groups is not None:
            named = [groups[i] for i in b if groups[i] is not None]
            if len(named) != len(set(named)):
                return False
    return True
