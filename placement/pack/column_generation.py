"""Column generation for bin packing: the Gilmore–Gomory LP bound, its duals, and a diving heuristic.

Works on item types (sizes in model units, demands) and one capacity; HiGHS solves the master LP
(`placement.solvers.ColumnLp`).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from placement.solvers import ColumnLp

# Reduced costs below this count as zero: HiGHS's dual feasibility tolerance is 1e-7.
PRICE_EPS = 1e-9
# A column value this close to an integer is that integer.
INT_EPS = 1e-6


def knapsack(
    values: Sequence[float], sizes: Sequence[int], bounds: Sequence[int], capacity: int
) -> tuple[float, list[int]]:
    """max Σ v_t·a_t subject to Σ w_t·a_t ≤ C, a_t ∈ {0..b_t}: (value, a).

    Bounded knapsack by binary splitting (copies 1, 2, 4, … of a type as 0/1 items) over a
    table of all capacities 0..C, one vectorised pass per 0/1 item; the choices are kept per
    pass and read back from C down.
    """
    best = np.zeros(capacity + 1)
    passes: list[tuple[int, int, np.ndarray]] = []
    for t, (value, size, bound) in enumerate(zip(values, sizes, bounds, strict=True)):
        if value <= PRICE_EPS or bound <= 0 or size > capacity:
            continue
        left, chunk = bound, 1
        while left > 0:
            copies = min(chunk, left)
            left -= copies
            chunk *= 2
            weight = copies * size
            if weight > capacity:
                break
            candidate = best[:-weight] + copies * value
            take = np.zeros(capacity + 1, dtype=bool)
            take[weight:] = candidate > best[weight:] + PRICE_EPS
            best = np.where(take, np.concatenate((best[:weight], candidate)), best)
            passes.append((t, copies, take))
    counts = [0] * len(sizes)
    room = capacity
    for t, copies, take in reversed(passes):
        if take[room]:
            counts[t] += copies
            room -= copies * sizes[t]
    return float(best[capacity]), counts


@dataclass(frozen=True)
class MasterLp:
    """The master LP where pricing stopped: value, duals per type, columns and their values."""

    value: float
    duals: tuple[float, ...]
    columns: tuple[tuple[int, ...], ...]  # per column, copies of each type
    weights: tuple[float, ...]  # per column, its LP value
    proven: bool  # no column prices out: `value` is the LP optimum, not a stopping point


class ColumnGeneration:
    """Gilmore–Gomory's LP for types t with size w_t and demand d_t, solved by pricing.

    Master: min Σ_p λ_p  s.t.  Σ_p a_tp·λ_p ≥ d_t  (π_t ≥ 0),  λ ≥ 0.
    Pricing: max Σ_t π_t·a_t  s.t.  Σ_t w_t·a_t ≤ C,  0 ≤ a_t ≤ d_t; a column enters while its
    value exceeds 1. The demands are row bounds, so a dive lowers them and re-solves from the
    same basis. Farley's bound z / max_p(π·a_p) is a valid LP lower bound at every iteration.
    """

    def __init__(self, sizes: Sequence[int], demand: Sequence[int], capacity: int) -> None:
        self.sizes = list(sizes)
        self.demand = list(demand)
        self.capacity = capacity
        self.lp = ColumnLp(self.demand)
        self.columns: list[tuple[int, ...]] = []
        self._known: set[tuple[int, ...]] = set()

    def add_column(self, counts: Sequence[int]) -> bool:
        """Add a pattern (copies per type) unless it is known; True if it was new."""
        key = tuple(counts)
        if key in self._known or not any(key):
            return False
        self._known.add(key)
        self.columns.append(key)
        index = np.array([t for t, a in enumerate(key) if a], dtype=np.int32)
        value = np.array([float(a) for a in key if a], dtype=np.float64)
        self.lp.add_column(index, value)
        return True

    def set_demand(self, demand: Sequence[int]) -> None:
        """New demands (a dive's residual); the basis is kept for a warm start."""
        self.demand = list(demand)
        for t, d in enumerate(self.demand):
            self.lp.set_lower(t, float(d))

    def solve_raised(self, demand: Sequence[float], *, deadline: float) -> MasterLp | None:
        """Solve with the rows' demands raised to `demand` (pricing keeps the integer bounds).

        Only for other dual vectors: any π ≥ 0 gives a valid bound (`DualBound`).
        """
        for t, d in enumerate(demand):
            self.lp.set_lower(t, float(d))
        return self.solve(deadline=deadline)

    def solve(self, *, deadline: float, early: bool = False) -> MasterLp | None:
        """Price columns in until none enters; None if the deadline passes first.

        `early`: stop as soon as Farley's bound z/max(π·a) and the master's value z have the
        same ceiling — the LP's ceiling is then known, which is all a dive asks.
        """
        while True:
            # SolverError, never a bound, when HiGHS refuses (`placement.solvers.ColumnLp`).
            answer = self.lp.solve()
            value = answer.value
            duals = [max(0.0, d) for d in answer.row_duals[: len(self.sizes)]]
            best, counts = knapsack(duals, self.sizes, self.demand, self.capacity)
            converged = best <= 1.0 + PRICE_EPS
            settled = converged or (early and lp_bound(value / best) >= lp_bound(value))
            # A best column already in is HiGHS's tolerances, not a new pattern: converged.
            if settled or not self.add_column(counts):
                return MasterLp(
                    value,
                    tuple(duals),
                    tuple(self.columns),
                    tuple(float(v) for v in answer.column_values),
                    converged or not settled,
                )
            if time.perf_counter() > deadline:
                return None


def lp_bound(value: float) -> int:
    """ceil of an LP bin count, forgiving the solver's last digits."""
    return math.ceil(value - INT_EPS)


def root_lp(
    sizes: Sequence[int],
    demand: Sequence[int],
    capacity: int,
    *,
    deadline: float,
    start: Sequence[Sequence[int]] = (),
) -> tuple[ColumnGeneration, MasterLp | None]:
    """The column-generation LP of the whole instance, seeded with `start` patterns and singletons."""
    cg = ColumnGeneration(sizes, demand, capacity)
    for counts in start:
        cg.add_column(counts)
    for t, d in enumerate(demand):
        single = [0] * len(sizes)
        single[t] = min(d, capacity // sizes[t])
        cg.add_column(single)
    return cg, cg.solve(deadline=deadline)


@dataclass(frozen=True)
class DualBound:
    """A lower bound from any duals π ≥ 0, and what reduced-cost fixing needs of it.

    For every packing of B bins, with M = max_p π·a_p over feasible patterns:
    B·M ≥ Σ_p λ_p·π·a_p ≥ π·d, so B ≥ π·d / M; and B ≥ π·d + Σ_p λ_p·(1 − π·a_p), where each
    term is ≥ 1 − M, so a pattern of reduced cost r appears in no packing of B bins unless
    r ≤ B − π·d + B·(M − 1).
    """

    value: float  # π·d
    best_pattern: float  # M
    bins: int  # ceil(π·d / M)

    def room(self, target: int) -> float:
        """The largest reduced cost a pattern of a packing of `target` bins can have."""
        return target - self.value + target * max(0.0, self.best_pattern - 1.0)


def dual_bound(
    sizes: Sequence[int], demand: Sequence[int], capacity: int, duals: Sequence[float]
) -> DualBound:
    """The bound of `DualBound` for these duals (M is priced exactly, not taken from the LP)."""
    value = sum(p * d for p, d in zip(duals, demand, strict=True))
    best, _ = knapsack(duals, sizes, demand, capacity)
    best = max(best, 1.0)
    return DualBound(value, best, lp_bound(value / best))


def dive(
    cg: ColumnGeneration,
    demand: Sequence[int],
    target: int,
    *,
    deadline: float,
    seed: int | None = 0,
) -> list[list[int]]:
    """Look for a packing of at most `target` bins by diving on the column-generation LP.

    Returns patterns (copies per type), or [] when none was found by the deadline. Columns
    whose LP value is at least 1 are fixed (their whole part), else one fractional column is
    rounded up; after each fix the residual LP is re-solved from the same basis (stopped once
    its ceiling is known), and the dive is abandoned once fixed bins plus the residual's
    ceil(LP) exceed `target`. The first dive rounds up the largest fractional column; the
    next ones pick among the three largest at random, weighted by their values (seeded, so a
    run repeats), until the deadline. `seed` None: the first dive only.
    """
    rng = None if seed is None else random.Random(seed)
    done = 0
    while time.perf_counter() < deadline and (rng is not None or done == 0):
        cg.set_demand(demand)
        patterns = _one_dive(cg, list(demand), target, rng if done else None, deadline)
        if patterns:
            return patterns
        done += 1
    return []


def _one_dive(
    cg: ColumnGeneration,
    residual: list[int],
    target: int,
    rng: random.Random | None,
    deadline: float,
) -> list[list[int]]:
    """One dive (see `dive`); [] when it fails or the deadline passes."""
    fixed: list[list[int]] = []
    while any(residual):
        cg.set_demand(residual)
        lp = cg.solve(deadline=deadline, early=True)
        if lp is None or len(fixed) + lp_bound(lp.value) > target:
            return []
        used = [
            (weight, column)
            for column, weight in zip(lp.columns, lp.weights, strict=True)
            if weight > INT_EPS
        ]
        chosen = [(column, math.floor(w + INT_EPS)) for w, column in used if w >= 1 - INT_EPS]
        if not chosen:
            top = sorted(used, reverse=True)[:3]
            if not top:
                return []
            pick = top[0] if rng is None else rng.choices(top, weights=[w for w, _ in top])[0]
            chosen = [(pick[1], 1)]
        for column, copies in chosen:
            for _ in range(copies):
                taken = [min(a, r) for a, r in zip(column, residual, strict=True)]
                if not any(taken):
                    break
                fixed.append(taken)
                residual = [r - a for r, a in zip(residual, taken, strict=True)]
    return fixed if len(fixed) <= target else []


def pattern_sizes(counts: Sequence[int], sizes: Sequence[int]) -> list[int]:
    """A pattern (copies per type) as the list of its item sizes."""
    return [w for w, a in zip(sizes, counts, strict=True) for _ in range(a)]


def _bounded_add(table: np.ndarray, size: int, value: float, bound: int) -> np.ndarray:
    """max over k ∈ 0..bound of table[u − k·size] + k·value, for every u (max-plus)."""
    left, chunk = bound, 1
    while left > 0 and size <= len(table) - 1:
        copies = min(chunk, left)
        left -= copies
        chunk *= 2
        weight = copies * size
        if weight > len(table) - 1:
            break
        shifted = np.full(len(table), -np.inf)
        shifted[weight:] = table[:-weight] + copies * value
        table = np.maximum(table, shifted)
    return table


def pattern_reduced_costs(
    sizes: Sequence[int],
    demand: Sequence[int],
    capacity: int,
    item_arcs: Sequence[tuple[int, int, int]],
    label: dict[int, int],
    duals: Sequence[float],
) -> tuple[np.ndarray, dict[int, float]]:
    """Per compressed arc, 1 − the best dual value of a pattern (within demands) using it.

    A pattern uses compressed arc (label(u), label(u + w_t), t) when, its items in decreasing
    size, those before one copy of t sum to u. Its value is at most
      F_t(u) + π_t + B_t(C − u − w_t),
    where F_t(u) is the best value of items of types before t plus up to d_t − 1 copies of t
    weighing exactly u, and B_t(r) the best of up to d_t − 1 copies of t and types after t
    weighing at most r (max-plus tables over 0..C). The loss arc at label(u) ends a pattern of
    exactly u: value ≤ F_n(u). Tighter than paths of the compressed graph, which can repeat a
    type past its demand. Returns (per item arc, per loss node).
    """
    n = len(sizes)
    cap = capacity
    after = [np.zeros(cap + 1)]  # after[k] = best of types n-k.. weighing ≤ r
    for t in range(n - 1, -1, -1):
        after.append(_bounded_add(after[-1], sizes[t], duals[t], demand[t]))
    after.reverse()  # after[t] = types t.. ; after[n] = nothing
    node_label = np.full(cap + 1, -1, dtype=np.int64)
    for u, lab in label.items():
        node_label[u] = lab
    arc_index = {arc: k for k, arc in enumerate(item_arcs)}
    best_arc = np.full(len(item_arcs), -np.inf)
    exact = np.full(cap + 1, -np.inf)
    exact[0] = 0.0
    for t in range(n):
        w, pi, d = sizes[t], duals[t], demand[t]
        before = _bounded_add(exact, w, pi, d - 1)
        tail = _bounded_add(after[t + 1], w, pi, d - 1)
        if w <= cap:
            starts = np.arange(0, cap - w + 1)
            values = before[starts] + pi + tail[cap - w - starts]
            tails = node_label[starts]
            heads = node_label[starts + w]
            ok = (tails >= 0) & (heads >= 0) & np.isfinite(values)
            for u_label, v_label, value in zip(tails[ok], heads[ok], values[ok], strict=True):
                k = arc_index.get((int(u_label), int(v_label), t))
                if k is not None and value > best_arc[k]:
                    best_arc[k] = value
        exact = _bounded_add(exact, w, pi, d)
    loss: dict[int, float] = {}
    for end in np.nonzero((node_label >= 0) & np.isfinite(exact))[0].tolist():
        lab = int(node_label[end])
        loss[lab] = min(loss.get(lab, math.inf), 1.0 - float(exact[end]))
    return 1.0 - best_arc, loss
