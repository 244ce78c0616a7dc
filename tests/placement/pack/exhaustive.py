"""Exhaustive bin packing for tiny instances: the ground truth the bounds, greedy and pack are tested on."""

from __future__ import annotations

from collections.abc import Hashable, Sequence


def optimum_bins(
    sizes: Sequence[int], capacity: int, groups: Sequence[Hashable | None] | None = None
) -> int:
    """The fewest bins, by trying every bin for every item (largest first, symmetric bins cut)."""
    order = sorted(range(len(sizes)), key=lambda i: -sizes[i])
    best = len(sizes)
    loads: list[int] = []
    members: list[set[Hashable]] = []

    def place(k: int) -> None:
        nonlocal best
        if len(loads) >= best:
            return
        if k == len(order):
            best = len(loads)
            return
        item = order[k]
        group = groups[item] if groups is not None else None
        seen: set[int] = set()
        for b in range(len(loads)):
            if loads[b] + sizes[item] > capacity or loads[b] in seen:
                continue
            if group is not None and group in members[b]:
                continue
            if groups is None:
                seen.add(loads[b])  # without groups, bins of equal load are interchangeable
            loads[b] += sizes[item]
            if group is not None:
                members[b].add(group)
            place(k + 1)
            loads[b] -= sizes[item]
            if group is not None:
                members[b].discard(group)
        loads.append(sizes[item])
        members.append({group} if group is not None else set())
        place(k + 1)
        loads.pop()
        members.pop()

    if not sizes:
        return 0
    place(0)
    return best
