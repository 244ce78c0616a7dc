"""The most seats per priority level without the integer program: keep the smallest, pack them.

Strict priority makes the plan's objective lexicographic: (seats placed at the highest level,
then the next, …). Level by level, highest first, with C the seats already committed (all
placed together), the search looks for the largest K such that best-fit-decreasing places
C ∪ S_K, where S_K holds the K smallest seats of the level (bytes over all their cards):

    K* = max { K : BFD(C ∪ S_K) places every seat of C ∪ S_K }

To count seats, the smallest are the ones to keep: any K seats take at least the bytes of the
K smallest, on every card-size threshold (the relaxation in `placement.plan.bound`). K is
bisected between what a smallest-first pass placed (a placement that exists) and the level's
upper bound; every candidate is a real packing, so the answer is a placement whichever way the
bisection goes (feasibility in K need not be monotone: the search may stop short of the best
K, never report one it did not pack). A last pass then tries the level's other seats, smallest
first, in what is left, and the placed ones join C.

Each pack is one best-fit pass, O(seats · (log cards + the blocks and cards it walks)); a level
needs about log₂(bound − placed) of them, and its seats are sorted once for all of them. The
verifier re-checks the result like any proposal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from placement.plan.bound import each_level_bound
from placement.plan.greedy import (
    BestFitLevel,
    BestFitPacking,
    BestFitRun,
    has_eligible_host,
    placing_key,
)
from placement.plan.problem import NewSeat, Problem
from placement.plan.verified import Assignment


def most_seats(problem: Problem, run: BestFitRun | None = None) -> Assignment:
    """A placement that keeps, level by level, the most seats best-fit can pack (see module doc).

    `run`: the problem's best-fit-decreasing pass (`best_fit_levels`); a level whose every seat
    it packs from where the search stands is read off it, not packed again.
    """
    levels = sorted({new.seat.priority for new in problem.seats}, reverse=True)
    # C packed in decreasing order: every attempt at a level starts from a fork of it.
    committed = BestFitPacking(problem)
    for priority in levels:
        level = sorted(
            (
                new
                for new in problem.seats
                if new.seat.priority == priority and has_eligible_host(problem, new)
            ),
            key=_bytes_key,
        )
        if level:
            known = run.levels.get(priority) if run is not None else None
            committed = _level(problem, committed, level, _whole(known, committed, level))
    return committed.placed


def _whole(
    known: BestFitLevel | None, committed: BestFitPacking, level: Sequence[NewSeat]
) -> BestFitPacking | Literal[False] | None:
    """C with all of `level` packed in decreasing order (None: one found no card), read off best
    fit's pass where it packed the same seats in the same order from the same placement; False
    where it did not (pack it).

    Best fit's level holds the level's seats in `placing_key` order, as `_level` packs them,
    and also those with no eligible host: each of those finds no card and changes nothing
    (were one placed, the pass is not the same and is not read).
    """
    if known is None or known.start != tuple(committed.placed.items()):
        return False
    names = {new.name for new in level}
    if not names <= known.seats or not (known.seats - known.missed) <= names:
        return False
    return None if known.missed & names else known.end.copy()


def _level(
    problem: Problem,
    committed: BestFitPacking,
    level: Sequence[NewSeat],
    whole: BestFitPacking | Literal[False] | None = False,
) -> BestFitPacking:
    """C with as many of `level` (ascending bytes) as best fit packs: the packing after the level.

    `whole`: `packed(len(level))` where it is known already (False: not known)."""
    # The level in decreasing order, sorted once: S_K's decreasing order is that order with the
    # seats past the K-th smallest left out.
    decreasing = sorted(level, key=placing_key)
    position = {new.name: k for k, new in enumerate(level)}

    def packed(count: int) -> BestFitPacking | None:
        """C with S_count (the `count` smallest) added in decreasing order, or None when one of
        them found no card."""
        attempt = committed.copy()
        seats = (
            decreasing
            if count >= len(level)
            else [new for new in decreasing if position[new.name] < count]
        )
        return None if attempt.add(seats, all_or_none=True) else attempt

    every = packed(len(level)) if whole is False else whole
    if every is not None:
        return every
    # Smallest first on top of C: a placement that exists, and the bisection's floor.
    floor = committed.copy()
    floor.add(level)
    low = _count(floor, level)
    best = packed(low)
    if best is None:
        low, best = 0, committed
    high = min(len(level) - 1, _level_bound(problem, committed, level[0].seat.priority))
    while low < high:
        middle = (low + high + 1) // 2
        attempt = packed(middle)
        if attempt is not None:
            low, best = middle, attempt
        else:
            high = middle - 1
    topped = best.copy()
    topped.add(level[low:])
    return max((floor, topped), key=lambda packing: _count(packing, level))


def _count(packing: BestFitPacking, level: Sequence[NewSeat]) -> int:
    return sum(1 for new in level if new.name in packing.placed)


def _level_bound(problem: Problem, committed: BestFitPacking, priority: int) -> int:
    """The most seats of level `priority` any placement keeping C's counts could place."""
    for level in each_level_bound(problem, committed.placed):
        if level.priority == priority:
            return level.bound
    return 0


def _bytes_key(new: NewSeat) -> tuple[int, str]:
    """Ascending bytes over all the seat's cards, then name."""
    return (new.seat.resident_bytes * new.seat.card_count, new.name)
