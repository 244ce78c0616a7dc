"""The one priority score of a placement: strict priority, then the most seats.

Each seat weighs more than every seat of lower priority together, so comparing sums compares
(seats placed per priority, highest first) lexicographically; the integer program, the
planner and the move search all rank placements by it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from placement.plan.problem import NewSeat


def priority_weights(seats: Sequence[NewSeat]) -> dict[str, float]:
    """Per seat, the weight of placing it, making priority strict.

    Levels ascending: W_0 = 2 (more than every tie-break term together, < 1.001), and
    W_k = Σ_{j<k} n_j·W_j + 2, so one seat of a level outweighs every seat below it. The
    weights are whole numbers, exact in floating point for any fleet's seat count.
    """
    counts: dict[int, int] = defaultdict(int)
    for new in seats:
        counts[new.seat.priority] += 1
    level_weight: dict[int, float] = {}
    below = 0.0
    for priority in sorted(counts):
        level_weight[priority] = below + 2.0
        below += counts[priority] * level_weight[priority]
    return {new.name: level_weight[new.seat.priority] for new in seats}


def score(names: Iterable[str], weights: Mapping[str, float]) -> float:
    """The priority score of placing the seats `names` (each counted once)."""
    return sum(weights[name] for name in dict.fromkeys(names))
