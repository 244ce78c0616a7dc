"""Lower bounds on the number of bins (cards) a bin-packing instance needs, in integer sizes.

L1 = ceil(Σ w / C) and Martello–Toth L2; both are proven bounds that `pack` compares its answer to.
"""

from __future__ import annotations

from collections.abc import Sequence


def _check(sizes: Sequence[int], capacity: int) -> None:
    if capacity <= 0:
        raise ValueError(f"capacity must be positive, got {capacity}")
    for size in sizes:
        if size < 0 or size > capacity:
            raise ValueError(f"item size {size} is outside [0, capacity {capacity}]")


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def l1_bound(sizes: Sequence[int], capacity: int) -> int:
    """ceil(Σ sizes / capacity): the continuous bound."""
    _check(sizes, capacity)
    return _ceil_div(sum(sizes), capacity)


def l2_bound(sizes: Sequence[int], capacity: int) -> int:
    """Martello–Toth L2 (1990): max over K in [0, C/2] of

        |J1| + |J2| + max(0, ceil((Σ_{J3} w − (|J2|·C − Σ_{J2} w)) / C))

    with J1 = {w > C − K}, J2 = {C/2 < w ≤ C − K}, J3 = {K ≤ w ≤ C/2}. Items in J1 and J2
    each need a bin of their own; J3 items can only use the room left in J2's bins. Only
    K = 0 and K = an item size ≤ C/2 can change the value, so only those are tried.
    """
    _check(sizes, capacity)
    items = [w for w in sizes if w > 0]
    if not items:
        return 0
    best = l1_bound(items, capacity)
    # 2w ≤ C keeps the arithmetic in integers where the paper writes w ≤ C/2.
    candidates = sorted({0} | {w for w in items if 2 * w <= capacity})
    for k in candidates:
        j1 = j2 = j2_sum = j3_sum = 0
        for w in items:
            if w > capacity - k:
                j1 += 1
            elif 2 * w > capacity:
                j2 += 1
                j2_sum += w
            elif w >= k:
                j3_sum += w
        spill = j3_sum - (j2 * capacity - j2_sum)
        value = j1 + j2 + max(0, _ceil_div(spill, capacity))
        best = max(best, value)
    return best
