"""The integer program that proposes where new seats go; the only module that imports pulp.

It proposes only: `placement.fit.verify` re-checks every proposal in exact bytes before it is shown.
"""

from __future__ import annotations

import time
import warnings
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import pulp

from placement.plan.problem import CardKey, PairKey, Problem
from placement.quiet import stdout_silenced
from seats.errors import CannotDecideError
from seats.units import MiB

SolverName = Literal["cbc", "highs"]
DEFAULT_TIME_LIMIT_S = 10.0
# Relative MIP gap: small enough that one seat (weight ≥ 2 in an objective of a few thousand)
# is never traded away by the solver's tolerance.
GAP_REL = 1e-7
TIGHT_WEIGHT = 1e-3
# Past this many eligible (seat, card) pairs the exact hole term's binaries cost more than
# they are worth (bench/bench_plan.py): a linear stand-in keeps the model fast.
EXACT_HOLE_MAX_PAIRS = 2000
TIE_BREAK_GAP_ABS = 0.01
SEAT_GAP_ABS = 0.9


class SolverError(CannotDecideError):
    """The solver ended in a status we cannot read a placement from (exit 3)."""


@dataclass
class ModelMaps:
    """Our own maps from (seat, host, card) to the model's variables; PuLP names are never parsed."""

    x: dict[PairKey, Any]
    y: dict[tuple[str, str], Any]
    placed: dict[str, Any]
    load: dict[CardKey, Any]
    weights: dict[str, float]


@dataclass(frozen=True)
class Solution:
    """What the solver proposed: per seat its host and cards (placed seats only)."""

    assignment: dict[str, tuple[str, tuple[int, ...]]]
    status: Literal["optimal", "time_limit", "no_solution"]
    solver: SolverName
    objective: float | None
    gap: float | None
    build_s: float
    solve_s: float
    variables: int
    constraints: int

    @property
    def optimal(self) -> bool:
        """True only when the solver proved optimality."""
        return self.status == "optimal"


def priority_weights(problem: Problem) -> dict[str, float]:
    """Per seat, the objective weight of placing it, making priority strict.

    Levels ascending: W_0 = 2 (more than every tie-break term together, < 1.001), and
    W_k = Σ_{j<k} n_j·W_j + 2, so one seat of a level outweighs every seat below it.
    """
    counts: dict[int, int] = defaultdict(int)
    for new in problem.seats:
        counts[new.seat.priority] += 1
    level_weight: dict[int, float] = {}
    below = 0.0
    for priority in sorted(counts):
        level_weight[priority] = below + 2.0
        below += counts[priority] * level_weight[priority]
    return {new.name: level_weight[new.seat.priority] for new in problem.seats}


def _mib(n: int) -> float:
    return n / MiB


def build_model(
    problem: Problem, *, exact_hole: bool | None = None
) -> tuple[pulp.LpProblem, ModelMaps]:
    """Build the placement integer program for `problem`.

    Notation (bytes scaled to MiB inside the model):
      S new seats, s ∈ S with N_s cards, priority p_s and weight W_s (see `priority_weights`);
      H hosts, C_h the usable cards of host h; E ⊆ S × C the eligible pairs (the seat could go
      on the card alone — everything else is pruned before the model sees it);
      need[s,c] what s takes on c; cap_c = free_c − margin_h; A_c the absent seats' residents;
      reserves r on c with base_r = bytes_r − residents of its running own seats.
    Variables:
      x[s,c] ∈ {0,1} s on c; y[s,h] ∈ {0,1} multi-card s on host h; placed[s] ∈ {0,1};
      load_c = Σ_s need[s,c]·x[s,c]; h_r ≥ max(0, base_r − Σ_{u ∈ for(r)} resident_u·x[u,c]);
      z[c,G] ∈ {0,1} some seat of room group G (seats exempt from the same reserves) is on c;
      b_c ∈ {0,1} c is its host's kept hole; m_h ≥ 0 the kept hole of h.
    Constraints:
      (1) assignment: Σ_c x[s,c] = placed[s] (one card) or Σ_h y[s,h] = placed[s] and
          Σ_{c ∈ C_h} x[s,c] = N_s·y[s,h] (N cards of one host);
      (2) room, every seat as if started last: load_c + A_c + Σ_{r not exempting G} h_r ≤ cap_c
          when z[c,G] = 1 (x[s,c] ≤ z[c,G] for s in G);
      (3) gate, as if started last (vLLM's own check, margin and reserves play no part):
          load_c ≤ B[s,c] = free_c − ctx_h + need[s,c] − requested[s,c] when x[s,c] = 1, kept
          only where (2) does not already imply it; written as one staircase per card (the
          smallest active bound binds; see the code) instead of a big-M per seat;
      (4) exclusive: Σ_{t≠s} x[t,c] ≤ K_c·(1 − x[s,c]);
      (5) hole: Σ_{c ∈ C_h} b_c = 1 and m_h ≤ cap_c − A_c − Σ_r h_r − load_c + M·(1 − b_c)
          (exact; used up to EXACT_HOLE_MAX_PAIRS eligible pairs or when `exact_hole`). Past
          that, a linear stand-in: bytes placed on the host's widest card are charged, so it is
          used only when the seat count needs it — no binaries, a much stronger relaxation.
    Objective (maximise, lexicographic through weights):
      Σ_s W_s·placed[s]                 strict priority, then the most seats;
      + Σ_h m_h / (|H|·max cuda_total)  then the largest free hole per host (< 1 in all);
      − 1e-3/|S| · Σ x[s,c]·slack[s,c]  then tighter fits (slack = room left alone / total).
    """
    prob = pulp.LpProblem("gpuplan_placement", pulp.LpMaximize)
    weights = priority_weights(problem)
    by_seat: dict[str, list[PairKey]] = defaultdict(list)
    by_card: dict[CardKey, list[PairKey]] = defaultdict(list)
    for pair in problem.need:
        by_seat[pair[0]].append(pair)
        by_card[(pair[1], pair[2])].append(pair)
    residents = {new.name: new.seat.resident_bytes for new in problem.seats}
    exclusive = {new.name for new in problem.seats if new.seat.exclusive}

    x = {
        pair: prob.add_variable(f"x_{i}", cat=pulp.LpBinary) for i, pair in enumerate(problem.need)
    }
    placed = {
        new.name: prob.add_variable(f"placed_{i}", cat=pulp.LpBinary)
        for i, new in enumerate(problem.seats)
    }
    y: dict[tuple[str, str], Any] = {}
    # The objective as one coefficient map: PuLP's operator overloading is far too slow at
    # fleet size (bench/bench_plan.py), so every expression is built from (variable, coef) lists.
    objective: dict[Any, float] = defaultdict(float)

    # (1) Each seat is placed on N cards of one host, or not at all.
    for i, new in enumerate(problem.seats):
        pairs = by_seat.get(new.name, [])
        count = new.seat.card_count
        objective[placed[new.name]] += weights[new.name]
        if not pairs:
            prob += placed[new.name] == 0, f"none_{i}"
            continue
        if count == 1:
            prob += (
                _lin([(x[p], 1.0) for p in pairs] + [(placed[new.name], -1.0)]) == 0,
                f"assign_{i}",
            )
            continue
        per_host: dict[str, list[PairKey]] = defaultdict(list)
        for pair in pairs:
            per_host[pair[1]].append(pair)
        for j, (host, host_pairs) in enumerate(per_host.items()):
            var = prob.add_variable(f"y_{i}_{j}", cat=pulp.LpBinary)
            y[(new.name, host)] = var
            if len(host_pairs) < count:
                prob += var == 0, f"few_{i}_{j}"
            prob += (
                _lin([(x[p], 1.0) for p in host_pairs] + [(var, -float(count))]) == 0,
                f"ncards_{i}_{j}",
            )
        prob += (
            _lin([(y[(new.name, h)], 1.0) for h in per_host] + [(placed[new.name], -1.0)]) == 0,
            f"onehost_{i}",
        )

    load: dict[CardKey, Any] = {}
    card_held: dict[CardKey, dict[str, Any]] = {}
    max_total = max((slot.cuda_total for slot in problem.cards), default=1) or 1
    for k, slot in enumerate(problem.cards):
        if not slot.ok:
            continue
        pairs = by_card.get(slot.key, [])
        cap = _mib(slot.free_bytes - slot.margin_bytes)
        absent = _mib(slot.absent_bytes)
        load_var = prob.add_variable(f"load_{k}", lowBound=0)
        load[slot.key] = load_var
        prob += (
            _lin([(x[p], _mib(problem.need[p])) for p in pairs] + [(load_var, -1.0)]) == 0,
            f"load_{k}",
        )
        # Held reserves: a constant, or a variable its own new seats may consume.
        held_terms: dict[str, Any] = {}
        card_held[slot.key] = held_terms
        held_max = 0.0
        for r_i, reserve in enumerate(slot.reserves):
            base = reserve.reserve_bytes - reserve.running_own_bytes
            own = [p for p in pairs if p[0] in reserve.for_]
            held_max += _mib(max(0, base))
            if not own:
                held_terms[reserve.name] = _mib(max(0, base))
                continue
            h = prob.add_variable(f"held_{k}_{r_i}", lowBound=0)
            prob += (
                _lin([(h, 1.0)] + [(x[p], _mib(residents[p[0]])) for p in own]) >= _mib(base),
                f"reserve_{k}_{r_i}",
            )
            held_terms[reserve.name] = h
        load_max = sum(_mib(problem.need[p]) for p in pairs)
        big_m = max(0.0, load_max + absent + held_max - cap) + 1.0

        # (2) Room, per group of seats exempt from the same reserves on this card.
        groups: dict[frozenset[str], list[PairKey]] = defaultdict(list)
        for pair in pairs:
            exempt = frozenset(r.name for r in slot.reserves if pair[0] in r.for_)
            groups[exempt].append(pair)
        for g_i, (exempt, members) in enumerate(groups.items()):
            held = pulp.lpSum(term for name, term in held_terms.items() if name not in exempt)
            constant_held = sum(
                max(0, r.reserve_bytes - r.running_own_bytes)
                for r in slot.reserves
                if r.name not in exempt
            )
            needs_switch = len(groups) > 1 or any(
                not isinstance(term, float) for term in held_terms.values()
            )
            if (
                not needs_switch
                and slot.absent_bytes + constant_held <= slot.free_bytes - slot.margin_bytes
            ):
                # Holds with nothing placed, and every seat here meets the same held bytes.
                prob += load_var + absent + held <= cap, f"room_{k}_{g_i}"
                continue
            z = prob.add_variable(f"z_{k}_{g_i}", cat=pulp.LpBinary)
            for m_i, pair in enumerate(members):
                prob += _lin([(x[pair], 1.0), (z, -1.0)]) <= 0, f"group_{k}_{g_i}_{m_i}"
            prob += load_var + absent + held <= cap + big_m * (1 - z), f"room_{k}_{g_i}"

        # (3) vLLM's gate for each gated seat, as if it started last: the card's load may not
        # pass the smallest bound among the gated seats on it. Bounds sorted B_1 < … < B_k,
        # v_j ∈ [0,1] rising with j, v_j ≥ x[s,c] for seats with bound B_j, and
        # load_c ≤ C − Σ_j d_j·v_j with d_j = B_{j+1} − B_j, d_k = C − B_k: the smallest
        # active bound is exact at integers and far tighter than a big-M per seat.
        gated = sorted({problem.gate_bound[p] for p in pairs if p in problem.gate_bound})
        if gated:
            loosest = _mib(slot.free_bytes - slot.margin_bytes - slot.absent_bytes)
            levels = [_mib(b) for b in gated]
            steps = [levels[j + 1] - levels[j] for j in range(len(levels) - 1)]
            steps.append(max(0.0, loosest - levels[-1]))
            level_var = [
                prob.add_variable(f"gate_{k}_{j}", lowBound=0, upBound=1)
                for j in range(len(levels))
            ]
            index = {bound: j for j, bound in enumerate(gated)}
            for j in range(1, len(level_var)):
                prob += (
                    _lin([(level_var[j], 1.0), (level_var[j - 1], -1.0)]) >= 0,
                    f"gaterise_{k}_{j}",
                )
            for p_i, pair in enumerate(pairs):
                bound = problem.gate_bound.get(pair)
                if bound is not None:
                    prob += (
                        _lin([(x[pair], 1.0), (level_var[index[bound]], -1.0)]) <= 0,
                        f"gateon_{k}_{p_i}",
                    )
            prob += (
                _lin([(load_var, 1.0)] + [(v, d) for v, d in zip(level_var, steps, strict=True)])
                <= loosest,
                f"gate_{k}",
            )

        # (4) An exclusive seat shares its card with no other new seat.
        for p_i, pair in enumerate(pairs):
            if pair[0] not in exclusive:
                continue
            rest = [(x[q], 1.0) for q in pairs if q[0] != pair[0]]
            if rest:
                prob += (
                    _lin([*rest, (x[pair], float(len(rest)))]) <= len(rest),
                    f"excl_{k}_{p_i}",
                )

        # Tie-break: tighter fits (less room left beside the seat when alone on the card).
        for pair in pairs:
            slack = max(0.0, cap - absent - _mib(problem.need[pair])) / _mib(max_total)
            objective[x[pair]] -= TIGHT_WEIGHT / max(1, len(problem.seats)) * slack

    # (5) Keep each host's largest free hole as large as possible.
    hosts = [h for h, cards in problem.hosts.items() if any(c.ok for c in cards)]
    hole_weight = 1.0 / (max(1, len(hosts)) * _mib(max_total))
    exact = len(problem.need) <= EXACT_HOLE_MAX_PAIRS if exact_hole is None else exact_hole
    for h_i, host in enumerate(hosts):
        cards = [c for c in problem.hosts[host] if c.ok]
        if not any(slot.key in by_card for slot in cards):
            continue  # nothing new can land here: its hole is fixed
        if not exact:
            # Large fleets: leave the host's largest hole untouched where possible, by charging
            # every byte placed on it (linear, no binaries; exact form below).
            widest = max(cards, key=lambda c: (c.plannable_bytes, -c.index))
            for p in by_card.get(widest.key, []):
                objective[x[p]] -= hole_weight * _mib(problem.need[p])
            continue
        hole = prob.add_variable(f"hole_{h_i}", lowBound=0, upBound=_mib(max_total))
        chosen = {
            c.key: prob.add_variable(f"b_{h_i}_{j}", cat=pulp.LpBinary) for j, c in enumerate(cards)
        }
        prob += pulp.lpSum(chosen.values()) == 1, f"holepick_{h_i}"
        for j, slot in enumerate(cards):
            after = _mib(slot.free_bytes - slot.margin_bytes - slot.absent_bytes) - load[slot.key]
            held_now = pulp.lpSum(card_held.get(slot.key, {}).values())
            big_m = _mib(max_total) * 2 + _mib(sum(r.reserve_bytes for r in slot.reserves))
            prob += (
                hole <= after - held_now + big_m * (1 - chosen[slot.key]),
                f"hole_{h_i}_{j}",
            )
        objective[hole] += hole_weight

    prob += _lin(objective.items())
    return prob, ModelMaps(x=x, y=y, placed=placed, load=load, weights=weights)


def _start_values(
    maps: ModelMaps, initial: dict[str, tuple[str, tuple[int, ...]]]
) -> list[tuple[Any, int]]:
    """(variable, value) for every assignment binary, from a placement (0 where it places nothing)."""
    chosen = {(name, host, card) for name, (host, cards) in initial.items() for card in cards}
    values = [(var, 1 if pair in chosen else 0) for pair, var in maps.x.items()]
    values += [(var, 1 if name in initial else 0) for name, var in maps.placed.items()]
    values += [
        (var, 1 if initial.get(name, ("", ()))[0] == host else 0)
        for (name, host), var in maps.y.items()
    ]
    return values


def _warm_start(maps: ModelMaps, initial: dict[str, tuple[str, tuple[int, ...]]]) -> None:
    """Hand CBC the placement as its first incumbent (PuLP writes it as a MIP start)."""
    for var, value in _start_values(maps, initial):
        var.setInitialValue(value)


class _WarmHiGHS(pulp.HiGHS):  # type: ignore[misc]
    """PuLP's HiGHS interface, plus a partial MIP start (HiGHS completes the continuous part)."""

    def __init__(self, *, start: list[tuple[Any, int]], **options: Any) -> None:
        super().__init__(**options)
        self.start = start

    def callSolver(self, lp: Any) -> None:
        if self.start:
            import numpy

            index = numpy.array([var.index for var, _ in self.start], dtype=numpy.int32)
            value = numpy.array([float(v) for _, v in self.start], dtype=numpy.float64)
            lp.solverModel.setSolution(len(self.start), index, value)
        lp.solverModel.run()


def _lin(terms: Iterable[tuple[Any, float]]) -> Any:
    """A linear expression from (variable, coefficient) pairs, without operator overloading."""
    return pulp.LpAffineExpression(list(terms))


@dataclass
class Watch:
    """The deadline a CBC process is held to, and whether it had to be killed at it."""

    at: float  # time.monotonic()
    killed: bool = False


@contextmanager
def killed_at(deadline: float) -> Iterator[Watch]:
    """Kill any CBC process PuLP starts in this block once `deadline` (monotonic) passes.

    CBC watches its own time limit only between nodes: reading a large model and its root LP
    run past it (a crowded 64-host fleet: 54 s of CBC under a 10 s limit). PuLP waits on the
    process with no timeout, so its module's `subprocess` is swapped, for this block only,
    for one whose processes wait at most until the deadline and are killed there. PuLP then
    reports a failed run, which the caller reads as "no answer in time" when `killed` is set.
    """
    import pulp.apis.coin_api as coin_api

    watch = Watch(deadline)
    real = coin_api.subprocess

    class _Deadline:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def Popen(self, *args: Any, **kwargs: Any) -> Any:  # subprocess.Popen, by name
            process = real.Popen(*args, **kwargs)
            wait = process.wait

            def wait_until_deadline(timeout: float | None = None) -> int:
                try:
                    return int(wait(timeout=max(0.0, watch.at - time.monotonic())))
                except real.TimeoutExpired:
                    watch.killed = True
                    process.kill()
                    return int(wait())

            process.wait = wait_until_deadline
            return process

    coin_api.subprocess = _Deadline()
    try:
        yield watch
    finally:
        coin_api.subprocess = real


# Past its own limit, CBC gets this long to write its answer before it is killed.
KILL_GRACE_S = 1.0


def cbc_command(
    *, time_limit: float, gap_rel: float, gap_abs: float, warm: bool, preprocess: bool
) -> Any:
    """PuLP's bundled CBC with our options (the placement model's only CBC configuration)."""
    with warnings.catch_warnings():
        # PuLP 3.3 calls its bundled CBC deprecated in favour of 4.x packaging; it is the one we pin.
        warnings.simplefilter("ignore", DeprecationWarning)
        return pulp.PULP_CBC_CMD(
            msg=False,
            timeLimit=time_limit,
            gapRel=gap_rel,
            gapAbs=gap_abs,
            # No `threads`: any value turns on CBC 2.10's threaded search, whose start-up race
            # sometimes leaves a 17-row model waiting out the whole time limit ("Thread 0 used
            # 0 times, waiting to start 10.0"): 1 run in 100 on a loaded 2-core machine.
            # Unthreaded, 400 runs of the same model under load each took under 1 s.
            warmStart=warm,
            # CBC's preprocessing strengthens the load rows for seconds on large models and
            # does not watch the time limit while it does (bench/bench_plan.py).
            options=[] if preprocess else ["preprocess off"],
        )


def solve(
    problem: Problem,
    *,
    solver: SolverName = "cbc",
    time_limit: float = DEFAULT_TIME_LIMIT_S,
    initial: dict[str, tuple[str, tuple[int, ...]]] | None = None,
) -> Solution:
    """Build and solve; return the proposed placement (verify it before showing it).

    `time_limit` bounds build and solve together. `initial` (a verified placement, e.g. the
    greedy one) is handed to CBC as a warm start, so a time-limited answer is never worse.
    """
    started = time.perf_counter()
    prob, maps = build_model(problem)
    built = time.perf_counter()
    # CBC overruns its own limit by a few seconds reading a large model: leave it headroom.
    remaining = max(0.05, 0.85 * (time_limit - (built - started)))
    # Seats weigh ≥ 2 and every tie-break together < 1.001, so an absolute gap below 1 never
    # trades a seat. Small models chase the tie-breaks (hole, tight fit) to 1 % of a card;
    # large ones stop once the seat count is proven, tie-breaks as found.
    gap_abs = TIE_BREAK_GAP_ABS if len(problem.need) <= EXACT_HOLE_MAX_PAIRS else SEAT_GAP_ABS
    # A relative gap applies to the whole objective: with many priority levels the weights
    # grow, so shrink it until it is worth less than half of the cheapest seat.
    gap_rel = min(GAP_REL, 0.5 / (sum(maps.weights.values()) + 2.0))
    if initial:
        _warm_start(maps, initial)
    if solver == "cbc":
        command: Any = cbc_command(
            time_limit=remaining,
            gap_rel=gap_rel,
            gap_abs=gap_abs,
            warm=bool(initial),
            preprocess=len(problem.need) <= EXACT_HOLE_MAX_PAIRS,
        )
    elif solver == "highs":
        command = _WarmHiGHS(
            start=_start_values(maps, initial) if initial else [],
            msg=False,
            timeLimit=remaining,
            gapRel=gap_rel,
            gapAbs=gap_abs,
            threads=1,
        )
    else:
        raise SolverError(f"unknown solver {solver!r}; use cbc or highs")
    deadline = time.monotonic() + max(0.0, time_limit - (built - started)) + KILL_GRACE_S
    try:
        with killed_at(deadline) as watch, stdout_silenced():
            prob.solve(command)
    except pulp.PulpSolverError as exc:
        if not watch.killed:
            raise SolverError(f"{solver} failed: {exc}") from exc
    solved = time.perf_counter()
    status = "no_solution" if watch.killed else _status(prob, solver)
    assignment: dict[str, tuple[str, tuple[int, ...]]] = {}
    if status != "no_solution":
        chosen: dict[str, list[tuple[str, int]]] = defaultdict(list)
        for pair, var in maps.x.items():
            value = var.varValue
            if value is not None and value > 0.5:
                chosen[pair[0]].append((pair[1], pair[2]))
        for name, cards in chosen.items():
            hosts = {host for host, _ in cards}
            if len(hosts) != 1:
                raise SolverError(f"solver put {name} on cards of several hosts: {sorted(hosts)}")
            assignment[name] = (cards[0][0], tuple(sorted(index for _, index in cards)))
    objective = pulp.value(prob.objective) if status != "no_solution" else None
    return Solution(
        assignment=assignment,
        status=status,
        solver=solver,
        objective=float(objective) if objective is not None else None,
        gap=_gap(prob, solver)
        if status == "time_limit"
        else (0.0 if status == "optimal" else None),
        build_s=built - started,
        solve_s=solved - built,
        variables=prob.numVariables(),
        constraints=prob.numConstraints(),
    )


def _status(prob: pulp.LpProblem, solver: str) -> Literal["optimal", "time_limit", "no_solution"]:
    sol = prob.sol_status
    if sol == pulp.LpSolutionOptimal and prob.status == pulp.LpStatusOptimal:
        return "optimal"
    if sol == pulp.LpSolutionIntegerFeasible:
        return "time_limit"
    if sol == pulp.LpSolutionNoSolutionFound or prob.status == pulp.LpStatusNotSolved:
        return "no_solution"
    raise SolverError(
        f"{solver} ended with status {pulp.LpStatus.get(prob.status, prob.status)} "
        f"(solution status {sol}); the model is always feasible, so this is a solver failure"
    )


def _gap(prob: pulp.LpProblem, solver: str) -> float | None:
    """The relative MIP gap of a time-limited answer, where the solver reports it (HiGHS)."""
    if solver != "highs":
        return None
    model = getattr(prob, "solverModel", None)
    try:
        return float(model.getInfo().mip_gap) if model is not None else None
    except Exception:  # a solver interface without the figure: say nothing rather than fail
        return None
