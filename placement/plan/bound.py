"""An upper bound on the seats any placement places, per priority level, without the integer program.

A relaxation of the plan: each seat is one piece of its resident bytes (less its own bytes
already on a card), in units of 64 MiB rounded down, which may be split across cards, but only
cards with room for its whole size; reserves, gates, exclusivity, pins and a multi-card seat's
other cards are dropped. A card's room, in units rounded down, is then lowered to the largest
sum of the seats' sizes it could hold (what fragmentation leaves unused on every card). Each
step only loosens, so no placement places more seats of a level than its bound.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from placement.plan.problem import NewSeat, Problem


@dataclass(frozen=True)
class LevelBound:
    """At one priority level: seats that could be placed at most, and how many a placement placed."""

    priority: int
    seats: int
    bound: int
    placed: int

    @property
    def gap(self) -> float:
        """(bound − placed) / bound: 0 when the placement is proven to place the most."""
        return (self.bound - self.placed) / self.bound if self.bound else 0.0


def level_bounds(problem: Problem, placed: Iterable[str]) -> list[LevelBound]:
    """Per priority level, highest first: the relaxation's most seats, beside `placed`'s count.

    Strict priority: a placement places at least `placed`'s count at each higher level, so
    the relaxation of level L carries that many seats of each level above it (the cheapest
    at every size threshold).
    """
    done = set(placed)
    rooms = [max(0, slot.open_bytes) // UNIT_BYTES for slot in problem.cards if slot.ok]
    levels: dict[int, list[NewSeat]] = defaultdict(list)
    for new in problem.seats:
        levels[new.seat.priority].append(new)
    above: list[tuple[list[_Piece], int]] = []  # each higher level's pieces and its count
    out: list[LevelBound] = []
    for priority in sorted(levels, reverse=True):
        members = levels[priority]
        pieces = [
            (_size(problem, new), new.seat.card_count)
            for new in members
            if problem.has_eligible_host(new.name)
        ]
        count = sum(1 for new in members if new.name in done)
        sizes = {size for level, _ in above for size, _ in level} | {size for size, _ in pieces}
        usable = _usable(rooms, sizes)
        thresholds = sorted(sizes | {0})
        room_at = {t: sum(r for r in usable if r >= t) for t in thresholds}
        carried = {t: sum(_least(level, t, n) for level, n in above) for t in thresholds}
        if any(carried[t] > room_at[t] for t in thresholds):
            most = 0  # cannot happen for a placement that exists; said as no room
        else:
            most = _most(pieces, thresholds, {t: room_at[t] - carried[t] for t in thresholds})
        out.append(LevelBound(priority, len(members), most, count))
        above.append((pieces, count))
    return out


_Piece = tuple[int, int]  # (size in units, cards)


def _least(pieces: Sequence[_Piece], t: int, n: int) -> int:
    """The fewest units that any `n` of `pieces` put on cards of `t` or more units.

    A seat of size s ≥ t puts s on each of its cards, all of t or more units; a smaller one
    may avoid them. Infinite (a large number) when fewer than `n` pieces exist.
    """
    if n <= 0:
        return 0
    small = sum(1 for size, _ in pieces if size < t)
    if n <= small:
        return 0
    costs = sorted(size * cards for size, cards in pieces if size >= t)
    take = n - small
    return sum(costs[:take]) if take <= len(costs) else _NEVER


_NEVER = 1 << 62


def _most(pieces: Sequence[_Piece], thresholds: Sequence[int], room: dict[int, int]) -> int:
    """The most of `pieces` such that, at every threshold, the fewest units they need there fit."""
    low, high = 0, len(pieces)
    while low < high:
        middle = (low + high + 1) // 2
        if all(_least(pieces, t, middle) <= room[t] for t in thresholds):
            low = middle
        else:
            high = middle - 1
    return low


UNIT_BYTES = 64 * 2**20


def _size(problem: Problem, new: NewSeat) -> int:
    """The least units the seat adds to any card: its resident, less its own bytes already there."""
    own = max(
        (slot.own_bytes.get(new.name, 0) for slot in problem.cards if slot.own_bytes), default=0
    )
    return max(0, new.seat.resident_bytes - own) // UNIT_BYTES


def _usable(rooms: Sequence[int], sizes: Iterable[int]) -> list[int]:
    """Each room lowered to the largest sum of `sizes` (each any number of times) within it, descending.

    Seats on a card add up to at most its room, and their sizes (rounded down) to such a sum.
    """
    top = max(rooms, default=0)
    reach = 1  # bit n: n units are a sum of sizes
    mask = (1 << (top + 1)) - 1
    for size in sorted(s for s in set(sizes) if s > 0):
        while True:
            grown = (reach | (reach << size)) & mask
            if grown == reach:
                break
            reach = grown
    best: list[int] = []
    last = 0
    for n in range(top + 1):
        if reach >> n & 1:
            last = n
        best.append(last)
    return sorted((best[room] for room in rooms), reverse=True)
