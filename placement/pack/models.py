"""Integer programs for bin packing: Valério de Carvalho's arc-flow model, and an assignment model.

`pack` calls `solve_bin_packing` only when the greedy answer exceeds the lower bound; the models
are written against `placement.solvers`.
"""

from __future__ import annotations

import math
import random
import time
from collections import Counter, defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import cast

import numpy as np

from placement import solvers
from placement.pack import column_generation as pack_cg
from placement.solvers import (
    SOLVERS,
    Model,
    Settings,
    SolverName,
    Var,
    reduced_cost,
    total,
    value_of,
)

MAX_ARCS = 2_000_000
# Graphs of more arcs get the LP relaxation and reduced-cost fixing before the integer program.
# Below it the whole integer program is proven in well under a second (u120, t60: ≤ 2,600 arcs)
# and the extra solver call only adds time (u120 median 0.35 s → 0.42 s, measured here).
LP_FIRST_ARCS = 10_000
# Column generation prices over a table of this many capacity units at most, and its
# reduced-cost fixing keeps one float table per item size (types × units cells, 8 bytes each).
MAX_PRICING_UNITS = 2_000_000
MAX_TABLE_CELLS = 20_000_000
# Reduced-cost fixing: dual vectors tried (the LP's, then LPs with demands raised by up to
# RAISE each), within this share of the time limit.
FIXING_DUALS = 12
FIXING_SHARE = 0.1
RAISE = 0.3
# Share of the time left that the dives may take. The first dive runs after fixing; more
# dives only when fixing leaves more arcs than DIVE_ABOVE_ARCS (below it the arc-flow program
# alone answers in about a second, often proving that the bound cannot be met).
DIVE_SHARE = 0.4
DIVE_ABOVE_ARCS = 2_000
# CBC does not stop its root LP at the time limit: a model this large is not started at all.
MAX_ASSIGNMENT_VARS = 50_000


@dataclass(frozen=True)
class BinSolution:
    """A packing the solver found: bins of item indices, and how much it proved."""

    bins: tuple[tuple[int, ...], ...]
    proven: bool  # the solver proved no packing uses fewer bins
    model: str  # "arc-flow" or "assignment"
    status: str  # "optimal", "time limit" …
    unit: int  # bytes per model unit (the gcd of the sizes)
    arcs: int  # arcs of the arc-flow graph, or x variables of the assignment model
    build_seconds: float
    solve_seconds: float
    lower_bound: int  # the best proven bound: the caller's, L_LP, or the proven optimum
    note: str | None = None


def _run(
    model: Model,
    solver: str,
    time_limit: float,
    *,
    presolve: bool = True,
    start: Sequence[tuple[Var, float]] = (),
) -> tuple[str, bool, bool]:
    """Solve; (status text, has an integer solution, proven optimal).

    CBC does not watch its limit in the root LP of a large graph and may run past it; HiGHS
    stops at it. `start` is CBC's first incumbent.
    """
    # presolve=False: on the arc-flow model CBC's presolve costs more than it saves
    # (Hard28 BPP13, measured here: optimal in 39 s without it, none in 130 s with it).
    settings = Settings(cast(SolverName, solver), time_limit, presolve=presolve)
    outcome = solvers.solve(model, settings, start=start, stdout="stderr")
    if outcome.status == "infeasible":
        # CBC's "Integer infeasible" leaves the solution at "none found": ask the status.
        return "infeasible", False, False
    if outcome.solution == "optimal":
        return "optimal", True, True
    if outcome.solution == "feasible":
        return "time limit", True, False
    if outcome.solution == "infeasible":
        return "infeasible", False, False
    return "time limit, no solution", False, False


def _value(var: Var) -> int:
    value = value_of(var)
    return 0 if value is None else round(value)


# (item sizes, decreasing, one per type; item arcs (tail, head, type index); demand per type
# index; the compressed label of each uncompressed node, fill level 0..capacity).
Graph = tuple[list[int], list[tuple[int, int, int]], dict[int, int], dict[int, int]]


def arc_flow_graph(sizes: Sequence[int], capacity: int, max_arcs: int = MAX_ARCS) -> Graph | None:
    """The reduced arc-flow graph over nodes 0..capacity; None once it passes `max_arcs` arcs.

    Returns (item sizes, decreasing, one per type; item arcs (tail, head, type index);
    demand per type index; node labels). An item arc of type t leaves node 0 or a node reached by an
    arc of a type no smaller than t, in chains of at most demand(t) arcs (Valério de
    Carvalho 1999): every packing, its items taken in decreasing size, is still a path.
    """
    demand_by_size = Counter(sizes)
    types = sorted(demand_by_size, reverse=True)
    demand = {t: demand_by_size[w] for t, w in enumerate(types)}
    reached = {0}
    arcs: set[tuple[int, int, int]] = set()
    for t, w in enumerate(types):
        new: set[int] = set()
        for start in reached:
            node = start
            for _ in range(demand[t]):
                if node + w > capacity:
                    break
                arcs.add((node, node + w, t))
                node += w
                new.add(node)
        reached |= new
        if len(arcs) > max_arcs:
            return None
    compressed, label = _compress(arcs, types, capacity)
    return types, compressed, demand, label


def _compress(
    arcs: set[tuple[int, int, int]], types: list[int], capacity: int
) -> tuple[list[tuple[int, int, int]], dict[int, int]]:
    """Relabel each node u as capacity − (heaviest path from u to a full bin); merge equal labels.

    Brandão and Pedroso's main compression (2016): a label rises by at least the item size
    along every arc, so every path still fits a bin, and every packing is still a path,
    while nodes that can be finished by the same items fold into one.
    """
    heaviest: dict[int, int] = {}
    out: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for tail, head, t in arcs:
        out[tail].append((head, types[t]))
    nodes = sorted({0} | {h for _, h, _ in arcs} | set(out), reverse=True)
    for node in nodes:
        heaviest[node] = max((w + heaviest[h] for h, w in out[node]), default=0)
    label = {node: capacity - heaviest[node] for node in nodes}
    return sorted({(label[tail], label[head], t) for tail, head, t in arcs}), label


def start_flows(graph: Graph, capacity: int, patterns: Sequence[Sequence[int]]) -> list[int] | None:
    """Flow per item arc of a known packing (patterns of sizes in model units); None if one is no path.

    Each bin, its items in decreasing size, is a path of the uncompressed graph (see
    `arc_flow_graph`), and the compressed arc is the one between the labels of its ends.
    """
    types, item_arcs, demand, label = graph
    index = {arc: k for k, arc in enumerate(item_arcs)}
    type_of = {w: t for t, w in enumerate(types)}
    flows = [0] * len(item_arcs)
    for pattern in patterns:
        node = 0
        for w in sorted(pattern, reverse=True):
            t = type_of.get(w)
            k = None if t is None else index.get((label.get(node, -1), label.get(node + w, -1), t))
            if k is None or node + w > capacity:
                return None
            flows[k] += 1
            node += w
    if any(flows[k] > demand[t] for k, (_, _, t) in enumerate(item_arcs)):
        return None
    return flows


@dataclass(frozen=True)
class _Relaxation:
    """The arc-flow LP's optimum and reduced costs (per item arc, and per loss arc by its node)."""

    value: float
    arc_costs: tuple[float | None, ...]
    loss_costs: dict[int, float | None]


# Reduced-cost fixing keeps an arc when its reduced cost is within the gap plus this slack, so
# the solver's dual tolerances (1e-7) can never drop an arc some packing of the target needs.
FIX_SLACK = 1e-5


def _arc_flow_lp(graph: Graph, capacity: int, solver: str, time_limit: float) -> _Relaxation | None:
    """The LP relaxation of the arc-flow model; None when it is not solved to optimality."""
    arc_flow = _arc_flow_problem(graph, capacity, 0, None, relax=True)
    # Primal simplex: 4 s on Hard28 BPP13 where CBC's default dual simplex takes 12 s.
    settings = Settings(cast(SolverName, solver), time_limit, mip=False, primal_simplex=True)
    outcome = solvers.solve(arc_flow.model, settings, stdout="stderr")
    value = value_of(arc_flow.bins)
    if outcome.status != "optimal" or value is None:
        return None
    return _Relaxation(
        float(value),
        tuple(reduced_cost(var) for var in arc_flow.flow),
        {node: reduced_cost(var) for node, var in zip(arc_flow.loss, arc_flow.slack, strict=True)},
    )


def _fix_by_reduced_cost(
    relaxation: _Relaxation, target: int
) -> tuple[frozenset[int], frozenset[int]]:
    """The arcs a packing of at most `target` bins may use: (item-arc indices, loss-arc nodes).

    Any packing's bin count is the LP optimum plus Σ reduced cost × flow (the relaxation's
    reduced costs are ≥ 0), so an arc whose reduced cost exceeds target − LP carries no flow in
    any packing of `target` bins or fewer. An arc without a reduced cost is kept.
    """
    room = target - relaxation.value + FIX_SLACK
    arcs = frozenset(
        k for k, cost in enumerate(relaxation.arc_costs) if cost is None or cost <= room
    )
    loss = frozenset(n for n, cost in relaxation.loss_costs.items() if cost is None or cost <= room)
    return arcs, loss


@dataclass(frozen=True)
class _ArcFlow:
    """The arc-flow model and our maps to its variables (solver names are never parsed)."""

    model: Model
    flow: list[Var]  # per item arc
    slack: list[Var]  # per loss arc, by its tail node in `loss`
    bins: Var  # z
    loss: list[int]
    source: int
    item_arcs: list[tuple[int, int, int]]


def _arc_flow_problem(
    graph: Graph,
    capacity: int,
    lower_bound: int,
    upper_bound: int | None,
    *,
    relax: bool = False,
    keep: tuple[frozenset[int], frozenset[int]] | None = None,
) -> _ArcFlow:
    """The arc-flow model over `graph` (Valério de Carvalho 1999) and our maps to its variables.

    Variables: f_a ∈ {0..d_t} on each item arc a = (u, v, t); l_u ≥ 0 on the loss arc from
    node u to the sink C; z ∈ [lower_bound, upper_bound] the bins.
      min z  s.t.  (1) z leaves node 0, z reaches the sink, in = out at every other node;
                   (2) Σ_{a of type t} f_a ≥ d_t for every item type t.
    `relax`: continuous, and no upper bounds on flows, so the reduced costs are all ≥ 0.
    `keep` = (item-arc indices, loss-arc nodes) restricts it to those arcs (reduced-cost fixing).
    """
    _, all_arcs, demand, label = graph
    item_arcs = all_arcs if keep is None else [all_arcs[k] for k in sorted(keep[0])]
    source = label[0]
    nodes = sorted({source} | {h for _, h, _ in item_arcs} | {t for t, _, _ in item_arcs})
    # Loss arcs: one from each node short of a full bin straight to the sink, the fewest
    # that let every path end at `capacity` (unused room is loss).
    sink = capacity
    loss = [n for n in nodes if n != sink and (keep is None or n in keep[1])]
    integer = not relax
    model = Model("arc_flow")
    flow = [
        model.variable(f"f{k}", 0, None if relax else demand[t], integer=integer)
        for k, (_, _, t) in enumerate(item_arcs)
    ]
    slack = [model.variable(f"l{k}", 0, integer=integer) for k in range(len(loss))]
    bins = model.variable("z", lower_bound, upper_bound, integer=integer)

    # Objective: the number of bins, which is the flow out of node 0.
    model.objective(bins)
    out_arcs: dict[int, list[Var]] = defaultdict(list)
    in_arcs: dict[int, list[Var]] = defaultdict(list)
    for var, (tail, head, _) in zip(flow, item_arcs, strict=True):
        out_arcs[tail].append(var)
        in_arcs[head].append(var)
    for var, tail in zip(slack, loss, strict=True):
        out_arcs[tail].append(var)
        in_arcs[sink].append(var)

    # 1. Flow conservation: z leaves node 0, z reaches the sink, every other node balances.
    for node in nodes:
        if node == source:
            model.add(total(out_arcs[node]) == bins)
        elif node != sink:
            model.add(total(in_arcs[node]) == total(out_arcs[node]))
    if sink != source:
        model.add(total(in_arcs[sink]) == bins)

    # 2. Demand: each item size is carried by at least as many arcs as there are items of it
    #    (a surplus arc is an empty slot, dropped when bins are read back).
    by_type: dict[int, list[Var]] = defaultdict(list)
    for var, (_, _, t) in zip(flow, item_arcs, strict=True):
        by_type[t].append(var)
    for t, need in demand.items():
        model.add(total(by_type[t]) >= need)
    return _ArcFlow(model, flow, slack, bins, loss, source, item_arcs)


def _solve_arc_flow(
    graph: Graph,
    capacity: int,
    solver: str,
    time_limit: float,
    lower_bound: int,
    upper_bound: int,
    start: Sequence[Sequence[int]] | None = None,
    keep: tuple[frozenset[int], frozenset[int]] | None = None,
) -> tuple[list[list[int]], str, bool, float, float]:
    """The arc-flow integer program in model units: (size patterns, status, proven, build s, solve s).

    `start`, a known packing as size patterns, is handed to CBC as its first incumbent;
    `keep` restricts the model to those arcs (see `_arc_flow_problem`).
    """
    started = time.perf_counter()
    arc_flow = _arc_flow_problem(graph, capacity, lower_bound, upper_bound, keep=keep)
    # 3. The known packing as CBC's first incumbent: its bin count is the upper bound already,
    #    but its flows give CBC's improvement heuristics a point to search around.
    incumbent: list[tuple[Var, float]] = []
    if (
        start is not None
        and keep is None
        and solver == "cbc"
        and lower_bound <= len(start) <= upper_bound
    ):
        incumbent = _incumbent(graph, capacity, start, arc_flow)
    built = time.perf_counter()

    status, found, proven = _run(
        arc_flow.model, solver, time_limit, presolve=False, start=incumbent
    )
    solved = time.perf_counter()
    if not found:
        return [], status, False, built - started, solved - built
    return _read_bins(graph[0], capacity, arc_flow), status, proven, built - started, solved - built


def _incumbent(
    graph: Graph, capacity: int, start: Sequence[Sequence[int]], arc_flow: _ArcFlow
) -> list[tuple[Var, float]]:
    """(variable, value) of a known packing's flows, loss flows and z; [] if it is no path."""
    start_flow = start_flows(graph, capacity, start)
    if start_flow is None:
        return []
    reached_in: dict[int, int] = defaultdict(int)
    for k, (tail, head, _) in enumerate(arc_flow.item_arcs):
        reached_in[head] += start_flow[k]
        reached_in[tail] -= start_flow[k]
    # What flows into a node and does not leave it by an item arc leaves by its loss arc.
    values: list[tuple[Var, float]] = list(zip(arc_flow.flow, start_flow, strict=True))
    values += [
        (var, reached_in[node] + (len(start) if node == arc_flow.source else 0))
        for var, node in zip(arc_flow.slack, arc_flow.loss, strict=True)
    ]
    values.append((arc_flow.bins, len(start)))
    return values


def _read_bins(types: list[int], sink: int, arc_flow: _ArcFlow) -> list[list[int]]:
    """The bins of a solution as size patterns: walk 0 → sink along arcs with flow left, z times."""
    remaining: dict[int, list[tuple[int, int | None, int]]] = defaultdict(list)
    for k, (tail, head, kind) in enumerate(arc_flow.item_arcs):
        for _ in range(_value(arc_flow.flow[k])):
            remaining[tail].append((head, kind, k))
    for k, tail in enumerate(arc_flow.loss):
        for _ in range(_value(arc_flow.slack[k])):
            remaining[tail].append((sink, None, -1))
    patterns: list[list[int]] = []
    for _ in range(_value(arc_flow.bins)):
        node, pattern = arc_flow.source, []
        while node != sink and remaining[node]:
            head, item_type, _ = remaining[node].pop()
            if item_type is not None:
                pattern.append(types[item_type])
            node = head
        patterns.append(pattern)
    return patterns


def _assign_items(
    patterns: list[list[int]],
    units: list[int],
    groups: Sequence[Hashable | None] | None,
) -> list[list[int]] | None:
    """Give concrete items to size patterns; None when group conflicts cannot be avoided.

    Items of one size are interchangeable except for their group (parts of one multi-card
    seat must sit in different bins): largest groups first, each part into the bin with the
    most open slots of that size — the Gale–Ryser construction, which succeeds whenever
    any assignment does.
    """
    slots: dict[int, list[int]] = defaultdict(lambda: [0] * len(patterns))
    for b, pattern in enumerate(patterns):
        for size in pattern:
            slots[size][b] += 1
    by_size: dict[int, dict[Hashable, list[int]]] = defaultdict(lambda: defaultdict(list))
    for i, size in enumerate(units):
        group: Hashable = groups[i] if groups is not None and groups[i] is not None else ("item", i)
        by_size[size][group].append(i)
    bins: list[list[int]] = [[] for _ in patterns]
    for size, members in by_size.items():
        open_slots = slots[size]
        for _, items in sorted(members.items(), key=lambda kv: -len(kv[1])):
            order = sorted(range(len(patterns)), key=lambda b: (-open_slots[b], b))
            chosen = [b for b in order[: len(items)] if open_slots[b] > 0]
            if len(chosen) < len(items):
                return None
            for item, b in zip(items, chosen, strict=True):
                bins[b].append(item)
                open_slots[b] -= 1
    return [b for b in bins if b]


def _solve_assignment(
    units: list[int],
    capacity: int,
    groups: Sequence[Hashable | None] | None,
    solver: str,
    time_limit: float,
    lower_bound: int,
    upper_bound: int,
) -> tuple[list[list[int]], str, bool, int, float, float]:
    """The assignment model solved: (bins of item indices, status, proven, x count, build s, solve s)."""
    started = time.perf_counter()
    model, x = _assignment_model(units, capacity, groups, lower_bound, upper_bound)
    built = time.perf_counter()
    status, found, proven = _run(model, solver, time_limit)
    solved = time.perf_counter()
    bins: list[list[int]] = []
    if found:
        for b in range(upper_bound):
            members = [i for i in range(len(units)) if (i, b) in x and _value(x[i, b]) == 1]
            if members:
                bins.append(members)
    return bins, status, proven, len(x), built - started, solved - built


def _assignment_model(
    units: list[int],
    capacity: int,
    groups: Sequence[Hashable | None] | None,
    lower_bound: int,
    upper_bound: int,
) -> tuple[Model, dict[tuple[int, int], Var]]:
    """Item-to-bin assignment with symmetry breaking, for graphs too big or group conflicts.

    Notation: items i sorted by decreasing size w_i (position p(i)), bins b < U (the greedy
    count), x[i,b] = item i in bin b, y[b] = bin b used. Symmetry breaking: number bins by
    their first item, so x[i,b] exists only for b ≤ p(i), and used bins come first.
      min Σ_b y[b]  s.t.  (1) Σ_b x[i,b] = 1;  (2) Σ_i w_i·x[i,b] ≤ C·y[b];
      (3) y[b] ≥ y[b+1] and Σ_b y[b] ≥ L;  (4) Σ_{i ∈ g} x[i,b] ≤ 1 for each group g.
    """
    order = sorted(range(len(units)), key=lambda i: (-units[i], i))
    position = {item: p for p, item in enumerate(order)}
    nbins = upper_bound
    model = Model("assignment")
    used = [model.binary(f"y{b}") for b in range(nbins)]
    x = {
        (i, b): model.binary(f"x{i}_{b}")
        for i in range(len(units))
        for b in range(min(nbins, position[i] + 1))
    }
    # Objective: bins used.
    model.objective(total(used))
    # 1. Every item in exactly one bin.
    for i in range(len(units)):
        model.add(total(x[i, b] for b in range(nbins) if (i, b) in x) == 1)
    # 2. A bin's load fits its capacity, and only a used bin has a load.
    for b in range(nbins):
        model.add(
            total(units[i] * x[i, b] for i in range(len(units)) if (i, b) in x)
            <= capacity * used[b]
        )
    # 3. Used bins come first, and there are at least the lower bound of them.
    for b in range(nbins - 1):
        model.add(used[b] >= used[b + 1])
    model.add(total(used) >= lower_bound)
    # 4. Parts of one group (a multi-card seat) in different bins.
    for items in _group_members(groups):
        for b in range(nbins):
            present = [x[i, b] for i in items if (i, b) in x]
            if len(present) > 1:
                model.add(total(present) <= 1)
    return model, x


def _group_members(groups: Sequence[Hashable | None] | None) -> list[list[int]]:
    """The items of each group that has more than one, in order of first appearance."""
    members: dict[Hashable, list[int]] = defaultdict(list)
    for i, group in enumerate(groups or ()):
        if group is not None:
            members[group].append(i)
    return [items for items in members.values() if len(items) > 1]


@dataclass(frozen=True)
class _ColumnsOutcome:
    """What the column-generation path settled: patterns (None: the known packing is optimal)."""

    patterns: list[list[int]] | None
    proven: bool
    status: str
    lower_bound: int


# One reduced-cost fixing test: the bound its duals give, and the reduced costs of the item
# arcs and of the loss arcs (by node) under them.
_FixingTest = tuple[pack_cg.DualBound, np.ndarray, dict[int, float]]


def _columns_first(
    graph: Graph,
    cap: int,
    solver: str,
    deadline: float,
    lower: int,
    upper: int,
    start: Sequence[Sequence[int]],
) -> _ColumnsOutcome | None:
    """The column-generation bound, reduced-cost fixing, dives, and boxed arc-flow programs.

    1. Gilmore–Gomory's LP by column generation (HiGHS, seeded with the known packing): its
       duals π give the bound L = ceil(π·d / M) (see `pack_cg.DualBound`).
    2. Reduced-cost fixing: an arc whose best pattern under π has reduced cost above
       T − π·d + T·(M − 1) is in no packing of T bins. Every dual vector gives its own valid
       test, so the LP is re-solved with slightly raised demands for a few more (the LP's
       duals are highly degenerate) and an arc is kept only if every test keeps it. This
       runs before any dive, whose columns would change the raised LPs' duals.
    3. A dive on the LP for a packing of L bins: found, it is optimal. Where fixing left
       many arcs, more dives (randomised) before the program.
    4. For T = L, L+1, … below the known packing's count U: the arc-flow program with z = T
       over the kept arcs. Infeasible proves T impossible; a packing found is optimal, every
       count below it having been proven impossible or below the bound.
    None when the LP is not solved in time (the caller goes on without it).
    """
    types, item_arcs, demand_map, _ = graph
    demand = [demand_map[t] for t in range(len(types))]
    # 1. The LP bound.
    cg, root = pack_cg.root_lp(types, demand, cap, deadline=deadline, start=_seeds(types, start))
    if root is None:
        return None
    target = max(lower, pack_cg.dual_bound(types, demand, cap, root.duals).bins)
    if target >= upper:
        return _ColumnsOutcome(None, True, "LP bound met", upper)
    # 2. The fixing tests, then the arcs a packing of `target` bins may use.
    tests = _fixing_tests(cg, graph, cap, root.duals, deadline)
    keep = _kept(tests, target, len(item_arcs))
    # 3. The first dive; where many arcs are left the program would search long, so dive
    #    more, at random, first.
    for seed in (None, len(types) + cap) if len(keep[0]) > DIVE_ABOVE_ARCS else (None,):
        now = time.perf_counter()
        found = pack_cg.dive(
            cg, demand, target, deadline=now + DIVE_SHARE * (deadline - now), seed=seed
        )
        if found and len(found) <= target:
            patterns = [pack_cg.pattern_sizes(p, types) for p in found]
            return _ColumnsOutcome(patterns, True, "optimal", len(found))
    # 4. The boxed arc-flow programs.
    while target < upper:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            return _ColumnsOutcome(list(map(list, start)), False, "time limit", target)
        patterns, status, _, _, _ = _solve_arc_flow(
            graph, cap, solver, remaining, target, target, None, keep
        )
        if status == "infeasible":
            target += 1
            keep = _kept(tests, target, len(item_arcs))
            continue
        if patterns:
            return _ColumnsOutcome(patterns, True, "optimal", target)
        return _ColumnsOutcome(list(map(list, start)), False, status, target)
    return _ColumnsOutcome(None, True, "optimal", upper)


def _seeds(types: list[int], start: Sequence[Sequence[int]]) -> list[list[int]]:
    """The known packing's bins (size patterns) as columns: copies of each type."""
    type_of = {w: t for t, w in enumerate(types)}
    seeds = []
    for pattern in start:
        counts = [0] * len(types)
        for w in pattern:
            counts[type_of[w]] += 1
        seeds.append(counts)
    return seeds


def _fixing_tests(
    cg: pack_cg.ColumnGeneration,
    graph: Graph,
    cap: int,
    root_duals: Sequence[float],
    deadline: float,
) -> list[_FixingTest]:
    """The root LP's fixing test, then one per LP with demands raised by up to RAISE each.

    Up to FIXING_DUALS tests, within FIXING_SHARE of the time left (seeded, so a run repeats).
    """
    types, item_arcs, demand_map, label = graph
    demand = [demand_map[t] for t in range(len(types))]
    rng = random.Random(len(types) * 1_000_003 + cap)
    fixing_deadline = min(
        deadline, time.perf_counter() + FIXING_SHARE * (deadline - time.perf_counter())
    )
    tests: list[_FixingTest] = []
    for k in range(FIXING_DUALS):
        if k == 0:
            duals: Sequence[float] = root_duals
        else:
            lp = cg.solve_raised(
                [d + rng.uniform(0.0, RAISE) for d in demand], deadline=fixing_deadline
            )
            if lp is None:
                break
            duals = lp.duals
        costs, loss_costs = pack_cg.pattern_reduced_costs(
            types, demand, cap, item_arcs, label, duals
        )
        tests.append((pack_cg.dual_bound(types, demand, cap, duals), costs, loss_costs))
        if time.perf_counter() > fixing_deadline:
            break
    return tests


def _kept(
    tests: Sequence[_FixingTest], target: int, arcs: int
) -> tuple[frozenset[int], frozenset[int]]:
    """The item arcs and loss nodes every test keeps for a packing of `target` bins."""
    kept = np.ones(arcs, dtype=bool)
    nodes: set[int] | None = None
    for test, costs, loss_costs in tests:
        room = test.room(target) + FIX_SLACK
        kept &= costs <= room
        keep_nodes = {n for n, cost in loss_costs.items() if cost <= room}
        nodes = keep_nodes if nodes is None else nodes & keep_nodes
    return frozenset(int(k) for k in np.nonzero(kept)[0]), frozenset(nodes or ())


@dataclass(frozen=True)
class _Job:
    """One instance in model units, and what every path through `solve_bin_packing` shares."""

    units: list[int]
    cap: int
    unit: int  # bytes per model unit
    groups: Sequence[Hashable | None] | None
    solver: str
    time_limit: float
    started: float  # time.perf_counter() when the solve began
    lower: int
    upper: int
    start: Sequence[Sequence[int]] | None  # the known packing: bins of item indices

    @cached_property
    def patterns(self) -> list[list[int]] | None:
        """The known packing as size patterns, in model units."""
        return None if self.start is None else [[self.units[i] for i in b] for b in self.start]

    def elapsed(self) -> float:
        """Seconds since the solve began."""
        return time.perf_counter() - self.started

    def known(
        self, proven: bool, status: str, arcs: int, build_s: float, bound: int
    ) -> BinSolution:
        """The known packing as the answer (`build_s` of the time spent building)."""
        assert self.start is not None
        bins = tuple(tuple(b) for b in self.start)
        return BinSolution(
            bins,
            proven,
            "arc-flow",
            status,
            self.unit,
            arcs,
            build_s,
            self.elapsed() - build_s,
            bound,
        )


def solve_bin_packing(
    sizes: Sequence[int],
    capacity: int,
    *,
    groups: Sequence[Hashable | None] | None = None,
    solver: str = "cbc",
    time_limit: float = 60.0,
    lower_bound: int = 0,
    upper_bound: int | None = None,
    max_arcs: int = MAX_ARCS,
    start: Sequence[Sequence[int]] | None = None,
    lp_first_arcs: int = LP_FIRST_ARCS,
    max_pricing_units: int = MAX_PRICING_UNITS,
) -> BinSolution | None:
    """Fewest bins of `capacity` for integer `sizes` (bytes or any unit); None when none found in time.

    Works in units of the gcd of the sizes: any bin's load is a multiple of it, so the
    capacity rounds down to a multiple of it with nothing lost, and the arc-flow graph has
    capacity/gcd + 1 nodes at most (MiB-sized seats on a card: ~10^5). Items of one non-None
    `groups` entry never share a bin. `upper_bound` is a known packing's bin count (greedy),
    and `start` that packing (bins of item indices), CBC's first incumbent.

    The arc-flow integer program runs first, its objective boxed between the bound and the
    best packing known; on graphs of more than `lp_first_arcs` arcs the column-generation
    path (`_columns_first`) or the LP relaxation comes before it. The assignment model only
    when the graph has more than `max_arcs` arcs or the arc-flow packing cannot honour the
    groups.
    """
    if solver not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r}; choose one of {', '.join(SOLVERS)}")
    if not sizes:
        return BinSolution((), True, "none", "optimal", 1, 0, 0.0, 0.0, 0)
    if any(w <= 0 or w > capacity for w in sizes):
        raise ValueError("every size must be in (0, capacity]")
    unit = math.gcd(*sizes)
    units = [w // unit for w in sizes]
    upper = upper_bound if upper_bound is not None else len(sizes)
    lower = max(0, min(lower_bound, upper))
    started = time.perf_counter()
    job = _Job(
        units, capacity // unit, unit, groups, solver, time_limit, started, lower, upper, start
    )
    graph = arc_flow_graph(units, job.cap, max_arcs)
    if graph is None:
        if len(units) * min(upper, len(units)) > 2 * MAX_ASSIGNMENT_VARS:
            return None
        note = f"arc-flow graph over {max_arcs:,} arcs; solved by the assignment model instead"
        return _assignment_solution(job, time_limit, lower, note)
    graph_seconds = time.perf_counter() - started
    if (
        job.patterns is not None
        and upper > lower
        and len(graph[1]) > lp_first_arcs
        and job.cap <= max_pricing_units
        and (len(graph[0]) + 1) * (job.cap + 1) <= MAX_TABLE_CELLS
    ):
        found = _columns_first(
            graph, job.cap, solver, started + time_limit, lower, upper, job.patterns
        )
        if found is not None:
            return _columns_solution(job, found, len(graph[1]), graph_seconds)
    return _arc_flow_solution(job, graph, graph_seconds, lp_first_arcs)


def _columns_solution(
    job: _Job, found: _ColumnsOutcome, arcs: int, graph_seconds: float
) -> BinSolution | None:
    """The column-generation path's answer; no patterns: the known packing, proven optimal."""
    assert job.start is not None
    if found.patterns is None:
        bins: list[list[int]] | None = [list(b) for b in job.start]
    else:
        bins = _assign_items(found.patterns, job.units, job.groups)
    if bins is None:
        note = "the packing found put two parts of a multi-card seat on one card; re-solved by assignment"
        return _assignment_solution(
            job, max(1.0, job.time_limit - job.elapsed()), found.lower_bound, note
        )
    return BinSolution(
        tuple(tuple(b) for b in bins),
        found.proven,
        "arc-flow",
        found.status,
        job.unit,
        arcs,
        graph_seconds,
        job.elapsed() - graph_seconds,
        len(bins) if found.proven else found.lower_bound,
    )


def _arc_flow_solution(
    job: _Job, graph: Graph, graph_seconds: float, lp_first_arcs: int
) -> BinSolution | None:
    """The arc-flow program, on large graphs after its LP relaxation and reduced-cost fixing."""
    arcs = len(graph[1])
    keep: tuple[frozenset[int], frozenset[int]] | None = None
    mip_lower, mip_upper = job.lower, job.upper
    if job.start is not None and job.upper > job.lower and arcs > lp_first_arcs:
        # The LP relaxation first: ceil(LP) is a bound (often above L2), and reduced-cost
        # fixing keeps only the arcs a packing of at most upper − 1 bins can use, a far
        # smaller integer program that either finds such a packing or proves none exists.
        relaxation = _arc_flow_lp(graph, job.cap, job.solver, job.time_limit)
        if relaxation is not None:
            lp_bound = max(job.lower, math.ceil(relaxation.value - FIX_SLACK))
            if lp_bound >= job.upper:
                return job.known(True, "LP bound met", arcs, graph_seconds, job.upper)
            keep = _fix_by_reduced_cost(relaxation, job.upper - 1)
            mip_lower, mip_upper = lp_bound, job.upper - 1
    remaining_s = job.time_limit - job.elapsed()
    if remaining_s <= 0:
        return None
    patterns, status, proven, build_s, solve_s = _solve_arc_flow(
        graph, job.cap, job.solver, remaining_s, mip_lower, mip_upper, job.patterns, keep
    )
    if keep is not None and status == "infeasible":
        # No packing of upper − 1 bins uses only the kept arcs, and no other can: the known
        # packing is optimal.
        return job.known(True, "optimal", arcs, graph_seconds + build_s, job.upper)
    if not patterns:
        return None
    bins = _assign_items(patterns, job.units, job.groups)
    if bins is None:
        note = "the arc-flow packing put two parts of a multi-card seat on one card; re-solved by assignment"
        return _assignment_solution(job, max(1.0, job.time_limit - job.elapsed()), job.lower, note)
    return BinSolution(
        tuple(tuple(b) for b in bins),
        proven,
        "arc-flow",
        status,
        job.unit,
        arcs,
        graph_seconds + build_s,
        solve_s,
        len(bins) if proven else mip_lower,
    )


def _assignment_solution(
    job: _Job, time_limit: float, lower: int, note: str | None
) -> BinSolution | None:
    """The assignment model's answer as a BinSolution (None when it found no packing)."""
    bins_a, status, proven, nvars, build_s, solve_s = _solve_assignment(
        job.units, job.cap, job.groups, job.solver, time_limit, lower, job.upper
    )
    if not bins_a:
        return None
    return BinSolution(
        tuple(tuple(b) for b in bins_a),
        proven,
        "assignment",
        status,
        job.unit,
        nvars,
        build_s,
        solve_s,
        len(bins_a) if proven else lower,
        note,
    )
