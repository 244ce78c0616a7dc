"""`plan` as a library call: build the problem, solve, verify every proposal, explain every refusal.

No I/O here: the command reads files and the ledger; `plan()` takes frozen data and returns frozen data.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from inventory.snapshot import Snapshot, format_utc
from placement.capacity import held_parts, margin_bytes, seats_declared_on
from placement.problem import NewSeat, Problem, build_problem, check_snapshots, new_seats
from placement.verdict import Reason, Verdict
from placement.verify import Placement, judge, other_need, verify_placement
from seats.model import Catalogue, Seat
from seats.units import format_bytes

MAX_GREEDY_COMBINATIONS = 64


@dataclass(frozen=True)
class CardRow:
    """One card before and after the plan, for the table and the JSON `cards` list."""

    host: str
    index: int
    error: str | None
    total_bytes: int | None  # the CUDA total
    used_bytes: int | None
    free_before_bytes: int | None
    free_after_bytes: int | None
    held_bytes: int
    held: tuple[str, ...]
    plannable_before_bytes: int
    plannable_after_bytes: int
    seats: tuple[str, ...]
    new_seats: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """DESIGN.md's plan `cards` entry, with the extra figures the table shows."""
        return {
            "host": self.host,
            "index": self.index,
            "error": self.error,
            "total_bytes": self.total_bytes,
            "used_bytes": self.used_bytes,
            "free_before_bytes": self.free_before_bytes,
            "free_after_bytes": self.free_after_bytes,
            "held_bytes": self.held_bytes,
            "held": list(self.held),
            "plannable_before_bytes": self.plannable_before_bytes,
            "plannable_after_bytes": self.plannable_after_bytes,
            "seats": list(self.seats) + list(self.new_seats),
            "new_seats": list(self.new_seats),
        }


@dataclass(frozen=True)
class PlanResult:
    """The whole answer of `plan`: a verdict per new seat, the cards, and how it was found."""

    verdicts: tuple[Verdict, ...]
    cards: tuple[CardRow, ...]
    solver: str
    status: str  # optimal | time_limit | greedy | empty
    gap: float | None
    warnings: tuple[str, ...]
    snapshots: tuple[Snapshot, ...]
    timings: dict[str, float] = field(default_factory=dict)
    moves: tuple[dict[str, Any], ...] = ()
    moves_note: str | None = None

    @property
    def optimal(self) -> bool:
        """True when the solver proved the placement optimal (or there was nothing to place)."""
        return self.status in ("optimal", "empty")

    @property
    def verdict(self) -> str:
        """'pass' when every new seat is placed, else 'refuse'."""
        return "pass" if all(v.passed for v in self.verdicts) else "refuse"

    def to_json(self) -> dict[str, Any]:
        """DESIGN.md's `plan` JSON shape."""
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
            "seats": [v.to_json() for v in self.verdicts],
            "cards": [row.to_json() for row in self.cards],
            "moves": list(self.moves),
            "moves_note": self.moves_note,
            "warnings": list(self.warnings),
        }


def plan(
    catalogue: Catalogue,
    snapshots: Sequence[Snapshot],
    adds: Sequence[tuple[str, Seat]] = (),
    *,
    solver: str = "cbc",
    time_limit: float = 10.0,
    allow_moves: bool = False,
    sources: Sequence[str] | None = None,
) -> PlanResult:
    """Place every planned seat and every added one on the snapshots' cards; explain the rest.

    `adds` pairs each added seat with where it came from (a file name, for errors).
    `timings` in the result: build, solve, verify, explain (seconds).
    """
    from placement.model import solve

    timings: dict[str, float] = {}
    started = time.perf_counter()
    warnings = check_snapshots(
        catalogue, snapshots, list(sources) if sources else [s.host for s in snapshots]
    )
    seats = new_seats(catalogue, adds)
    problem = build_problem(catalogue, snapshots, seats)
    timings["problem"] = time.perf_counter() - started
    status = "empty"
    gap: float | None = 0.0
    assignment: dict[str, tuple[str, tuple[int, ...]]] = {}
    if seats:
        solution = solve(problem, solver=solver, time_limit=time_limit)  # type: ignore[arg-type]
        timings["build"] = solution.build_s
        timings["solve"] = solution.solve_s
        status, gap = solution.status, solution.gap
        assignment = solution.assignment
        if status == "no_solution":
            status, gap = "greedy", None
            warnings.append(
                f"{solver} found no placement within {time_limit:g} s; showing a greedy "
                "(first-fit-decreasing) one, not proven optimal"
            )
            assignment = greedy_assignment(problem)
        elif status == "time_limit":
            warnings.append(
                f"{solver} hit the {time_limit:g} s time limit: the placement is not proven optimal"
            )
    verify_started = time.perf_counter()
    placements, failed = _verified(problem, assignment)
    timings["verify"] = time.perf_counter() - verify_started
    explain_started = time.perf_counter()
    verdicts = []
    accepted = {v.seat: v for v in verify_placement(catalogue, problem.snapshots, placements)}
    for new in problem.seats:
        if new.name in accepted:
            verdicts.append(accepted[new.name])
        else:
            verdicts.append(explain_refusal(problem, new, placements, failed.get(new.name)))
    timings["explain"] = time.perf_counter() - explain_started
    moves: tuple[dict[str, Any], ...] = ()
    moves_note: str | None = None
    if allow_moves and any(not v.passed for v in verdicts):
        from placement.moves import plan_moves

        outcome = plan_moves(problem, placements, solver=solver, time_limit=time_limit)
        if outcome is not None:
            verdicts, placements, moves, moves_note = outcome
        else:
            moves_note = (
                "no single move of a running seat to another card of its host places more "
                "seats; no such order exists"
            )
    return PlanResult(
        verdicts=tuple(verdicts),
        cards=tuple(card_rows(catalogue, problem.snapshots, placements)),
        solver=solver,
        status=status,
        gap=gap,
        warnings=tuple(dict.fromkeys(warnings)),
        snapshots=problem.snapshots,
        timings=timings,
        moves=moves,
        moves_note=moves_note,
    )


def _verified(
    problem: Problem, assignment: dict[str, tuple[str, tuple[int, ...]]]
) -> tuple[list[Placement], dict[str, Verdict]]:
    """The proposal, less any seat the verifier refuses (lowest priority dropped first)."""
    placements = [
        Placement(problem.seat(name).seat, host, cards)
        for name, (host, cards) in assignment.items()
    ]
    failed: dict[str, Verdict] = {}
    while placements:
        verdicts = verify_placement(problem.catalogue, problem.snapshots, placements)
        bad = [(p, v) for p, v in zip(placements, verdicts, strict=True) if not v.passed]
        if not bad:
            break
        # The solver's floating point disagreed with exact bytes: drop the least important.
        worst = min(bad, key=lambda item: (item[0].seat.priority, -item[0].seat.resident))
        failed[worst[0].seat.name] = worst[1]
        placements = [p for p in placements if p is not worst[0]]
    return placements, failed


def greedy_assignment(problem: Problem) -> dict[str, tuple[str, tuple[int, ...]]]:
    """First-fit-decreasing with the verifier as the fit test: priority, then size, descending."""
    order = sorted(
        problem.seats,
        key=lambda new: (-new.seat.priority, -new.seat.resident * new.seat.card_count, new.name),
    )
    placements: list[Placement] = []
    for new in order:
        found = _first_fit(problem, new, placements)
        if found is not None:
            placements.append(found)
    return {p.seat.name: (p.host, p.cards) for p in placements}


def _first_fit(problem: Problem, new: NewSeat, placements: list[Placement]) -> Placement | None:
    for host in problem.eligible_hosts(new.name):
        cards = [c.index for c in problem.hosts[host] if (new.name, host, c.index) in problem.need]
        for count, chosen in enumerate(combinations(cards, new.seat.card_count)):
            if count >= MAX_GREEDY_COMBINATIONS:
                break
            candidate = Placement(new.seat, host, chosen)
            if _fits_beside(problem, candidate, placements):
                return candidate
    return None


def _fits_beside(problem: Problem, candidate: Placement, placements: list[Placement]) -> bool:
    snapshot = problem.snapshot(candidate.host)
    if not judge(
        problem.catalogue, snapshot, candidate.seat, candidate.cards, others=placements
    ).passed:
        return False
    # Seats already on those cards are re-judged with the candidate as the last start.
    sharing = [
        p for p in placements if p.host == candidate.host and set(p.cards) & set(candidate.cards)
    ]
    everyone = [*placements, candidate]
    for placed in sharing:
        others = [p for p in everyone if p is not placed]
        if not judge(problem.catalogue, snapshot, placed.seat, placed.cards, others=others).passed:
            return False
    return True


def explain_refusal(
    problem: Problem,
    new: NewSeat,
    placements: Sequence[Placement],
    failed: Verdict | None = None,
) -> Verdict:
    """Why `new` is not placed: every card of every host it may use, with every binding rule."""
    seat = new.seat
    catalogue = problem.catalogue
    reasons: list[Reason] = list(failed.reasons) if failed is not None else []
    nearest: list[tuple[int, str]] = [(0, text) for text in failed.nearest] if failed else []
    warnings: list[str] = list(failed.warnings) if failed is not None else []
    hosts = [s.host for s in problem.snapshots if seat.host in (None, s.host)]
    if seat.host is not None and seat.host not in hosts:
        reasons.append(
            Reason(
                "host",
                None,
                None,
                None,
                None,
                f"{seat.name} names host {seat.host}; no snapshot of it was given",
                seat.host,
            )
        )
    one_card = seat.model_copy(update={"gpus": 1}) if seat.card_count > 1 else seat
    pinned = seat.pinned_cards
    need = seat.resident
    fragment_room: dict[str, int] = defaultdict(int)
    for host in hosts:
        snapshot = problem.snapshot(host)
        passing: list[int] = []
        for card in snapshot.cards:
            if pinned is not None and card.index not in pinned:
                continue
            verdict = judge(catalogue, snapshot, one_card, [card.index], others=placements)
            warnings.extend(verdict.warnings)
            need = max(need, verdict.need_bytes or 0)
            if verdict.passed:
                blocked = _blocked_by(problem, Placement(seat, host, (card.index,)), placements)
                if blocked is None:
                    passing.append(card.index)
                else:
                    reasons.append(blocked)
                continue
            reasons.extend(r for r in verdict.reasons if r.rule != "host")
            shorts = [r.short_bytes for r in verdict.reasons if r.short_bytes is not None]
            nearest.extend((min(shorts, default=1 << 62), text) for text in verdict.nearest)
            for reason in verdict.reasons:
                if (
                    reason.rule == "room"
                    and reason.room_bytes is not None
                    and len(verdict.reasons) == 1
                ):
                    fragment_room[host] += max(0, reason.room_bytes)
        if seat.card_count > 1 and len(passing) < seat.card_count:
            reasons.append(
                Reason(
                    "host",
                    None,
                    None,
                    None,
                    None,
                    f"{seat.name} needs {seat.card_count} cards of one host; {host} has "
                    f"{len(passing)} with room for it ({', '.join(map(str, passing)) or 'none'})",
                    host,
                )
            )
        elif passing:
            # Fits alone on a card but the plan gave the room to others (priority, more seats).
            reasons.append(
                Reason(
                    "room",
                    passing[0],
                    need,
                    None,
                    None,
                    f"fits card {passing[0]} of {host} alone, but not beside the seats placed first "
                    "(higher priority, or more seats placed without it)",
                    host,
                )
            )
    for host, total in fragment_room.items():
        if seat.card_count == 1 and total >= need:
            nearest.append(
                (
                    1 << 63,
                    f"fragmentation: {format_bytes(total)} of room across {host}'s cards, but no single "
                    f"card has {format_bytes(need)} — no room without a placement decision "
                    "(--allow-moves)",
                )
            )
    return Verdict(
        verdict="refuse",
        seat=seat.name,
        host=seat.host,
        cards=(),
        reasons=tuple(reasons),
        flags=(),
        warnings=tuple(dict.fromkeys(warnings)),
        nearest=tuple(dict.fromkeys(text for _, text in sorted(nearest, key=lambda item: item[0]))),
        need_bytes=need,
    )


def _blocked_by(
    problem: Problem, candidate: Placement, placements: Sequence[Placement]
) -> Reason | None:
    """The first placed seat that the candidate would refuse if it started there too."""
    snapshot = problem.snapshot(candidate.host)
    everyone = [*placements, candidate]
    for placed in placements:
        if placed.host != candidate.host or not set(placed.cards) & set(candidate.cards):
            continue
        others = [p for p in everyone if p is not placed]
        verdict = judge(problem.catalogue, snapshot, placed.seat, placed.cards, others=others)
        if not verdict.passed:
            first = verdict.reasons[0]
            return Reason(
                first.rule,
                candidate.cards[0],
                first.need_bytes,
                first.room_bytes,
                first.short_bytes,
                f"would refuse {placed.seat.name} (priority {placed.seat.priority}) there: {first.text}",
                candidate.host,
            )
    return None


def card_rows(
    catalogue: Catalogue, snapshots: Sequence[Snapshot], placements: Sequence[Placement]
) -> list[CardRow]:
    """Each card before and after the placements."""
    rows: list[CardRow] = []
    for snapshot in snapshots:
        host = snapshot.host
        for card in snapshot.cards:
            here = [p for p in placements if p.host == host and card.index in p.cards]
            declared = [s.name for s in seats_declared_on(catalogue, host, card.index)]
            foreign = [f"pid {p.pid}" for p in card.processes if p.seat is None]
            if not card.ok or card.free_bytes is None:
                rows.append(
                    CardRow(
                        host,
                        card.index,
                        card.error,
                        None,
                        None,
                        None,
                        None,
                        0,
                        (),
                        0,
                        0,
                        tuple(declared),
                        tuple(p.seat.name for p in here),
                    )
                )
                continue
            added = sum(other_need(catalogue, snapshot, p, card, "plan") for p in here)
            names = [p.seat.name for p in here]
            before_parts = held_parts(catalogue, host, card)
            after_parts = held_parts(catalogue, host, card, placed_here=names)
            margin = margin_bytes(catalogue, host)
            held_before = sum(p.bytes for p in before_parts)
            held_after = sum(p.bytes for p in after_parts)
            free_after = card.free_bytes - added
            rows.append(
                CardRow(
                    host=host,
                    index=card.index,
                    error=None,
                    total_bytes=card.cuda_total_bytes,
                    used_bytes=card.used_bytes,
                    free_before_bytes=card.free_bytes,
                    free_after_bytes=free_after,
                    held_bytes=held_before,
                    held=tuple(p.name for p in before_parts),
                    plannable_before_bytes=max(0, card.free_bytes - held_before - margin),
                    plannable_after_bytes=max(0, free_after - held_after - margin),
                    seats=tuple(sorted(declared) + foreign),
                    new_seats=tuple(names),
                )
            )
    return rows
