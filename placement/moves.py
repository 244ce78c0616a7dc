"""`plan --allow-moves`: move one running seat to another card of its host when that places more seats.

Each move is a restart of minutes, so one move is tried at a time and the cheapest that helps wins;
the stop/start order returned is verified at every step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from inventory.snapshot import Snapshot
from placement.problem import NewSeat, Problem, build_problem
from placement.verdict import Verdict
from placement.verify import Placement, judge, verify_placement
from seats.model import Catalogue, Seat

MAX_CANDIDATES = 200


def _moved_state(
    catalogue: Catalogue, snapshots: Sequence[Snapshot], seat: Seat, target: int
) -> tuple[Catalogue, list[Snapshot], Seat]:
    """The catalogue and snapshots with `seat` stopped, and the seat re-declared at `target`."""
    host = seat.host
    top = max((s.priority for s in catalogue.seats), default=0) + 1
    # Placed before anything else: a running seat is never left out by a move.
    moved = seat.model_copy(update={"state": "planned", "gpus": (target,), "priority": top})
    seats = tuple(moved if s.name == seat.name else s for s in catalogue.seats)
    new_catalogue = catalogue.model_copy(update={"seats": seats})
    out: list[Snapshot] = []
    for snapshot in snapshots:
        if snapshot.host != host:
            out.append(snapshot)
            continue
        cards = []
        for card in snapshot.cards:
            own = [p for p in card.processes if p.seat == seat.name]
            if not own or card.free_bytes is None:
                cards.append(card)
                continue
            freed = sum(p.used_bytes or 0 for p in own)
            cards.append(
                card.model_copy(
                    update={
                        "processes": tuple(p for p in card.processes if p.seat != seat.name),
                        "free_bytes": card.free_bytes + freed,
                        "used_bytes": max(0, (card.used_bytes or 0) - freed),
                    }
                )
            )
        out.append(snapshot.model_copy(update={"cards": tuple(cards)}))
    return new_catalogue, out, moved


def _score(verdicts: Sequence[Verdict], weights: dict[str, int]) -> tuple[int, ...]:
    """Placed seats per priority, highest priority first (compared lexicographically)."""
    levels = sorted(set(weights.values()), reverse=True)
    placed = {v.seat for v in verdicts if v.passed}
    return tuple(
        sum(1 for name, p in weights.items() if p == level and name in placed) for level in levels
    )


def plan_moves(
    problem: Problem,
    placements: Sequence[Placement],
    *,
    solver: str = "cbc",
    time_limit: float = 10.0,
) -> tuple[list[Verdict], list[Placement], tuple[dict[str, Any], ...], str] | None:
    """The best single move of a running seat, with its verified stop/start order; None: no new seats."""
    from placement.model import solve
    from placement.planner import _verified, explain_refusal

    if not problem.seats:
        return None
    weights = {new.name: new.seat.priority for new in problem.seats}
    base = verify_placement(problem.catalogue, problem.snapshots, list(placements))
    best_score = _score(base, weights)
    best: tuple[list[Verdict], list[Placement], tuple[dict[str, Any], ...]] | None = None
    hosts = {s.host for s in problem.snapshots}
    candidates: list[tuple[Seat, int]] = []
    for seat in problem.catalogue.seats:
        pinned = seat.pinned_cards
        if seat.state != "running" or seat.host not in hosts or pinned is None or len(pinned) != 1:
            continue
        snapshot = problem.snapshot(seat.host)
        for card in snapshot.cards:
            if card.ok and card.index != pinned[0]:
                candidates.append((seat, card.index))
    # Cheapest restarts first: small seats move faster.
    candidates.sort(key=lambda item: (item[0].resident, item[0].name, item[1]))
    for seat, target in candidates[:MAX_CANDIDATES]:
        catalogue, snapshots, moved = _moved_state(
            problem.catalogue, problem.snapshots, seat, target
        )
        seats = [NewSeat(moved, "move"), *problem.seats]
        moved_problem = build_problem(catalogue, snapshots, seats)
        if (moved.name, moved.host or "", target) not in moved_problem.need:
            continue
        solution = solve(moved_problem, solver=solver, time_limit=time_limit)  # type: ignore[arg-type]
        new_placements, _ = _verified(moved_problem, solution.assignment)
        if moved.name not in {p.seat.name for p in new_placements}:
            continue
        verdicts = verify_placement(catalogue, moved_problem.snapshots, new_placements)
        score = _score(verdicts, weights)
        if score <= best_score:
            continue
        steps = _steps(catalogue, moved_problem, seat, moved, new_placements)
        if steps is None:
            continue
        by_name = {v.seat: v for v in verdicts}
        full = [
            by_name[new.name]
            if new.name in by_name
            else explain_refusal(moved_problem, new, new_placements)
            for new in problem.seats
        ]
        best_score = score
        best = (full, new_placements, steps)
    if best is None:
        return None
    verdicts, new_placements, steps = best
    moved_name = steps[0]["seat"]
    note = f"1 move ({moved_name}); each step below was verified against the state it starts from"
    return verdicts, [p for p in new_placements if p.seat.name != moved_name], steps, note


def _steps(
    catalogue: Catalogue,
    problem: Problem,
    original: Seat,
    moved: Seat,
    placements: Sequence[Placement],
) -> tuple[dict[str, Any], ...] | None:
    """Stop the seat, start it on its new card, then start the new seats: each start is verified."""
    host = original.host or ""
    steps: list[dict[str, Any]] = [
        {
            "action": "stop",
            "seat": original.name,
            "host": host,
            "cards": list(original.pinned_cards or ()),
        }
    ]
    started: list[Placement] = []
    order = sorted(placements, key=lambda p: p.seat.name != moved.name)
    for placement in order:
        snap = problem.snapshot(placement.host)
        verdict = judge(catalogue, snap, placement.seat, placement.cards, others=started)
        if not verdict.passed:
            return None
        started.append(placement)
        if placement.seat.name == moved.name or placement.host == host:
            steps.append(
                {
                    "action": "start",
                    "seat": placement.seat.name,
                    "host": placement.host,
                    "cards": list(placement.cards),
                    "flags": list(verdict.flags),
                }
            )
    return tuple(steps)
