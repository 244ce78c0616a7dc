"""`plan` as a library call: build the problem, solve, verify every proposal, explain every refusal.

No I/O here: the command reads files and the ledger; `plan()` takes frozen data and returns frozen data.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from inventory.snapshot import Snapshot, format_utc
from placement.fit.card import CardKey, CardModel
from placement.fit.consistency import check_snapshots
from placement.fit.engines.note import Note, Said, fact_json
from placement.fit.kv import need_floored, seat_cuda_context, with_need_floors
from placement.fit.verdict import Verdict
from placement.fit.verify import (
    CardStates,
    Placement,
)
from placement.plan.approved import approved_holds, approved_verdicts
from placement.plan.bound import LevelBound, level_bounds
from placement.plan.cards import PlanCardRow, card_rows
from placement.plan.explain import SUMMARY_PLACES, ExplainClasses, explain_refusal, summarise
from placement.plan.greedy import (
    best_fit_levels,
    greedy_assignment,
    has_eligible_host,
    pairs_exceed,
)
from placement.plan.most import most_seats
from placement.plan.problem import (
    Problem,
    build_problem,
    few_collections,
    new_seats,
    split_by_host,
)
from placement.plan.score import priority_weights, score
from placement.plan.verified import Assignment, verified_verdicts
from seats.model import Catalogue, Seat

if TYPE_CHECKING:
    from placement.fit.week import SeatWindow
    from placement.plan.window import WindowPlan

__all__ = ["PlanCardRow", "PlanResult", "card_rows", "explain_refusal", "greedy_assignment", "plan"]


@dataclass(frozen=True)
class PlanResult:
    """The whole answer of `plan`: a verdict per new seat, the cards, and how it was found."""

    verdicts: tuple[Verdict, ...]
    cards: tuple[PlanCardRow, ...]
    solver: str
    status: str  # optimal | time_limit | greedy | empty
    gap: float | None
    warnings: tuple[Said, ...]
    snapshots: tuple[Snapshot, ...]
    timings: dict[str, float] = field(default_factory=dict)
    moves: tuple[dict[str, Any], ...] = ()
    moves_note: str | None = None
    # Per priority level, highest first: the most seats any placement could place there.
    bounds: tuple[LevelBound, ...] = ()
    # `plan --window`: each judged seat's window (its VERDICT's `window` block).
    windows: Mapping[str, SeatWindow] = field(default_factory=dict)

    @property
    def optimal(self) -> bool:
        """True when the solver proved the placement optimal (or there was nothing to place)."""
        return self.status in ("optimal", "empty")

    @property
    def verdict(self) -> str:
        """'unknown' when any seat cannot be judged, else 'pass' when every one is placed, else 'refuse'."""
        if any(v.verdict == "unknown" for v in self.verdicts):
            return "unknown"
        return "pass" if all(v.passed for v in self.verdicts) else "refuse"

    def to_json(self, explain: str = "all") -> dict[str, Any]:
        """DESIGN.md's `plan` JSON shape.

        `explain="summary"`: a refusal on more than three cards or hosts keeps the reasons of
        its tightest three, and `reason_counts` says on how many places each rule binds; its
        `nearest` keeps the first three changes, `nearest_count` saying how many there are.
        """
        return {
            "schema": 1,
            "verdict": self.verdict,
            "optimal": self.optimal,
            "solver": self.solver,
            "status": self.status,
            "gap": self.gap,
            "snapshots": [
                {"host": s.host, "taken_at": format_utc(s.taken_at)} for s in self.snapshots
            ],
            "seats": [self._seat_json(v, explain) for v in self.verdicts],
            "cards": [row.to_json() for row in self.cards],
            "moves": list(self.moves),
            "moves_note": self.moves_note,
            "warnings": [fact_json(w) for w in self.warnings],
            "bounds": [{**asdict(level), "gap": level.gap} for level in self.bounds],
        }

    def _seat_json(self, verdict: Verdict, explain: str) -> dict[str, Any]:
        data = _verdict_json(verdict, explain)
        window = self.windows.get(verdict.seat)
        if window is not None:
            data["window"] = window.to_json()
        return data


def _verdict_json(verdict: Verdict, explain: str) -> dict[str, Any]:
    """A seat's VERDICT; a long refusal cut to its summary unless `explain` is "all"."""
    summary = summarise(verdict) if explain == "summary" and not verdict.passed else None
    if summary is None:
        return verdict.to_json()
    # The summary's reasons only: a long refusal's others are not written out (explain.py).
    data = Verdict(
        **{f.name: getattr(verdict, f.name) for f in fields(Verdict) if f.name != "reasons"}
    ).to_json()
    data["reasons"] = [reason.to_json() for reason in summary.reasons]
    data["reason_counts"] = summary.counts
    if len(verdict.nearest) > SUMMARY_PLACES:
        data["nearest"] = [fact_json(n) for n in verdict.nearest[:SUMMARY_PLACES]]
        data["nearest_count"] = len(verdict.nearest)
    return data


# The integer program's solver unless one is named: HiGHS runs in this process and stops at
# its own time limit; CBC (`--solver cbc`) runs as a subprocess and may overrun its limit.
DEFAULT_SOLVER = "highs"

# Past this many eligible (seat, card) pairs, a greedy placement that already places every
# placeable seat is kept as it is: the model would only refine tie-breaks, at fleet-size cost.
SKIP_SOLVER_PAIRS = 2_000
# Past this many eligible pairs the integer program is not built at all when greedy leaves
# seats out: on the crowded 64 × 8 fleet (100,000+ pairs) it spent 57 s to place fewer.
SOLVER_MAX_PAIRS = 50_000


@few_collections()  # a fleet's plan allocates much and frees little: see problem.py
def plan(
    catalogue: Catalogue,
    snapshots: Sequence[Snapshot],
    adds: Sequence[tuple[str, Seat]] = (),
    *,
    solver: str = DEFAULT_SOLVER,
    time_limit: float = 10.0,
    allow_moves: bool = False,
    max_moves: int = 3,
    sources: Sequence[str] | None = None,
    unusable: Mapping[str, str] | None = None,
    window: WindowPlan | None = None,
) -> PlanResult:
    """Place every planned seat and every added one on the snapshots' cards; explain the rest.

    `adds` pairs each added seat with where it came from (a file name, for errors).
    `unusable`: catalogue hosts with no usable snapshot (host → why); a seat that depends on
    them is `unknown` (placement.plan.unusable).
    `window`: `plan --window` (placement.plan.window): the solver places on each card's
    window room, and a placement the replay refuses is not kept (the seat's next is tried).
    `timings` in the result (seconds): problem, eligible, greedy, search (crowded fleets), build
    and solve (the integer program), verify, explain, bound, cards.
    """
    timings: dict[str, float] = {}
    started = time.perf_counter()
    warnings: list[Said] = [
        *check_snapshots(
            catalogue,
            snapshots,
            list(sources) if sources else [s.host for s in snapshots],
            [seat for _, seat in adds],
        )
    ]
    floored = with_need_floors(catalogue)
    catalogue = floored.catalogue
    warnings += floored.warnings
    raised = _floored_adds(catalogue, adds)
    warnings += [warning for _, (_, warning) in raised if warning]
    adds = [(origin, seat) for origin, (seat, _) in raised]
    every = new_seats(catalogue, adds)
    # Seats a ledger already approved keep their holds and are not placed again.
    holds = approved_holds(snapshots, every)
    seats = [new for new in every if new.name not in holds]
    problem = build_problem(catalogue, snapshots, seats)
    timings["problem"] = time.perf_counter() - started
    found = _Found()
    card_windows = window.card_windows(problem) if window is not None and seats else {}
    proposing = window.proposing(problem, card_windows) if window is not None and seats else problem
    if seats:
        found = _assign(proposing, solver, time_limit, started, timings, warnings)
    verify_started = time.perf_counter()
    placed_models: dict[CardKey, CardModel] = {}
    placements, failed, last = verified_verdicts(problem, found.assignment, placed_models)
    settled = None
    if window is not None and seats:
        settled = window.settle(problem, placements, last, card_windows)
        placements, last = settled.placements, settled.ends
    timings["verify"] = time.perf_counter() - verify_started
    gap = found.gap
    if seats and gap is None and found.bound:
        # The seat part of the gap: how far the verified placement is from the trivial bound.
        got = score((p.seat.name for p in placements), priority_weights(problem.seats))
        gap = (found.bound - got) / found.bound
    explain_started = time.perf_counter()
    # The verifier's card models hold exactly these placements unless the window moved them.
    verdicts = _verdicts(
        problem, placements, failed, last, placed_models if settled is None else None
    )
    if settled is not None:
        verdicts = [settled.shown.get(v.seat, v) for v in verdicts]
    timings["explain"] = time.perf_counter() - explain_started
    moves: tuple[dict[str, Any], ...] = ()
    moves_note: str | None = None
    moved_rows: list[PlanCardRow] | None = None
    if allow_moves and window is None and any(not v.passed for v in verdicts):
        from placement.plan.moves import plan_moves

        outcome = plan_moves(
            problem,
            placements,
            solver=solver,
            time_limit=max(0.5, time_limit - (time.perf_counter() - started)),
            max_moves=max_moves,
        )
        moves_note = outcome.note
        if outcome.verdicts is not None and outcome.placements is not None:
            verdicts, placements, moves = outcome.verdicts, outcome.placements, outcome.steps
            moved_rows = outcome.cards
    if holds:
        approved = approved_verdicts(catalogue, problem.snapshots, every, holds, placements)
        verdicts = [*approved, *verdicts]
    bound_started = time.perf_counter()
    bounds = tuple(level_bounds(problem, (v.seat for v in verdicts if v.passed)))
    timings["bound"] = time.perf_counter() - bound_started
    if unusable:
        from placement.plan.unusable import with_unknowns

        verdicts = with_unknowns(catalogue, [n.seat for n in every], verdicts, unusable)
    cards_started = time.perf_counter()
    cards = tuple(
        moved_rows
        or card_rows(
            catalogue,
            problem.snapshots,
            placements,
            card_views=problem.card_catalogues,
            models=problem.models,
        )
    )
    timings["cards"] = time.perf_counter() - cards_started
    return PlanResult(
        verdicts=tuple(verdicts),
        cards=cards,
        solver=solver,
        status=found.status,
        gap=gap,
        warnings=tuple(dict.fromkeys(warnings)),
        snapshots=problem.snapshots,
        timings=timings,
        moves=moves,
        moves_note=moves_note,
        bounds=bounds,
        windows=settled.windows if settled is not None else {},
    )


def _floored_adds(
    catalogue: Catalogue, adds: Sequence[tuple[str, Seat]]
) -> list[tuple[str, tuple[Seat, Note | None]]]:
    """Each added seat with its resident raised to its need floor (`need_floored`), and why."""
    contexts: dict[str | None, int] = {}  # by the seat's host: a fleet's adds name few

    def context(seat: Seat) -> int:
        found = contexts.get(seat.host)
        if found is None:
            found = contexts[seat.host] = seat_cuda_context(catalogue, seat)
        return found

    return [(origin, need_floored(seat, context(seat))) for origin, seat in adds]


@dataclass
class _Found:
    """A proposed assignment and how it was found (before the verifier)."""

    status: str = "empty"
    gap: float | None = 0.0
    assignment: Assignment = field(default_factory=dict)
    bound: float = 0.0


def _assign(
    problem: Problem,
    solver: str,
    time_limit: float,
    started: float,
    timings: dict[str, float],
    warnings: list[Said],
) -> _Found:
    """Greedy first; the integer program unless greedy provably places every placeable seat."""
    weights = priority_weights(problem.seats)
    eligible_started = time.perf_counter()
    # No placement places a seat that has no eligible card: the primary objective's bound.
    bound = score((n.name for n in problem.seats if has_eligible_host(problem, n)), weights)
    timings["eligible"] = time.perf_counter() - eligible_started
    # The model may stop at its time limit: start it from the greedy placement (cheap
    # arithmetic), and keep whichever places more.
    greedy_started = time.perf_counter()
    greedy = greedy_assignment(problem)
    timings["greedy"] = time.perf_counter() - greedy_started
    if pairs_exceed(problem, SKIP_SOLVER_PAIRS) and score(greedy, weights) >= bound:
        # Every placeable seat is placed: the seat count is proven optimal without the
        # solver, whose only gain here would be the tie-breaks.
        warnings.append(
            "every seat that has an eligible card is placed (seat count proven optimal); "
            "the hole and tight-fit tie-breaks are the greedy placement's, not optimised"
        )
        return _Found("greedy", 0.0, greedy, bound)
    if score(greedy, weights) >= bound and all(_only_placement(problem, name) for name in greedy):
        # Every placeable seat is placed, each where nothing else could take it: no other
        # placement exists, so this one is optimal on every term; the solver is not needed.
        return _Found("optimal", 0.0, greedy, bound)
    parts = split_by_host(problem)
    if parts is not None:
        return _assign_parts(parts, solver, time_limit, started, timings, warnings, bound)
    if pairs_exceed(problem, SOLVER_MAX_PAIRS):
        # Too large for the integer program to improve on within seconds (bench/bench_crowded.py):
        # the most seats best fit packs per level, its gap to the level bounds reported.
        search_started = time.perf_counter()
        assignment, named = _most_greedy(problem, greedy, weights)
        timings["search"] = time.perf_counter() - search_started
        warnings.append(
            f"more than {SOLVER_MAX_PAIRS:,} eligible seat-card pairs: the integer program is not "
            f"run; the placement is {named}, its gap to the upper bound per priority shown"
        )
        return _Found("greedy", None, assignment, bound)
    # Imported only here: pulp and highspy cost more to import than a small plan takes.
    from placement.plan.model import solve

    remaining = max(0.05, time_limit - (time.perf_counter() - started))
    solution = solve(problem, solver=solver, time_limit=remaining, initial=greedy)  # type: ignore[arg-type]
    timings["build"] = solution.build_s
    timings["solve"] = solution.solve_s
    found = _Found(solution.status, solution.gap, solution.assignment, bound)
    if found.status == "no_solution":
        assignment, named = _better_greedy(problem, greedy, weights)
        warnings.append(
            f"{solver} found no placement within {time_limit:g} s; showing a greedy "
            f"({named}) one, not proven optimal"
        )
        return _Found("greedy", None, assignment, bound)
    if found.status == "time_limit":
        warnings.append(
            f"{solver} hit the {time_limit:g} s time limit: the placement is not proven optimal"
        )
        fallback, named = _better_greedy(problem, greedy, weights)
        if score(fallback, weights) > score(found.assignment, weights):
            warnings.append(f"the {named} placement places more than {solver}'s: shown instead")
            return _Found("greedy", found.gap, fallback, bound)
    return found


def _assign_parts(
    parts: Sequence[Problem],
    solver: str,
    time_limit: float,
    started: float,
    timings: dict[str, float],
    warnings: list[Said],
    bound: float,
) -> _Found:
    """Each host's part placed on its own (`split_by_host`): greedy, then its own integer program.

    The parts share no seat and no card, and the priority score adds up over seats, so the
    best placement of the whole is the best of each part, together. Each part gets an equal
    share of the time left, and what a part leaves unused goes to the ones after it.
    """
    found = _Found("optimal", 0.0, {}, bound)
    for left, part in zip(range(len(parts), 0, -1), parts, strict=True):
        share = max(0.05, (time_limit - (time.perf_counter() - started)) / left)
        own: dict[str, float] = {}
        got = _assign(part, solver, share, time.perf_counter(), own, warnings)
        for key, seconds in own.items():
            timings[key] = timings.get(key, 0.0) + seconds
        found.assignment.update(got.assignment)
        found.status = _worse(found.status, got.status)
        found.gap = None if found.status != "optimal" else 0.0
    return found


def _worse(a: str, b: str) -> str:
    """Of two parts' statuses, the one the whole must report (optimal only if both are)."""
    order = ["optimal", "empty", "time_limit", "greedy"]
    return max(a, b, key=lambda status: order.index(status) if status in order else len(order))


def _only_placement(problem: Problem, name: str) -> bool:
    """True when the seat has exactly one eligible placement: one host, as many cards as it takes."""
    hosts = problem.eligible_hosts(name)
    if len(hosts) != 1:
        return False
    host = hosts[0]
    cards = sum(1 for slot in problem.hosts[host] if (name, host, slot.index) in problem.need)
    return cards == problem.seat(name).seat.card_count


def _verdicts(
    problem: Problem,
    placements: Sequence[Placement],
    failed: Mapping[str, Verdict],
    last: Sequence[Verdict],
    placed_models: Mapping[CardKey, CardModel] | None = None,
) -> list[Verdict]:
    """A verdict per new seat: the verifier's last round for the placed, an explanation for the rest.

    `placed_models`: the verifier's models of the cards with these placements placed.
    """
    # The verifier's last round judged exactly these placements: its verdicts are the answer.
    accepted = {v.seat: v for v in last}
    states: CardStates = {}
    classes = ExplainClasses.of(problem, placed_models)
    return [
        accepted[new.name]
        if new.name in accepted
        else explain_refusal(problem, new, placements, failed.get(new.name), states, classes)
        for new in problem.seats
    ]


def _most_greedy(
    problem: Problem, first: Assignment, weights: Mapping[str, float]
) -> tuple[Assignment, str]:
    """The best of first fit, best fit and the smallest-seats search (`placement.plan.most`)."""
    # One best-fit pass, kept level by level: the search reads the levels it would pack alike.
    run = best_fit_levels(problem)
    fallback, named = _better_greedy(problem, first, weights, run.placed)
    most = most_seats(problem, run)
    if score(most, weights) > score(fallback, weights):
        return most, "the smallest-seats-first search's"
    return fallback, named


def _better_greedy(
    problem: Problem,
    first: Assignment,
    weights: Mapping[str, float],
    best: Assignment | None = None,
) -> tuple[Assignment, str]:
    """The fallback placement: best-fit-decreasing (`best`, else packed here) where it places
    more, else first-fit's (`first`)."""
    if best is None:
        best = greedy_assignment(problem, fit="best")
    if score(best, weights) > score(first, weights):
        return best, "best-fit-decreasing"
    return first, "first-fit-decreasing"
