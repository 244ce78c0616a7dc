"""The integer program that proposes where new seats go, written against `placement.solvers`.

It proposes only: `placement.fit.verify` re-checks every proposal in exact bytes before it is shown.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from placement import solvers
from placement.fit.card import CardModel
from placement.plan.problem import CardKey, NewSeat, PairKey, Problem
from placement.plan.score import priority_weights as seat_weights
from placement.solvers import (
    SOLVERS,
    Model,
    Outcome,
    Settings,
    SolverError,
    SolverName,
    Var,
    linear,
    total,
    value_of,
)
from seats.units import MiB

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


@dataclass
class ModelMaps:
    """Our own maps from (seat, host, card) to the model's variables; PuLP names are never parsed."""

    x: dict[PairKey, Var]
    y: dict[tuple[str, str], Var]
    placed: dict[str, Var]
    load: dict[CardKey, Var]
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
    """Per seat, the objective weight of placing it (`placement.plan.score.priority_weights`)."""
    return seat_weights(problem.seats)


def _mib(n: int) -> float:
    return n / MiB


def build_model(problem: Problem, *, exact_hole: bool | None = None) -> tuple[Model, ModelMaps]:
    """Build the placement integer program for `problem`.

    Notation (bytes scaled to MiB inside the model):
      S new seats, s ∈ S with N_s cards, priority p_s and weight W_s (see `priority_weights`);
      H hosts, C_h the usable cards of host h; E ⊆ S × C the eligible pairs (the seat could go
      on the card alone — everything else is pruned before the model sees it);
      need[s,c] what s takes on c; cap_c = free_c − margin_h; A_c the absent seats' residents and the active holds' needs;
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
          smallest active bound binds; see `_gate`) instead of a big-M per seat;
      (4) exclusive: Σ_{t≠s} x[t,c] ≤ K_c·(1 − x[s,c]);
      (5) hole: Σ_{c ∈ C_h} b_c = 1 and m_h ≤ cap_c − A_c − Σ_r h_r − load_c + M·(1 − b_c)
          (exact; used up to EXACT_HOLE_MAX_PAIRS eligible pairs or when `exact_hole`). Past
          that, a linear stand-in: bytes placed on the host's widest card are charged, so it is
          used only when the seat count needs it — no binaries, a much stronger relaxation.
    Objective (maximise, lexicographic through weights):
      Σ_s W_s·placed[s]                 strict priority, then the most seats;
      + Σ_h m_h / (|H|·max cuda_total)  then the largest free hole per host (< 1 in all);
      − 1e-3/|S| · Σ x[s,c]·slack[s,c]  then tighter fits (slack = room left alone / total).
    Rows are added card by card, (2)–(4) and the tie-break for one card before the next.
    """
    t = _Terms.start(problem)

    # (1) Each seat is placed on N cards of one host, or not at all.
    for i, new in enumerate(problem.seats):
        _assignment(t, i, new)

    for k, slot in enumerate(problem.cards):
        if not slot.ok:
            continue
        # The card's load, and what its reserves hold: a constant, or a variable h_r where
        # the reserve's own new seats may come and consume it.
        card = _card(t, k, slot)
        # (2) The card has room for its load, its absent seats and the reserves each seat
        #     meets, every seat as if started last.
        _room(t, card)
        # (3) No gated seat on the card sees its load past its gate bound.
        _gate(t, card)
        # (4) An exclusive seat shares its card with no other new seat.
        _exclusive(t, card)
        # Tie-break: tighter fits (less room left beside the seat when alone on the card).
        _tight_fits(t, card)

    # (5) Keep each host's largest free hole as large as possible.
    _holes(t, exact_hole)

    t.model.objective(linear(t.objective.items()))
    return t.model, ModelMaps(x=t.x, y=t.y, placed=t.placed, load=t.load, weights=t.weights)


@dataclass
class _Terms:
    """What the families share while the model is built: its variables and the objective.

    The objective is one coefficient map, turned into an expression once at the end.
    """

    problem: Problem
    model: Model
    weights: dict[str, float]
    by_seat: dict[str, list[PairKey]]
    by_card: dict[CardKey, list[PairKey]]
    x: dict[PairKey, Var]
    placed: dict[str, Var]
    max_total: int  # the widest card's CUDA total: the scale of the hole and tight-fit terms
    y: dict[tuple[str, str], Var] = field(default_factory=dict)
    load: dict[CardKey, Var] = field(default_factory=dict)
    held: dict[CardKey, dict[str, Var | float]] = field(default_factory=dict)
    objective: dict[Var, float] = field(default_factory=lambda: defaultdict(float))

    @classmethod
    def start(cls, problem: Problem) -> _Terms:
        """The model with x[s,c] and placed[s], and the eligible pairs by seat and by card."""
        model = Model("gpuplan_placement", maximise=True)
        by_seat: dict[str, list[PairKey]] = defaultdict(list)
        by_card: dict[CardKey, list[PairKey]] = defaultdict(list)
        for pair in problem.need:
            by_seat[pair[0]].append(pair)
            by_card[(pair[1], pair[2])].append(pair)
        x = {pair: model.binary(f"x_{i}") for i, pair in enumerate(problem.need)}
        placed = {new.name: model.binary(f"placed_{i}") for i, new in enumerate(problem.seats)}
        max_total = max((slot.cuda_total for slot in problem.cards), default=1) or 1
        return cls(
            problem, model, priority_weights(problem), by_seat, by_card, x, placed, max_total
        )

    @cached_property
    def residents(self) -> dict[str, int]:
        """resident_u per new seat, in bytes."""
        return {new.name: new.seat.resident_bytes for new in self.problem.seats}

    @cached_property
    def exclusive(self) -> frozenset[str]:
        """The new seats that want a card of their own."""
        return frozenset(new.name for new in self.problem.seats if new.seat.exclusive)


@dataclass(frozen=True)
class _Card:
    """One usable card while its rows are added: its pairs, load_c and held reserves."""

    k: int
    slot: CardModel
    pairs: list[PairKey]
    load: Var
    held: dict[str, Var | float]  # per reserve: MiB held, or h_r
    cap: float  # cap_c in MiB
    absent: float  # A_c in MiB
    big_m: float  # more than load_c + A_c + Σ h_r can pass cap_c by


def _assignment(t: _Terms, i: int, new: NewSeat) -> None:
    """(1) for seat `new`: Σ_c x[s,c] = placed[s], or N cards of one host; W_s·placed[s] scored."""
    model, x, placed = t.model, t.x, t.placed[new.name]
    pairs = t.by_seat.get(new.name, [])
    count = new.seat.card_count
    t.objective[placed] += t.weights[new.name]
    if not pairs:
        model.add(placed == 0, f"none_{i}")
        return
    if count == 1:
        model.add(linear([(x[p], 1.0) for p in pairs] + [(placed, -1.0)]) == 0, f"assign_{i}")
        return
    per_host: dict[str, list[PairKey]] = defaultdict(list)
    for pair in pairs:
        per_host[pair[1]].append(pair)
    for j, (host, host_pairs) in enumerate(per_host.items()):
        var = model.binary(f"y_{i}_{j}")
        t.y[(new.name, host)] = var
        if len(host_pairs) < count:
            model.add(var == 0, f"few_{i}_{j}")
        model.add(
            linear([(x[p], 1.0) for p in host_pairs] + [(var, -float(count))]) == 0,
            f"ncards_{i}_{j}",
        )
    model.add(
        linear([(t.y[(new.name, h)], 1.0) for h in per_host] + [(placed, -1.0)]) == 0,
        f"onehost_{i}",
    )


def _card(t: _Terms, k: int, slot: CardModel) -> _Card:
    """load_c = Σ need[s,c]·x[s,c], and h_r ≥ base_r − Σ_{u ∈ for(r)} resident_u·x[u,c]."""
    model, x, need = t.model, t.x, t.problem.need
    pairs = t.by_card.get(slot.key, [])
    # A redeploy's need is net of its own bytes on the card, which may exceed it: the card's
    # load may then go below zero.
    load = model.variable(f"load_{k}", low=min(0.0, sum(min(0.0, _mib(need[p])) for p in pairs)))
    t.load[slot.key] = load
    model.add(linear([(x[p], _mib(need[p])) for p in pairs] + [(load, -1.0)]) == 0, f"load_{k}")
    held: dict[str, Var | float] = {}
    t.held[slot.key] = held
    held_max = 0.0
    for r_i, reserve in enumerate(slot.reserves):
        base = reserve.reserve_bytes - reserve.running_own_bytes
        own = [p for p in pairs if p[0] in reserve.for_]
        held_max += _mib(reserve.idle_bytes)
        if not own:
            held[reserve.name] = _mib(reserve.idle_bytes)
            continue
        h = model.variable(f"held_{k}_{r_i}", low=0)
        model.add(
            linear([(h, 1.0)] + [(x[p], _mib(t.residents[p[0]])) for p in own]) >= _mib(base),
            f"reserve_{k}_{r_i}",
        )
        held[reserve.name] = h
    cap = _mib(slot.capacity_bytes)
    absent = _mib(slot.fixed_held_bytes)
    load_max = sum(_mib(need[p]) for p in pairs)
    big_m = max(0.0, load_max + absent + held_max - cap) + 1.0
    return _Card(k, slot, pairs, load, held, cap, absent, big_m)


def _room(t: _Terms, card: _Card) -> None:
    """(2): load_c + A_c + Σ_{r not exempting G} h_r ≤ cap_c + M·(1 − z[c,G]), x[s,c] ≤ z[c,G].

    Seats are grouped by the reserves they are exempt from on this card. Where one group meets
    only constant holds that fit, the row is written without z.
    """
    model, slot, k = t.model, card.slot, card.k
    groups: dict[frozenset[str], list[PairKey]] = defaultdict(list)
    for pair in card.pairs:
        exempt = frozenset(r.name for r in slot.reserves if pair[0] in r.for_)
        groups[exempt].append(pair)
    needs_switch = len(groups) > 1 or any(not isinstance(h, float) for h in card.held.values())
    for g_i, (exempt, members) in enumerate(groups.items()):
        held = total(term for name, term in card.held.items() if name not in exempt)
        constant_held = sum(r.idle_bytes for r in slot.reserves if r.name not in exempt)
        if not needs_switch and constant_held <= slot.open_bytes:
            # Holds with nothing placed, and every seat here meets the same held bytes.
            model.add(card.load + card.absent + held <= card.cap, f"room_{k}_{g_i}")
            continue
        z = model.binary(f"z_{k}_{g_i}")
        for m_i, pair in enumerate(members):
            model.add(linear([(t.x[pair], 1.0), (z, -1.0)]) <= 0, f"group_{k}_{g_i}_{m_i}")
        model.add(
            card.load + card.absent + held <= card.cap + card.big_m * (1 - z), f"room_{k}_{g_i}"
        )


def _gate(t: _Terms, card: _Card) -> None:
    """(3) vLLM's gate for each gated seat on the card, as if it started last.

    The card's load may not pass the smallest bound among the gated seats on it. Bounds sorted
    B_1 < … < B_k, v_j ∈ [0,1] rising with j, v_j ≥ x[s,c] for seats with bound B_j, and
    load_c ≤ C − Σ_j d_j·v_j with d_j = B_{j+1} − B_j, d_k = C − B_k: the smallest active
    bound is exact at integers and far tighter than a big-M per seat.
    """
    model, slot, k, gate_bound = t.model, card.slot, card.k, t.problem.gate_bound
    gated = sorted({gate_bound[p] for p in card.pairs if p in gate_bound})
    if not gated:
        return
    loosest = _mib(slot.open_bytes)
    levels = [_mib(b) for b in gated]
    steps = [levels[j + 1] - levels[j] for j in range(len(levels) - 1)]
    steps.append(max(0.0, loosest - levels[-1]))
    level_var = [model.variable(f"gate_{k}_{j}", low=0, up=1) for j in range(len(levels))]
    index = {bound: j for j, bound in enumerate(gated)}
    for j in range(1, len(level_var)):
        model.add(linear([(level_var[j], 1.0), (level_var[j - 1], -1.0)]) >= 0, f"gaterise_{k}_{j}")
    for p_i, pair in enumerate(card.pairs):
        bound = gate_bound.get(pair)
        if bound is not None:
            model.add(
                linear([(t.x[pair], 1.0), (level_var[index[bound]], -1.0)]) <= 0,
                f"gateon_{k}_{p_i}",
            )
    model.add(
        linear([(card.load, 1.0)] + [(v, d) for v, d in zip(level_var, steps, strict=True)])
        <= loosest,
        f"gate_{k}",
    )


def _exclusive(t: _Terms, card: _Card) -> None:
    """(4): Σ_{t≠s} x[t,c] + K_c·x[s,c] ≤ K_c for each exclusive seat s, K_c the other pairs."""
    for p_i, pair in enumerate(card.pairs):
        if pair[0] not in t.exclusive:
            continue
        rest = [(t.x[q], 1.0) for q in card.pairs if q[0] != pair[0]]
        if rest:
            t.model.add(
                linear([*rest, (t.x[pair], float(len(rest)))]) <= len(rest), f"excl_{card.k}_{p_i}"
            )


def _tight_fits(t: _Terms, card: _Card) -> None:
    """The tie-break − 1e-3/|S| · x[s,c]·slack[s,c], slack = room left alone / widest total."""
    weight = TIGHT_WEIGHT / max(1, len(t.problem.seats))
    scale = _mib(t.max_total)
    for pair in card.pairs:
        slack = max(0.0, card.cap - card.absent - _mib(t.problem.need[pair])) / scale
        t.objective[t.x[pair]] -= weight * slack


def _holes(t: _Terms, exact_hole: bool | None) -> None:
    """(5): per host, Σ_c b_c = 1 and m_h ≤ room after − held + M·(1 − b_c); + m_h scored.

    Past EXACT_HOLE_MAX_PAIRS eligible pairs (unless `exact_hole`), the linear stand-in:
    every byte placed on the host's widest card is charged at the hole's weight.
    """
    problem, model = t.problem, t.model
    hosts = [h for h, cards in problem.hosts.items() if any(c.ok for c in cards)]
    max_total = _mib(t.max_total)
    hole_weight = 1.0 / (max(1, len(hosts)) * max_total)
    exact = len(problem.need) <= EXACT_HOLE_MAX_PAIRS if exact_hole is None else exact_hole
    for h_i, host in enumerate(hosts):
        cards = [c for c in problem.hosts[host] if c.ok]
        if not any(slot.key in t.by_card for slot in cards):
            continue  # nothing new can land here: its hole is fixed
        if not exact:
            # Large fleets: leave the host's largest hole untouched where possible, by charging
            # every byte placed on it (linear, no binaries; exact form below).
            widest = max(cards, key=lambda c: (c.plannable_bytes, -c.index))
            for p in t.by_card.get(widest.key, []):
                t.objective[t.x[p]] -= hole_weight * _mib(problem.need[p])
            continue
        # No lower bound: where holds exceed every card's room, the largest hole is negative.
        hole = model.variable(f"hole_{h_i}", up=max_total)
        chosen = {c.key: model.binary(f"b_{h_i}_{j}") for j, c in enumerate(cards)}
        model.add(total(chosen.values()) == 1, f"holepick_{h_i}")
        for j, slot in enumerate(cards):
            after = _mib(slot.open_bytes) - t.load[slot.key]
            held_now = total(t.held.get(slot.key, {}).values())
            big_m = max_total * 2 + _mib(sum(r.reserve_bytes for r in slot.reserves))
            model.add(hole <= after - held_now + big_m * (1 - chosen[slot.key]), f"hole_{h_i}_{j}")
        t.objective[hole] += hole_weight


def _start_values(
    maps: ModelMaps, initial: dict[str, tuple[str, tuple[int, ...]]]
) -> list[tuple[Var, int]]:
    """(variable, value) for every assignment binary, from a placement (0 where it places nothing)."""
    chosen = {(name, host, card) for name, (host, cards) in initial.items() for card in cards}
    values = [(var, 1 if pair in chosen else 0) for pair, var in maps.x.items()]
    values += [(var, 1 if name in initial else 0) for name, var in maps.placed.items()]
    values += [
        (var, 1 if initial.get(name, ("", ()))[0] == host else 0)
        for (name, host), var in maps.y.items()
    ]
    return values


def solve(
    problem: Problem,
    *,
    solver: SolverName = "highs",
    time_limit: float = DEFAULT_TIME_LIMIT_S,
    initial: dict[str, tuple[str, tuple[int, ...]]] | None = None,
) -> Solution:
    """Build and solve; return the proposed placement (verify it before showing it).

    `time_limit` bounds build and solve together. `initial` (a verified placement, e.g. the
    greedy one) is the solver's MIP start, so a time-limited answer is never worse.
    """
    started = time.perf_counter()
    model, maps = build_model(problem)
    built = time.perf_counter()
    if solver not in SOLVERS:
        raise SolverError(f"unknown solver {solver!r}; use cbc or highs")
    outcome = solvers.solve(
        model,
        _settings(problem, maps, solver, time_limit - (built - started)),
        start=_start_values(maps, initial) if initial else (),
    )
    solved = time.perf_counter()
    status = _status(outcome, solver)
    found = status != "no_solution"
    return Solution(
        assignment=_assignment_read(maps) if found else {},
        status=status,
        solver=solver,
        objective=model.objective_value() if found else None,
        gap=outcome.mip_gap if status == "time_limit" else (0.0 if status == "optimal" else None),
        build_s=built - started,
        solve_s=solved - built,
        variables=model.variables,
        constraints=model.constraints,
    )


def _settings(problem: Problem, maps: ModelMaps, solver: SolverName, left_s: float) -> Settings:
    """The solver's time limit and gaps for a model built with `left_s` seconds left."""
    # CBC overruns its own limit by a few seconds reading a large model: leave it headroom.
    remaining = max(0.05, 0.85 * left_s)
    # Seats weigh ≥ 2 and every tie-break together < 1.001, so an absolute gap below 1 never
    # trades a seat. Small models chase the tie-breaks (hole, tight fit) to 1 % of a card;
    # large ones stop once the seat count is proven, tie-breaks as found.
    small = len(problem.need) <= EXACT_HOLE_MAX_PAIRS
    # A relative gap applies to the whole objective: with many priority levels the weights
    # grow, so shrink it until it is worth less than half of the cheapest seat.
    return Settings(
        solver,
        remaining,
        gap_rel=min(GAP_REL, 0.5 / (sum(maps.weights.values()) + 2.0)),
        gap_abs=TIE_BREAK_GAP_ABS if small else SEAT_GAP_ABS,
        # CBC's preprocessing strengthens the load rows for seconds on large models and
        # does not watch the time limit while it does (bench/bench_plan.py).
        preprocess=small,
    )


def _assignment_read(maps: ModelMaps) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Per placed seat, its host and cards, read from x (a seat split over hosts is an error)."""
    chosen: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for pair, var in maps.x.items():
        value = value_of(var)
        if value is not None and value > 0.5:
            chosen[pair[0]].append((pair[1], pair[2]))
    assignment: dict[str, tuple[str, tuple[int, ...]]] = {}
    for name, cards in chosen.items():
        hosts = {host for host, _ in cards}
        if len(hosts) != 1:
            raise SolverError(f"solver put {name} on cards of several hosts: {sorted(hosts)}")
        assignment[name] = (cards[0][0], tuple(sorted(index for _, index in cards)))
    return assignment


def _status(outcome: Outcome, solver: str) -> Literal["optimal", "time_limit", "no_solution"]:
    if outcome.solution == "optimal" and outcome.status == "optimal":
        return "optimal"
    if outcome.solution == "feasible":
        return "time_limit"
    if outcome.solution == "none" or outcome.status == "not solved":
        return "no_solution"
    raise SolverError(
        f"{solver} ended with status {outcome.status} (solution status {outcome.solution}); "
        "the model is always feasible, so this is a solver failure"
    )
