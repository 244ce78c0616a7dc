"""Column generation for pack: the pricing knapsack, the dual bound and pattern reduced costs
against enumeration, the dive, and the whole column path against exhaustive search."""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement.pack import column_generation as pack_cg
from placement.pack.greedy import first_fit_decreasing
from placement.pack.models import MAX_PRICING_UNITS, arc_flow_graph, solve_bin_packing
from tests.placement.pack.exhaustive import optimum_bins
from tests.placement.pack.test_models import triplets


def patterns(sizes: list[int], demand: list[int], capacity: int) -> list[tuple[int, ...]]:
    """Every non-empty pattern (copies per type) within demands and capacity."""
    ranges = [range(d + 1) for d in demand]
    return [
        counts
        for counts in itertools.product(*ranges)
        if any(counts) and sum(a * w for a, w in zip(counts, sizes, strict=True)) <= capacity
    ]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 9), st.integers(1, 3), st.floats(0, 1)), min_size=1, max_size=5
    ),
    st.integers(1, 20),
)
def test_knapsack_is_the_best_pattern(types: list[tuple[int, int, float]], capacity: int) -> None:
    sizes = [w for w, _, _ in types]
    demand = [d for _, d, _ in types]
    values = [v for _, _, v in types]
    best, counts = pack_cg.knapsack(values, sizes, demand, capacity)
    enumerated = max(
        (
            sum(a * v for a, v in zip(p, values, strict=True))
            for p in patterns(sizes, demand, capacity)
        ),
        default=0.0,
    )
    # Values ≤ 1e-9 are skipped as zero duals: the best may fall short by that much per item.
    assert best == pytest.approx(enumerated, abs=1e-7)
    assert all(0 <= a <= d for a, d in zip(counts, demand, strict=True))
    assert sum(a * w for a, w in zip(counts, sizes, strict=True)) <= capacity
    assert sum(a * v for a, v in zip(counts, values, strict=True)) == pytest.approx(best, abs=1e-7)


def instance(seed: int) -> tuple[list[int], int]:
    rng = random.Random(seed)
    capacity = rng.randint(20, 40)
    return [
        rng.randint(capacity // 6 + 1, capacity * 2 // 3) for _ in range(rng.randint(6, 9))
    ], capacity


@pytest.mark.parametrize("seed", range(8))
def test_any_duals_bound_the_optimum(seed: int) -> None:
    # The bound holds for every π ≥ 0, optimal or not: the dive's and the raised LPs' duals too.
    sizes, capacity = instance(seed)
    counter = Counter(sizes)
    types = sorted(counter, reverse=True)
    demand = [counter[w] for w in types]
    optimum = optimum_bins(sizes, capacity)
    rng = random.Random(seed)
    for _ in range(20):
        duals = [rng.uniform(0, w / capacity * 1.5) for w in types]
        assert pack_cg.dual_bound(types, demand, capacity, duals).bins <= optimum
    _, root = pack_cg.root_lp(types, demand, capacity, deadline=math.inf)
    assert root is not None and root.proven
    assert pack_cg.dual_bound(types, demand, capacity, root.duals).bins <= optimum


@pytest.mark.parametrize("seed", range(6))
def test_pattern_reduced_costs_never_exceed_a_pattern_through_the_arc(seed: int) -> None:
    # Each pattern, items in decreasing size, is a path; every arc on it must be costed at
    # most 1 − its value (else fixing could cut an optimal packing), and with every demand 1
    # the best such pattern is found exactly.
    rng = random.Random(seed)
    capacity = rng.randint(15, 30)
    distinct = seed % 2 == 0
    sizes = (
        rng.sample(range(2, capacity), 7)
        if distinct
        else [rng.randint(2, capacity // 2) for _ in range(8)]
    )
    graph = arc_flow_graph(sizes, capacity)
    assert graph is not None
    types, arcs, demand_map, label = graph
    demand = [demand_map[t] for t in range(len(types))]
    duals = [rng.uniform(0, 0.6) for _ in types]
    costs, loss = pack_cg.pattern_reduced_costs(types, demand, capacity, arcs, label, duals)
    index = {arc: k for k, arc in enumerate(arcs)}
    best_through = [-math.inf] * len(arcs)
    best_ending: dict[int, float] = {}
    for counts in patterns(types, demand, capacity):
        value = sum(a * p for a, p in zip(counts, duals, strict=True))
        node = 0
        for t, a in enumerate(counts):
            for _ in range(a):
                k = index[(label[node], label[node + types[t]], t)]
                best_through[k] = max(best_through[k], value)
                node += types[t]
        if label[node] != capacity:
            best_ending[label[node]] = max(best_ending.get(label[node], -math.inf), value)
    for k, cost in enumerate(costs):
        if best_through[k] > -math.inf:
            assert cost <= 1 - best_through[k] + 1e-9
            if distinct:
                assert cost == pytest.approx(1 - best_through[k], abs=1e-9)
    for node, value in best_ending.items():
        assert loss[node] <= 1 - value + 1e-9


def test_the_dive_finds_a_perfect_packing() -> None:
    sizes = triplets(7, 15)
    counter = Counter(sizes)
    types = sorted(counter, reverse=True)
    demand = [counter[w] for w in types]
    cg, root = pack_cg.root_lp(types, demand, 1000, deadline=math.inf)
    assert root is not None and pack_cg.lp_bound(root.value) == 15
    found = pack_cg.dive(cg, demand, 15, deadline=math.inf)
    assert len(found) == 15
    items = sorted(w for p in found for w in pack_cg.pattern_sizes(p, types))
    assert items == sorted(sizes)
    assert all(sum(pack_cg.pattern_sizes(p, types)) <= 1000 for p in found)


@pytest.mark.parametrize("columns", [True, False])
@pytest.mark.parametrize("seed", range(6))
def test_both_lp_paths_match_exhaustive_search(seed: int, columns: bool) -> None:
    # columns=False forces the arc-flow LP path kept for capacities too fine to price over.
    sizes, capacity = instance(seed + 100)
    greedy = first_fit_decreasing(sizes, capacity)
    solution = solve_bin_packing(
        sizes,
        capacity,
        upper_bound=len(greedy),
        start=greedy,
        lp_first_arcs=0,
        max_pricing_units=MAX_PRICING_UNITS if columns else 0,
    )
    assert solution is not None and solution.proven
    assert len(solution.bins) == optimum_bins(sizes, capacity) == solution.lower_bound
    assert sorted(i for b in solution.bins for i in b) == list(range(len(sizes)))
    assert all(sum(sizes[i] for i in b) <= capacity for b in solution.bins)


def test_column_path_keeps_parts_of_a_multi_card_seat_apart() -> None:
    # Two parts of one seat (group "a") must sit in different bins, whatever the patterns say;
    # first-fit-decreasing needs 3 bins here, the optimum is (4, 3a, 3) twice.
    sizes = [4, 4, 3, 3, 3, 3]
    groups: list[str | None] = [None, None, "a", "a", None, None]
    greedy = first_fit_decreasing(sizes, 10, groups=groups)
    assert len(greedy) == 3
    solution = solve_bin_packing(
        sizes, 10, groups=groups, lower_bound=2, upper_bound=3, start=greedy, lp_first_arcs=0
    )
    assert solution is not None and solution.proven
    assert len(solution.bins) == optimum_bins(sizes, 10, groups) == 2
    for members in solution.bins:
        assert [groups[i] for i in members].count("a") <= 1
