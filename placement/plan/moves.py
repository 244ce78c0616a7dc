"""`plan --allow-moves`: move running seats to other cards of their host when that places more seats.

Sets of moves are searched fewest first; each set needs a stop/start order in which every start is
judged by the verifier against the state it starts from (one seat down at a time), or it is not used.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from placement.fit.card import CardKey, CardModel
from placement.fit.verdict import Verdict
from placement.fit.verify import Placement, judge, verify_placement
from placement.plan.cards import PlanCardRow, card_rows
from placement.plan.explain import explain_refusal
from placement.plan.greedy import greedy_assignment
from placement.plan.problem import NewSeat, Problem, build_problem
from placement.plan.score import priority_weights, score
from placement.plan.verified import verified
from seats.units import format_bytes

DEFAULT_MAX_MOVES = 3
# Sets whose end state verifies but that have no safe order: how many are priced for the note.
MAX_UNORDERED = 20

Score = float  # placement.plan.score: strict priority, then the most seats


@dataclass(frozen=True)
class Move:
    """A running seat restarted on another card of its host."""

    seat: str
    host: str
    source: int
    target: int
    freed_bytes: int  # what its processes hold on the source card, measured
    resident_bytes: int  # the least it can take on the target (its declared resident)

    def text(self) -> str:
        """'embed card 1 → 2'."""
        return f"{self.seat} card {self.source} → {self.target}"


@dataclass(frozen=True)
class MovesOutcome:
    """What the move search found: new verdicts and steps when a move set helps; always a note."""

    note: str
    verdicts: list[Verdict] | None = None  # None: no set helps, the plan without moves stands
    placements: list[Placement] | None = None
    steps: tuple[dict[str, Any], ...] = ()
    # Before: as measured; after: moves done and seats placed.
    cards: list[PlanCardRow] | None = None


class _World:
    """The cards' models as measured, and the states reached by doing some moves."""

    def __init__(self, problem: Problem) -> None:
        self.catalogue = problem.catalogue
        self.snapshots = {s.host: s for s in problem.snapshots}
        self.models = problem.models
        self._taken: dict[Move, int] = {}
        self._passes: dict[tuple[frozenset[Move], Move], Verdict] = {}
        self.judged = 0

    def state(self, done: Iterable[Move], stopped: Move | None = None) -> dict[CardKey, CardModel]:
        """The cards' models after `done` (their seats running on their targets), with
        `stopped`'s seat down: each moved seat taken off its source and placed, started, on
        its target, taking what it will take there (`taken`)."""
        done = list(done)
        models = dict(self.models)
        for move in [*done, *([stopped] if stopped is not None else [])]:
            source = (move.host, move.source)
            models[source] = models[source].without_seat(move.seat)
        for move in done:
            target = (move.host, move.target)
            models[target] = models[target].with_seat(
                move.seat,
                self.taken(move),
                exclusive=self.catalogue.seat(move.seat).exclusive,
                running=True,
            )
        return models

    def taken(self, move: Move) -> int:
        """Bytes the seat takes on its target: the larger of its measured bytes and its judged need."""
        if move not in self._taken:
            verdict = self._judge(frozenset(), move)
            self._taken[move] = max(move.freed_bytes, verdict.need_bytes or 0)
        return self._taken[move]

    def start(self, done: frozenset[Move], move: Move) -> Verdict:
        """The verifier's verdict on restarting `move`'s seat on its target after `done`."""
        key = (done, move)
        if key not in self._passes:
            self._passes[key] = self._judge(done, move)
        return self._passes[key]

    def _judge(self, done: frozenset[Move], move: Move) -> Verdict:
        self.judged += 1
        models = self.state(done, stopped=move)
        seat = self.catalogue.seat(move.seat)
        return judge(self.catalogue, self.snapshots[move.host], seat, [move.target], models=models)

    def order(self, moves: frozenset[Move], deadline: float) -> list[Move] | None:
        """An order of `moves` in which every restart passes, else None (memoised DFS over subsets)."""
        dead: set[frozenset[Move]] = set()

        def walk(done: frozenset[Move], path: list[Move]) -> list[Move] | None:
            if done == moves:
                return path
            if done in dead or time.perf_counter() > deadline:
                return None
            # Smallest restarts first: the order shown is then the natural one where both work.
            for move in sorted(moves - done, key=lambda m: (m.freed_bytes, m.seat)):
                if self.start(done, move).passed:
                    found = walk(done | {move}, [*path, move])
                    if found is not None:
                        return found
            dead.add(done)
            return None

        return walk(frozenset(), [])


def _candidates(problem: Problem, refused: Sequence[NewSeat]) -> list[Move]:
    """Every single-card running seat with processes on its card, to each other card of its host.

    Only hosts where a refused seat may go: a move elsewhere cannot make room for it.
    """
    hosts = {
        s.host for s in problem.snapshots if any(new.seat.host in (None, s.host) for new in refused)
    }
    out: list[Move] = []
    for seat in problem.catalogue.seats:
        pinned = seat.pinned_cards
        if seat.state != "running" or seat.host not in hosts or pinned is None or len(pinned) != 1:
            continue
        snapshot = problem.snapshot(seat.host)
        source = snapshot.card(pinned[0])
        freed = sum(p.used_bytes or 0 for p in source.processes if p.seat == seat.name)
        if not source.ok or freed == 0:
            continue  # down or unmeasured: nothing to free by moving it
        for card in snapshot.cards:
            if card.ok and card.index != pinned[0]:
                out.append(
                    Move(seat.name, seat.host, pinned[0], card.index, freed, seat.resident_bytes)
                )
    # Cheapest restarts first: small seats move faster.
    out.sort(key=lambda m: (m.freed_bytes, m.seat, m.target))
    return out


def _may_fit(moves: Sequence[Move], problem: Problem) -> bool:
    """A necessary condition in plain sums: on each target, what arrives ≤ free − margin + what leaves."""
    slots = {slot.key: slot for slot in problem.cards}
    for key in {(m.host, m.target) for m in moves}:
        slot = slots[key]
        arriving = sum(m.resident_bytes for m in moves if (m.host, m.target) == key)
        leaving = sum(m.freed_bytes for m in moves if (m.host, m.source) == key)
        if not slot.may_take(arriving, freed_bytes=leaving):
            return False
    return True


def _smallest_refused(problem: Problem, refused: Sequence[NewSeat]) -> dict[tuple[str, int], int]:
    """Per card, the smallest resident among the refused seats that may go there."""
    out: dict[tuple[str, int], int] = {}
    for slot in problem.cards:
        sizes = [
            new.seat.resident_bytes
            for new in refused
            if slot.ok
            and new.seat.host in (None, slot.host)
            and (new.seat.pinned_cards is None or slot.index in new.seat.pinned_cards)
        ]
        if sizes:
            out[slot.key] = min(sizes)
    return out


def _may_place(
    moves: Sequence[Move], problem: Problem, smallest: dict[tuple[str, int], int]
) -> bool:
    """A necessary condition for placing one more refused seat: some card it may use has,
    once the moves are done, free − margin at least its resident (others placed aside)."""
    for slot in problem.cards:
        if slot.key not in smallest:
            continue
        arriving = sum(m.resident_bytes for m in moves if (m.host, m.target) == slot.key)
        leaving = sum(m.freed_bytes for m in moves if (m.host, m.source) == slot.key)
        if slot.may_take(smallest[slot.key], freed_bytes=leaving, placed_bytes=arriving):
            return True
    return False


def _goal_cards(
    candidates: Sequence[Move],
    problem: Problem,
    smallest: dict[tuple[str, int], int],
    size: int,
) -> set[tuple[str, int]] | None:
    """Cards a refused seat might get once `size` seats leave them; None: some fits one already.

    A seat that fits a card alone was refused for the others placed there, so any move may help.
    """
    goal: set[tuple[str, int]] = set()
    for slot in problem.cards:
        if slot.key not in smallest:
            continue
        if slot.may_take(smallest[slot.key]):
            return None
        freed = sorted(
            {m.seat: m.freed_bytes for m in candidates if (m.host, m.source) == slot.key}.values(),
            reverse=True,
        )
        if slot.may_take(smallest[slot.key], freed_bytes=sum(freed[:size])):
            goal.add(slot.key)
    return goal


def _sets(
    candidates: Sequence[Move],
    size: int,
    problem: Problem,
    smallest: dict[tuple[str, int], int],
    deadline: float,
) -> Iterator[tuple[Move, ...]]:
    """Sets of `size` moves of distinct seats that might fit and might make room for a refused seat.

    Exhaustive but for sets that cannot help (plain-sum necessary conditions); stops at `deadline`
    (the caller sees the clock).
    """
    goal = _goal_cards(candidates, problem, smallest, size)
    if goal is None:
        combos: Iterable[tuple[Move, ...]] = itertools.combinations(candidates, size)
    else:
        # Each set holds a move off a goal card: generate it once, from its first such move.
        firsts = [m for m in candidates if (m.host, m.source) in goal]
        rest = [m for m in candidates if (m.host, m.source) not in goal]
        combos = (
            (first, *others)
            for i, first in enumerate(firsts)
            for others in itertools.combinations(firsts[i + 1 :] + rest, size - 1)
        )
    for n, combo in enumerate(combos):
        if n % 256 == 0 and time.perf_counter() > deadline:
            return
        if len({m.seat for m in combo}) != size:
            continue
        if _may_fit(combo, problem) and _may_place(combo, problem, smallest):
            yield combo


class _Search:
    """The move search's running best: sets tried fewest first, each evaluated against the best."""

    def __init__(
        self, problem: Problem, placements: Sequence[Placement], solver: str, deadline: float
    ) -> None:
        self.problem = problem
        self.solver = solver
        self.deadline = deadline
        self.weights = priority_weights(problem.seats)
        self.placed_names = {p.seat.name for p in placements}
        self.refused = [new for new in problem.seats if new.name not in self.placed_names]
        self.best_score = score(self.placed_names, self.weights)
        self.full = score((new.name for new in problem.seats), self.weights)
        self.world = _World(problem)
        self.best: tuple[list[Move], Problem, list[Placement]] | None = None
        self.unordered: list[tuple[Move, ...]] = []
        self.tried = 0
        self.cut_short = False

    def _score(self, placements: Iterable[Placement]) -> Score:
        return score((p.seat.name for p in placements), self.weights)

    def evaluate(self, moves: Sequence[Move]) -> tuple[Problem, list[Placement]] | None:
        """The verified placement of every new seat once `moves` are done, if it may beat the best."""
        problem = self.problem
        moved_problem = build_problem(
            problem.catalogue,
            problem.snapshots,
            problem.seats,
            attributed=True,
            models=self.world.state(moves),
        )
        eligible = (n.name for n in problem.seats if moved_problem.eligible_hosts(n.name))
        if score(eligible, self.weights) <= self.best_score:
            return None  # not even every seat with an eligible card would beat it
        greedy = greedy_assignment(moved_problem)
        out, _ = verified(moved_problem, greedy)
        remaining = self.deadline - time.perf_counter()
        if self._score(out) < self.full and remaining > 0.05:
            from placement.plan.model import solve

            solver = self.solver
            solution = solve(moved_problem, solver=solver, time_limit=remaining, initial=greedy)  # type: ignore[arg-type]
            proposed, _ = verified(moved_problem, solution.assignment)
            if self._score(proposed) > self._score(out):
                out = proposed
        return moved_problem, out

    def run(self, max_moves: int) -> None:
        """Try sets of 1, 2, … `max_moves` moves until every seat is placed or time runs out."""
        candidates = _candidates(self.problem, self.refused)
        smallest = _smallest_refused(self.problem, self.refused)
        for size in range(1, max_moves + 1):
            if self.best is not None and self.best_score == self.full:
                break
            for combo in _sets(candidates, size, self.problem, smallest, self.deadline):
                if time.perf_counter() > self.deadline:
                    self.cut_short = True
                    break
                self._try(combo)
            if self.cut_short or time.perf_counter() > self.deadline:
                self.cut_short = True
                break

    def _try(self, combo: tuple[Move, ...]) -> None:
        """Keep `combo` as the best when it has a safe order and places more (strict priority)."""
        self.tried += 1
        world = self.world
        order = world.order(frozenset(combo), self.deadline)
        if order is None:
            if len(self.unordered) < MAX_UNORDERED and all(
                world.start(frozenset(combo) - {m}, m).passed for m in combo
            ):
                self.unordered.append(combo)  # the end state verifies; no way there does
            return
        found = self.evaluate(order)
        if found is None:
            return
        moved_problem, new_placements = found
        found_score = self._score(new_placements)
        if found_score <= self.best_score or _new_starts(moved_problem, new_placements) is None:
            return
        self.best_score = found_score
        self.best = (order, moved_problem, new_placements)


def plan_moves(
    problem: Problem,
    placements: Sequence[Placement],
    *,
    solver: str = "cbc",
    time_limit: float = 10.0,
    max_moves: int = DEFAULT_MAX_MOVES,
) -> MovesOutcome:
    """The fewest moves of running seats that place the most seats (strict priority), in a safe order.

    Sets of 1, 2, … `max_moves` moves are tried; a set counts only when its moves have an order
    in which each restart passes the verifier, and its new seats then pass beside them.
    """
    search = _Search(problem, placements, solver, time.perf_counter() + time_limit)
    search.run(max_moves)
    limit_text = (
        f"; the search stopped when the plan's time limit ran out ({time_limit:.2g} s were left "
        f"for it) after {search.tried} move set(s), so fewer or better moves may exist"
        if search.cut_short
        else ""
    )
    if search.best is None:
        return MovesOutcome(note=_nothing_found_note(search, max_moves) + limit_text)
    return _outcome(search, *search.best, limit_text)


def _nothing_found_note(search: _Search, max_moves: int) -> str:
    """Why the plan without moves stands: how many sets were tried, and a set with no safe order."""
    note = (
        f"no set of up to {max_moves} move(s) of running seats to other cards of their host "
        "places more seats "
        + (
            f"({search.tried} set(s) tried)"
            if search.tried or search.cut_short
            else "(none frees enough on a card a refused seat may use)"
        )
    )
    blocked = _blocked_note(
        search.unordered, search.evaluate, search.weights, search.best_score, search.placed_names
    )
    if blocked:
        note += "; " + blocked
    return note + "; no such order exists"


def _outcome(
    search: _Search,
    order: list[Move],
    moved_problem: Problem,
    new_placements: list[Placement],
    limit_text: str,
) -> MovesOutcome:
    """The best set's verdicts, steps and card rows (before: as measured; after: moves done)."""
    problem = search.problem
    steps = _steps(search.world, order, moved_problem, new_placements)
    by_name = {
        v.seat: v
        for v in verify_placement(
            moved_problem.catalogue,
            moved_problem.snapshots,
            new_placements,
            models=moved_problem.models,
        )
    }
    verdicts = [
        by_name[new.name]
        if new.name in by_name
        else explain_refusal(moved_problem, new, new_placements)
        for new in problem.seats
    ]
    before = card_rows(problem.catalogue, problem.snapshots, [])
    after = card_rows(
        moved_problem.catalogue,
        moved_problem.snapshots,
        new_placements,
        models=moved_problem.models,
    )
    rows = [
        replace(
            a,
            used_bytes=b.used_bytes,
            free_before_bytes=b.free_before_bytes,
            held_bytes=b.held_bytes,
            held=b.held,
            plannable_before_bytes=b.plannable_before_bytes,
        )
        for b, a in zip(before, after, strict=True)
    ]
    restarted = sum(m.freed_bytes for m in order)
    note = (
        f"{len(order)} move(s): {', '.join(m.text() for m in order)} "
        f"({format_bytes(restarted)} restarted); every start listed passed the verifier against "
        f"the state it starts from, one seat down at a time ({search.tried} set(s) tried)"
        + limit_text
    )
    return MovesOutcome(note, verdicts, new_placements, steps, rows)


def _blocked_note(
    unordered: Sequence[tuple[Move, ...]],
    evaluate: Callable[[Sequence[Move]], tuple[Problem, list[Placement]] | None],
    weights: dict[str, float],
    best_score: Score,
    placed_before: set[str],
) -> str:
    """Name a move set that would place more seats if only it had a safe order."""
    for combo in unordered:
        found = evaluate(list(combo))
        if found is None:
            continue
        _, placements = found
        if score((p.seat.name for p in placements), weights) > best_score:
            gained = sorted({p.seat.name for p in placements} - placed_before)
            return (
                f"{' and '.join(m.text() for m in combo)} would place "
                f"{', '.join(gained) or 'more seats'}, but no stop/start order keeps every step "
                "verified with one seat down at a time"
            )
    return ""


def _new_starts(
    problem: Problem, placements: Sequence[Placement]
) -> list[tuple[Placement, Verdict]] | None:
    """Start the new seats after the moves, each judged beside those started before it.

    Highest priority first; a seat whose reserve must be consumed first waits its turn.
    """
    pending = sorted(placements, key=lambda p: (-p.seat.priority, p.seat.name))
    started: list[Placement] = []
    out: list[tuple[Placement, Verdict]] = []
    while pending:
        for placement in pending:
            verdict = judge(
                problem.catalogue,
                problem.snapshot(placement.host),
                placement.seat,
                placement.cards,
                others=started,
                util=placement.util,
                models=problem.models,
            )
            if verdict.passed:
                started.append(placement)
                out.append((placement, verdict))
                pending = [p for p in pending if p is not placement]
                break
        else:
            return None
    return out


def _start_step(seat: str, host: str, verdict: Verdict) -> dict[str, Any]:
    figures = verdict.figures[0] if verdict.figures else None
    return {
        "action": "start",
        "seat": seat,
        "host": host,
        "cards": list(verdict.cards),
        "flags": list(verdict.flags),
        "need_bytes": verdict.need_bytes,
        "room_bytes": figures.room_bytes if figures is not None else None,
    }


def _steps(
    world: _World, order: Sequence[Move], problem: Problem, placements: Sequence[Placement]
) -> tuple[dict[str, Any], ...]:
    """Stop and restart each moved seat in order, then start the new seats on the hosts moved on."""
    steps: list[dict[str, Any]] = []
    done: frozenset[Move] = frozenset()
    for move in order:
        steps.append(
            {"action": "stop", "seat": move.seat, "host": move.host, "cards": [move.source]}
        )
        steps.append(_start_step(move.seat, move.host, world.start(done, move)))
        done = done | {move}
    hosts = {m.host for m in order}
    for placement, verdict in _new_starts(problem, placements) or []:
        if placement.host in hosts:
            steps.append(_start_step(placement.seat.name, placement.host, verdict))
    return tuple(steps)
