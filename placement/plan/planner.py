"""`plan` as a library call: build the problem, solve, verify every proposal, explain every refusal.

No I/O here: the command reads files and the ledger; `plan()` takes frozen data and returns frozen data.
"""

from __future__ import annotations

import re
import time
from bisect import bisect_left, insort
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from inventory.snapshot import Snapshot, format_utc
from placement.fit.capacity import held_parts, margin_bytes, seats_declared_on
from placement.fit.verdict import Reason, Verdict, host_reason
from placement.fit.verify import (
    CardStates,
    Placement,
    card_catalogues,
    judge,
    other_need,
    verify_placement,
)
from placement.plan.problem import (
    CardSlot,
    NewSeat,
    Problem,
    build_problem,
    check_snapshots,
    new_seats,
)
from seats.model import Catalogue, Seat
from seats.units import format_bytes


@dataclass(frozen=True)
class CardRow:
    """One card before and after the plan, for the table and the JSON `cards` list."""

    host: str
    index: int
    error: str | None
    total_bytes: int | None  # NVML's total, as in the snapshot and `ledger --json`
    used_bytes: int | None
    free_before_bytes: int | None
    free_after_bytes: int | None
    held_bytes: int
    held: tuple[str, ...]
    plannable_before_bytes: int
    plannable_after_bytes: int
    seats: tuple[str, ...]
    new_seats: tuple[str, ...]
    cuda_total_bytes: int | None = None  # what the engine process calls total

    def to_json(self) -> dict[str, Any]:
        """DESIGN.md's plan `cards` entry, with the extra figures the table shows."""
        return {
            "host": self.host,
            "index": self.index,
            "error": self.error,
            "total_bytes": self.total_bytes,
            "cuda_total_bytes": self.cuda_total_bytes,
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


# Past this many eligible (seat, card) pairs, a greedy placement that already places every
# placeable seat is kept as it is: the model would only refine tie-breaks, at fleet-size cost.
SKIP_SOLVER_PAIRS = 2_000


def plan(
    catalogue: Catalogue,
    snapshots: Sequence[Snapshot],
    adds: Sequence[tuple[str, Seat]] = (),
    *,
    solver: str = "cbc",
    time_limit: float = 10.0,
    allow_moves: bool = False,
    max_moves: int = 3,
    sources: Sequence[str] | None = None,
) -> PlanResult:
    """Place every planned seat and every added one on the snapshots' cards; explain the rest.

    `adds` pairs each added seat with where it came from (a file name, for errors).
    `timings` in the result: build, solve, verify, explain (seconds).
    """
    from placement.plan.model import priority_weights, solve

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
    bound = 0.0
    if seats:
        weights = priority_weights(problem)
        # No placement places a seat that has no eligible card: the primary objective's bound.
        bound = sum(weights[n.name] for n in problem.seats if problem.has_eligible_host(n.name))
        # The model may stop at its time limit: start it from the greedy placement (cheap
        # arithmetic), and keep whichever places more.
        greedy_started = time.perf_counter()
        greedy: dict[str, tuple[str, tuple[int, ...]]] | None = greedy_assignment(problem)
        timings["greedy"] = time.perf_counter() - greedy_started
        if (
            greedy is not None
            and problem.pairs_exceed(SKIP_SOLVER_PAIRS)
            and _score(greedy, weights) >= bound
        ):
            # Every placeable seat is placed: the seat count is proven optimal without the
            # solver, whose only gain here would be the tie-breaks.
            status, gap, assignment = "greedy", 0.0, greedy
            warnings.append(
                "every seat that has an eligible card is placed (seat count proven optimal); "
                "the hole and tight-fit tie-breaks are the greedy placement's, not optimised"
            )
        else:
            remaining = max(0.05, time_limit - (time.perf_counter() - started))
            solution = solve(problem, solver=solver, time_limit=remaining, initial=greedy)  # type: ignore[arg-type]
            timings["build"] = solution.build_s
            timings["solve"] = solution.solve_s
            status, gap = solution.status, solution.gap
            assignment = solution.assignment
            if status == "no_solution":
                status, gap = "greedy", None
                assignment, named = _better_greedy(problem, greedy, weights)
                warnings.append(
                    f"{solver} found no placement within {time_limit:g} s; showing a greedy "
                    f"({named}) one, not proven optimal"
                )
            elif status == "time_limit":
                warnings.append(
                    f"{solver} hit the {time_limit:g} s time limit: the placement is not proven optimal"
                )
                fallback, named = _better_greedy(problem, greedy, weights)
                if _score(fallback, weights) > _score(assignment, weights):
                    status, assignment = "greedy", fallback
                    warnings.append(
                        f"the {named} placement places more than {solver}'s: shown instead"
                    )
    verify_started = time.perf_counter()
    placements, failed, last = _verified_verdicts(problem, assignment)
    timings["verify"] = time.perf_counter() - verify_started
    if seats and gap is None and bound:
        # The seat part of the gap: how far the verified placement is from the trivial bound.
        got = _score(
            {p.seat.name: (p.host, p.cards) for p in placements}, priority_weights(problem)
        )
        gap = (bound - got) / bound
    explain_started = time.perf_counter()
    verdicts = []
    # The verifier's last round judged exactly these placements: its verdicts are the answer.
    accepted = {v.seat: v for v in last}
    states: CardStates = {}
    for new in problem.seats:
        if new.name in accepted:
            verdicts.append(accepted[new.name])
        else:
            verdicts.append(explain_refusal(problem, new, placements, failed.get(new.name), states))
    timings["explain"] = time.perf_counter() - explain_started
    moves: tuple[dict[str, Any], ...] = ()
    moves_note: str | None = None
    moved_rows: list[CardRow] | None = None
    if allow_moves and any(not v.passed for v in verdicts):
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
    return PlanResult(
        verdicts=tuple(verdicts),
        cards=tuple(
            moved_rows
            or card_rows(
                catalogue, problem.snapshots, placements, card_views=problem.card_catalogues
            )
        ),
        solver=solver,
        status=status,
        gap=gap,
        warnings=tuple(dict.fromkeys(warnings)),
        snapshots=problem.snapshots,
        timings=timings,
        moves=moves,
        moves_note=moves_note,
    )


def _score(
    assignment: dict[str, tuple[str, tuple[int, ...]]], weights: Mapping[str, float]
) -> float:
    return sum(weights[name] for name in assignment)


def _verified(
    problem: Problem, assignment: dict[str, tuple[str, tuple[int, ...]]]
) -> tuple[list[Placement], dict[str, Verdict]]:
    """The proposal, less any seat the verifier refuses (lowest priority dropped first)."""
    placements, failed, _ = _verified_verdicts(problem, assignment)
    return placements, failed


def _verified_verdicts(
    problem: Problem, assignment: dict[str, tuple[str, tuple[int, ...]]]
) -> tuple[list[Placement], dict[str, Verdict], list[Verdict]]:
    """`_verified`, plus the passing verdicts of the placements it keeps."""
    placements = [
        Placement(problem.seat(name).seat, host, cards)
        for name, (host, cards) in assignment.items()
    ]
    failed: dict[str, Verdict] = {}
    verdicts: list[Verdict] = []
    while placements:
        verdicts = verify_placement(
            problem.catalogue,
            problem.snapshots,
            placements,
            views=problem.host_catalogues,
            card_views=problem.card_catalogues,
        )
        bad = [(p, v) for p, v in zip(placements, verdicts, strict=True) if not v.passed]
        if not bad:
            break
        # The solver's floating point disagreed with exact bytes: drop the least important.
        worst = min(bad, key=lambda item: (item[0].seat.priority, -item[0].seat.resident_bytes))
        failed[worst[0].seat.name] = worst[1]
        placements = [p for p in placements if p is not worst[0]]
    if not placements:
        verdicts = []
    return placements, failed, verdicts


class _WidestFirst:
    """Per host, the most bytes any of its cards could still take; finds the next host with enough.

    A max segment tree over hosts in their order: `next_at_least(i, n)` is the first host at
    or after position i whose widest card has at least n bytes, in O(log hosts).
    """

    def __init__(self, values: Sequence[int]) -> None:
        size = 1
        while size < max(1, len(values)):
            size *= 2
        self._size = size
        self._tree = [-(1 << 80)] * (2 * size)
        for i, value in enumerate(values):
            self._tree[size + i] = value
        for node in range(size - 1, 0, -1):
            self._tree[node] = max(self._tree[2 * node], self._tree[2 * node + 1])

    def set(self, i: int, value: int) -> None:
        node = self._size + i
        self._tree[node] = value
        node //= 2
        while node:
            self._tree[node] = max(self._tree[2 * node], self._tree[2 * node + 1])
            node //= 2

    def next_at_least(self, start: int, need: int) -> int | None:
        return self._descend(1, 0, self._size, start, need)

    def _descend(self, node: int, low: int, high: int, start: int, need: int) -> int | None:
        if high <= start or self._tree[node] < need:
            return None
        if high - low == 1:
            return low
        middle = (low + high) // 2
        found = self._descend(2 * node, low, middle, start, need)
        if found is not None:
            return found
        return self._descend(2 * node + 1, middle, high, start, need)


def _better_greedy(
    problem: Problem,
    first: dict[str, tuple[str, tuple[int, ...]]] | None,
    weights: Mapping[str, float],
) -> tuple[dict[str, tuple[str, tuple[int, ...]]], str]:
    """The fallback placement: best-fit-decreasing where it places more, else first-fit's."""
    first = first if first is not None else greedy_assignment(problem)
    best = greedy_assignment(problem, fit="best")
    if _score(best, weights) > _score(first, weights):
        return best, "best-fit-decreasing"
    return first, "first-fit-decreasing"


def greedy_assignment(
    problem: Problem, *, fit: Literal["first", "best"] = "first"
) -> dict[str, tuple[str, tuple[int, ...]]]:
    """First-fit-decreasing (or best-fit) on the model's numbers: priority, then size, descending.

    Room counts every reserve the seat is not for in full (its own seats' consumption is
    ignored, which is only stricter); gates are re-checked for every gated seat on the card.
    The verifier re-checks the result like any proposal.

    Hosts are tried in their order, first fit wins. A card can take a seat only when
    free − margin − absent − load there is at least the seat's resident (its need is at
    least that, its held bytes at least the absent ones): hosts with fewer such cards than
    the seat takes are skipped without looking at their cards, which keeps a fleet's cost
    near linear.

    `fit="best"`: best-fit-decreasing — a one-card seat goes on the narrowest card (free −
    margin − absent − load) that takes it, found by bisection in the cards sorted by that
    width; a multi-card seat on the host whose k-th widest card is narrowest among those that
    take it (its k narrowest fitting cards); a seat naming its host where the fewest bytes of
    room are left. A baseline beside first fit, and a second fallback.
    """
    order = sorted(
        problem.seats,
        key=lambda new: (
            -new.seat.priority,
            -new.seat.resident_bytes * new.seat.card_count,
            new.name,
        ),
    )
    load: dict[tuple[str, int], int] = defaultdict(int)
    members: dict[tuple[str, int], list[str]] = defaultdict(list)
    exclusive = {new.name for new in problem.seats if new.seat.exclusive}
    slots = {slot.key: slot for slot in problem.cards}
    host_names = list(problem.hosts)

    # trees[k - 1]: per host, the k-th widest card's free − margin − absent − load.
    depth = max((new.seat.card_count for new in problem.seats), default=1)

    def widths(host: str) -> list[int]:
        room = sorted(
            (
                slot.free_bytes - slot.margin_bytes - slot.absent_bytes - load[slot.key]
                for slot in problem.hosts[host]
                if slot.ok
            ),
            reverse=True,
        )
        return (room + [-(1 << 80)] * depth)[:depth]

    start = [widths(host) for host in host_names]
    trees = [_WidestFirst([row[k] for row in start]) for k in range(depth)]
    position = {host: i for i, host in enumerate(host_names)}
    out: dict[str, tuple[str, tuple[int, ...]]] = {}

    def room_left(name: str, host: str, slot: CardSlot) -> int | None:
        """Bytes of room left on `slot` if `name` goes there now; None if it cannot."""
        pair = (name, host, slot.index)
        if pair not in problem.need:
            return None
        key = slot.key
        if members[key] and (name in exclusive or any(m in exclusive for m in members[key])):
            return None
        held = slot.absent_bytes + sum(
            max(0, r.reserve_bytes - r.running_own_bytes)
            for r in slot.reserves
            if name not in r.for_
        )
        after = load[key] + problem.need[pair]
        room = slot.free_bytes - slot.margin_bytes - held
        if after > room:
            return None
        bounds = [problem.gate_bound.get((m, host, slot.index)) for m in [*members[key], name]]
        if any(bound is not None and after > bound for bound in bounds):
            return None
        return room - after

    def fitting_cards(name: str, host: str, count: int) -> list[tuple[int, int]]:
        """(room left after, card) for the cards of `host` that can take `name` now."""
        found: list[tuple[int, int]] = []
        for slot in problem.hosts[host]:
            left = room_left(name, host, slot)
            if left is None:
                continue
            found.append((left, slot.index))
            if fit == "first" and len(found) == count:
                break
        return found

    def width(slot: CardSlot) -> int:
        return slot.free_bytes - slot.margin_bytes - slot.absent_bytes - load[slot.key]

    # Best fit, one-card seats: every usable card by its width, narrowest first; the seat goes
    # on the narrowest card wide enough that takes it (a bisection, then a short walk).
    by_width: list[tuple[int, int, int]] = []
    # Best fit, multi-card seats: hosts by their k-th widest card, narrowest first.
    by_host: list[list[tuple[int, int]]] = [[] for _ in range(depth)]
    host_widths = start
    if fit == "best":
        by_width = sorted(
            (width(slot), position[host], slot.index)
            for host in host_names
            for slot in problem.hosts[host]
            if slot.ok
        )
        by_host = [sorted((row[k], at) for at, row in enumerate(start)) for k in range(depth)]

    for new in order:
        name = new.name
        count = new.seat.card_count
        tree = trees[count - 1]
        # A seat that names its host has no eligible card anywhere else: try that host alone.
        home = position.get(new.seat.host, -1) if new.seat.host is not None else None
        best: tuple[int, int, tuple[int, ...]] | None = None  # (room left, host index, cards)
        if fit == "best" and count == 1 and home is None:
            for j in range(bisect_left(by_width, (new.seat.resident_bytes, -1, -1)), len(by_width)):
                _, spot, index = by_width[j]
                left = room_left(name, host_names[spot], slots[(host_names[spot], index)])
                if left is not None:
                    best = (left, spot, (index,))
                    break
        elif fit == "best" and home is None:
            column = by_host[count - 1]
            for j in range(bisect_left(column, (new.seat.resident_bytes, -1)), len(column)):
                spot = column[j][1]
                found = fitting_cards(name, host_names[spot], count)
                if len(found) >= count:
                    chosen = sorted(found)[:count]
                    best = (
                        sum(room for room, _ in chosen),
                        spot,
                        tuple(sorted(index for _, index in chosen)),
                    )
                    break
        else:
            at = tree.next_at_least(0 if home is None else max(home, 0), new.seat.resident_bytes)
            while at is not None:
                if home is not None and at != home:
                    break
                found = fitting_cards(name, host_names[at], count)
                if len(found) >= count:
                    chosen = sorted(found)[:count] if fit == "best" else found
                    left = sum(room for room, _ in chosen)
                    if best is None or left < best[0]:
                        best = (left, at, tuple(sorted(index for _, index in chosen)))
                    if fit == "first":
                        break
                at = tree.next_at_least(at + 1, new.seat.resident_bytes)
        if best is None:
            continue
        _, at, cards = best
        host = host_names[at]
        for index in cards:
            slot = slots[(host, index)]
            if fit == "best":
                del by_width[bisect_left(by_width, (width(slot), at, index))]
            load[(host, index)] += problem.need[(name, host, index)]
            members[(host, index)].append(name)
            if fit == "best":
                insort(by_width, (width(slot), at, index))
        out[name] = (host, cards)
        now = widths(host)
        for k, w in enumerate(now):
            trees[k].set(at, w)
            if fit == "best":
                del by_host[k][bisect_left(by_host[k], (host_widths[at][k], at))]
                insort(by_host[k], (w, at))
        host_widths[at] = now
    return out


def explain_refusal(
    problem: Problem,
    new: NewSeat,
    placements: Sequence[Placement],
    failed: Verdict | None = None,
    state_cache: CardStates | None = None,
) -> Verdict:
    """Why `new` is not placed: every card of every host it may use, with every binding rule.

    `state_cache`: one dict shared by the calls that explain seats beside the same
    `placements` (see `judge`); the cards' states are then worked out once, not per seat.
    """
    seat = new.seat
    reasons: list[Reason] = list(failed.reasons) if failed is not None else []
    nearest: list[tuple[int, str]] = [(0, text) for text in failed.nearest] if failed else []
    warnings: list[str] = list(failed.warnings) if failed is not None else []
    hosts = [s.host for s in problem.snapshots if seat.host in (None, s.host)]
    if seat.host is not None and seat.host not in hosts:
        reasons.append(
            host_reason(
                f"{seat.name} names host {seat.host}; no snapshot of it was given", seat.host
            )
        )
    one_card = seat.model_copy(update={"gpus": 1}) if seat.card_count > 1 else seat
    pinned = seat.pinned_cards
    need = seat.resident_bytes
    fragment_room: dict[str, int] = defaultdict(int)
    # judge reads only the placements on the judged host: hand it those alone.
    on_host: dict[str, list[Placement]] = defaultdict(list)
    for placement in placements:
        on_host[placement.host].append(placement)
    for host in hosts:
        snapshot = problem.snapshot(host)
        here = on_host[host]
        passing: list[int] = []
        for card in snapshot.cards:
            if pinned is not None and card.index not in pinned:
                continue
            verdict = judge(
                problem.card_catalogue(host, card.index),
                snapshot,
                one_card,
                [card.index],
                others=here,
                state_cache=state_cache,
            )
            warnings.extend(verdict.warnings)
            need = max(need, verdict.need_bytes or 0)
            if verdict.passed:
                blocked = _blocked_by(problem, Placement(seat, host, (card.index,)), here)
                if blocked is None:
                    passing.append(card.index)
                else:
                    reasons.append(blocked)
                continue
            reasons.extend(r for r in verdict.reasons if r.rule != "host")
            shorts = [r.short_bytes for r in verdict.reasons if r.short_bytes is not None]
            texts = verdict.nearest
            if len(hosts) > 1:
                texts = tuple(re.sub(r"card (\d+)", rf"card {host}:\1", text) for text in texts)
            nearest.extend((min(shorts, default=1 << 62), text) for text in texts)
            for reason in verdict.reasons:
                if (
                    reason.rule == "room"
                    and reason.room_bytes is not None
                    and len(verdict.reasons) == 1
                ):
                    fragment_room[host] += max(0, reason.room_bytes)
        if seat.card_count > 1 and len(passing) < seat.card_count:
            reasons.append(
                host_reason(
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
        largest = max(
            (c.cuda_total - c.margin_bytes for c in problem.hosts[host] if c.ok), default=0
        )
        if seat.card_count == 1 and total >= need and need <= largest:
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
    # judge reads only the others on the candidate's host.
    everyone = [*(p for p in placements if p.host == candidate.host), candidate]
    view = problem.host_catalogue(candidate.host)
    for placed in placements:
        if placed.host != candidate.host or not set(placed.cards) & set(candidate.cards):
            continue
        others = [p for p in everyone if p is not placed]
        verdict = judge(view, snapshot, placed.seat, placed.cards, others=others)
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
    catalogue: Catalogue,
    snapshots: Sequence[Snapshot],
    placements: Sequence[Placement],
    *,
    card_views: Mapping[tuple[str, int], Catalogue] | None = None,
) -> list[CardRow]:
    """Each card before and after the placements (`card_views`: card_catalogues, when at hand)."""
    rows: list[CardRow] = []
    if card_views is None:
        card_views = card_catalogues(catalogue)
    # Placements by card, in placement order: one pass instead of one per card.
    by_card: dict[tuple[str, int], list[Placement]] = defaultdict(list)
    for placement in placements:
        for index in dict.fromkeys(placement.cards):
            by_card[(placement.host, index)].append(placement)
    for snapshot in snapshots:
        host = snapshot.host
        for card in snapshot.cards:
            view = card_views.get((host, card.index), catalogue)
            here = by_card.get((host, card.index), [])
            declared = [s.name for s in seats_declared_on(view, host, card.index)]
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
            added = sum(other_need(view, snapshot, p, card, "plan") for p in here)
            names = [p.seat.name for p in here]
            before_parts = held_parts(view, host, card)
            after_parts = held_parts(view, host, card, placed_here=names)
            margin = margin_bytes(view, host)
            held_before = sum(p.bytes for p in before_parts)
            held_after = sum(p.bytes for p in after_parts)
            free_after = card.free_bytes - added
            rows.append(
                CardRow(
                    host=host,
                    index=card.index,
                    error=None,
                    total_bytes=card.total_bytes,
                    cuda_total_bytes=card.cuda_total_bytes,
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
