"""The arc-flow model's parts: graph, a known packing as flows (CBC's warm start), the LP
relaxation and reduced-cost fixing, against exhaustive search on small instances."""

from __future__ import annotations

import math
import random

import pytest

from placement.pack.greedy import first_fit_decreasing
from placement.pack.models import (
    _arc_flow_lp,
    _fix_by_reduced_cost,
    _solve_arc_flow,
    arc_flow_graph,
    solve_bin_packing,
    start_flows,
)
from tests.placement.pack.exhaustive import optimum_bins


def triplets(seed: int, bins: int) -> list[int]:
    # Triplets that fill a bin of 1000 exactly: first-fit-decreasing needs more bins.
    rng = random.Random(seed)
    sizes: list[int] = []
    for _ in range(bins):
        a = rng.randint(250, 499)
        b = rng.randint(250, min(499, 1000 - a - 250))
        sizes += [a, b, 1000 - a - b]
    return sizes


def test_a_first_fit_packing_becomes_balanced_flows() -> None:
    sizes = triplets(3, 10)
    graph = arc_flow_graph(sizes, 1000)
    assert graph is not None
    _, arcs, demand, label = graph
    packing = first_fit_decreasing(sizes, 1000)
    flows = start_flows(graph, 1000, [[sizes[i] for i in b] for b in packing])
    assert flows is not None
    # Every item on exactly one arc of its size, and flow conserved at every inner node.
    carried = {t: 0 for t in demand}
    balance: dict[int, int] = {}
    for (tail, head, t), f in zip(arcs, flows, strict=True):
        carried[t] += f
        balance[tail] = balance.get(tail, 0) - f
        balance[head] = balance.get(head, 0) + f
    assert carried == demand
    source = label[0]
    assert -balance[source] == sum(1 for b in packing if b)
    assert all(v >= 0 for node, v in balance.items() if node != source)


def test_a_packing_that_is_no_path_gives_no_flows() -> None:
    graph = arc_flow_graph([6, 5, 4], 10)
    assert graph is not None
    assert start_flows(graph, 10, [[6, 5]]) is None  # over capacity
    assert start_flows(graph, 10, [[7]]) is None  # no such size


@pytest.mark.parametrize("solver", ["cbc", "highs"])
def test_reduced_cost_fixing_keeps_an_optimal_packing(solver: str) -> None:
    # At target = optimum, the arcs kept still hold a packing of that many bins.
    sizes = triplets(5, 6)
    graph = arc_flow_graph(sizes, 1000)
    assert graph is not None
    relaxation = _arc_flow_lp(graph, 1000, solver, 30)
    assert relaxation is not None
    assert math.ceil(relaxation.value - 1e-5) == 6
    keep = _fix_by_reduced_cost(relaxation, 6)
    assert len(keep[0]) < len(graph[1])  # it fixed some arcs
    patterns, status, proven, _, _ = _solve_arc_flow(graph, 1000, solver, 30, 6, 6, None, keep)
    assert proven and status == "optimal"
    assert len(patterns) == 6
    assert sorted(w for p in patterns for w in p) == sorted(sizes)


def test_warm_started_solve_is_proven_and_valid() -> None:
    sizes = triplets(11, 12)
    greedy = first_fit_decreasing(sizes, 1000)
    assert len(greedy) > 12
    solution = solve_bin_packing(
        sizes, 1000, lower_bound=12, upper_bound=len(greedy), start=greedy, lp_first_arcs=0
    )
    assert solution is not None
    assert solution.proven
    assert len(solution.bins) == 12 == solution.lower_bound
    assert sorted(i for b in solution.bins for i in b) == list(range(len(sizes)))
    assert all(sum(sizes[i] for i in b) <= 1000 for b in solution.bins)


@pytest.mark.parametrize("seed", range(6))
def test_lp_path_matches_exhaustive_search(seed: int) -> None:
    rng = random.Random(seed)
    capacity = rng.randint(20, 40)
    sizes = [rng.randint(capacity // 5 + 1, capacity * 2 // 3) for _ in range(9)]
    greedy = first_fit_decreasing(sizes, capacity)
    solution = solve_bin_packing(
        sizes, capacity, lower_bound=0, upper_bound=len(greedy), start=greedy, lp_first_arcs=0
    )
    assert solution is not None and solution.proven
    assert len(solution.bins) == optimum_bins(sizes, capacity) == solution.lower_bound


def test_the_lp_bound_alone_proves_greedy_optimal() -> None:
    # Seven items of 3 in bins of 7: L2 = 3, the arc-flow LP is 3.5, so 4 bins are optimal.
    sizes = [3] * 7
    greedy = first_fit_decreasing(sizes, 7)
    solution = solve_bin_packing(
        sizes, 7, lower_bound=3, upper_bound=len(greedy), start=greedy, lp_first_arcs=0
    )
    assert solution is not None
    assert solution.proven and solution.status == "LP bound met"
    assert len(solution.bins) == 4 == solution.lower_bound
