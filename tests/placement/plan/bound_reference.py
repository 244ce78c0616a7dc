"""The per-level bound as it was worked out card by card in lists, before `placement.plan.bound`
worked it on arrays: the reference the array version must equal, level for level.

An upper bound on the seats any placement places, per priority level, without the integer program.

A relaxation of the plan: each seat is one piece of its resident bytes (less its own bytes
already on a card), in units of 64 MiB rounded down, which may be split across cards, but only
cards with room for its whole size; reserves, exclusivity, pins and a multi-card seat's other
cards are dropped. A card's room, in units rounded down, is then lowered to the largest sum of
the seats' sizes it could hold (what fragmentation leaves unused on every card).

vLLM's gate is kept in one aggregate form. A gated seat s (need − requested = e_s ≤ 0 on every
card size) keeps its card's load within free − cuda_context + e_s, so with E the largest such
e_s, a card c holding any gated piece holds at most g_c = min(R_c, free_c − ctx_c + E) instead
of its room R_c: it loses ℓ_c = R_c − g_c. With X the cards holding gated pieces,

    Σ pieces ≤ Σ_c R_c − Σ_{c∈X} ℓ_c   and   Σ gated pieces ≤ Σ_{c∈X} g_c,

and the least Σ_{c∈X} ℓ_c over such X is bounded below by its LP relaxation (cards by ℓ_c / g_c
ascending, the last one split). Each step only loosens, so no placement places more seats of
a level than its bound.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate

from placement.fit.card import CardModel
from placement.plan.greedy import has_eligible_host
from placement.plan.problem import NewSeat, PairTable, Problem
from seats.units import MiB


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
    own = _most_own(problem)
    ok = [slot for slot in problem.cards if slot.ok]
    rooms = [max(0, slot.open_bytes) // UNIT_BYTES for slot in ok]
    slack = _gate_slacks(problem, ok)
    widest_gate = max((e for e in slack.values() if e <= 0), default=None)
    levels: dict[int, list[NewSeat]] = defaultdict(list)
    for new in problem.seats:
        levels[new.seat.priority].append(new)
    above: list[tuple[_Pieces, int]] = []  # each higher level's pieces and its count
    out: list[LevelBound] = []
    for priority in sorted(levels, reverse=True):
        members = levels[priority]
        pieces = _Pieces(
            [
                (_size(new, own), new.seat.card_count, slack.get(new.name, 1) <= 0)
                for new in members
                if has_eligible_host(problem, new)
            ]
        )
        count = sum(1 for new in members if new.name in done)
        sizes = {p[0] for level, _ in above for p in level.pieces} | {p[0] for p in pieces.pieces}
        lowered = _lowered(rooms, sizes)
        gate = _GateLoss.of(ok, lowered, sizes, widest_gate)
        usable = sorted(lowered, reverse=True)
        thresholds = sorted(sizes | {0})
        room_at = {t: sum(r for r in usable if r >= t) for t in thresholds}
        carried = {t: sum(level.least(t, n) for level, n in above) for t in thresholds}
        carried_gated = sum(level.least_gated(n) for level, n in above)
        if any(carried[t] > room_at[t] for t in thresholds):
            most = 0  # cannot happen for a placement that exists; said as no room
        else:
            room = {t: room_at[t] - carried[t] for t in thresholds}
            most = _most(pieces, thresholds, room, gate, carried_gated)
        out.append(LevelBound(priority, len(members), most, count))
        above.append((pieces, count))
    return out


_Piece = tuple[int, int, bool]  # (size in units, cards, gated)
_NEVER = 1 << 62


class _Pieces:
    """One level's pieces, with the sorted costs and prefix sums its queries need, kept per threshold."""

    def __init__(self, pieces: Sequence[_Piece]) -> None:
        self.pieces = list(pieces)
        self._at: dict[int, tuple[int, list[int]]] = {}
        ungated = sum(1 for _, _, gated in pieces if not gated)
        costs = sorted(size * cards for size, cards, gated in pieces if gated)
        self._gated = (ungated, list(accumulate(costs, initial=0)))

    def __len__(self) -> int:
        return len(self.pieces)

    def least(self, t: int, n: int) -> int:
        """The fewest units that any `n` of the pieces put on cards of `t` or more units.

        A seat of size s ≥ t puts s on each of its cards, all of t or more units; a smaller one
        may avoid them. Infinite (a large number) when fewer than `n` pieces exist.
        """
        found = self._at.get(t)
        if found is None:
            small = sum(1 for size, _, _ in self.pieces if size < t)
            costs = sorted(size * cards for size, cards, _ in self.pieces if size >= t)
            found = self._at[t] = (small, list(accumulate(costs, initial=0)))
        return _take(*found, n)

    def least_gated(self, n: int) -> int:
        """The fewest units of gated pieces among any `n` of them (ungated ones taken first)."""
        return _take(*self._gated, n)


def _take(free: int, sums: Sequence[int], n: int) -> int:
    """Sum of the cheapest n − free costs (`sums` their prefix sums); 0 when n ≤ free."""
    if n <= free:
        return 0
    take = n - free
    return sums[take] if take < len(sums) else _NEVER


def _most(
    pieces: _Pieces,
    thresholds: Sequence[int],
    room: dict[int, int],
    gate: _GateLoss,
    carried_gated: int,
) -> int:
    """The most of `pieces` such that, at every threshold, the fewest units they need there fit.

    At threshold 0 the room is less what the cards holding the gated pieces lose.
    """

    def fits(n: int) -> bool:
        if not all(pieces.least(t, n) <= room[t] for t in thresholds):
            return False
        return pieces.least(0, n) <= room[0] - gate.loss(carried_gated + pieces.least_gated(n))

    low, high = 0, len(pieces)
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


@dataclass(frozen=True)
class _GateLoss:
    """Cards as the gate term sees them: (ℓ_c, g_c) in units, by ℓ_c / g_c ascending."""

    cards: tuple[tuple[int, int], ...] = ()

    @classmethod
    def of(
        cls,
        slots: Sequence[CardModel],
        lowered: Sequence[int],
        sizes: Iterable[int],
        widest: int | None,
    ) -> _GateLoss:
        """ℓ_c and g_c of every card (`lowered[i]` is slot i's room R_c); none without a gated seat."""
        if widest is None:
            return cls()
        gated_rooms = _lowered([_gated_units(slot, widest) for slot in slots], sizes)
        cards = [
            (room - min(room, g), min(room, g))
            for room, g in zip(lowered, gated_rooms, strict=True)
        ]
        cards.sort(key=lambda card: card[0] / card[1] if card[1] else float("inf"))
        return cls(tuple(cards))

    def loss(self, gated: int) -> int:
        """A lower bound (whole units) on the least Σ ℓ_c over cards whose Σ g_c holds `gated`."""
        if gated <= 0 or not self.cards:
            return 0
        lost = 0
        for loss, room in self.cards:
            if room <= 0:
                break
            if room >= gated:
                return lost + loss * gated // room  # the split card's share, rounded down
            lost += loss
            gated -= room
        return _NEVER  # the gated pieces fit on no set of cards


UNIT_BYTES = 64 * MiB


def _gated_units(slot: CardModel, widest: int) -> int:
    """g_c before lowering: free − cuda_context − holds + E in whole units (what gates leave)."""
    return max(0, slot.gate_free_bytes() + widest) // UNIT_BYTES


def _size(new: NewSeat, own: Mapping[str, int]) -> int:
    """The least units the seat adds to any card: its resident, less its own bytes already there."""
    return max(0, new.seat.resident_bytes - own.get(new.name, 0)) // UNIT_BYTES


def _most_own(problem: Problem) -> dict[str, int]:
    """Per seat, the most bytes its own processes hold on any one card."""
    own: dict[str, int] = {}
    for slot in problem.cards:
        for name, held in slot.own_bytes.items():
            own[name] = max(held, own.get(name, 0))
    return own


def _lowered(rooms: Sequence[int], sizes: Iterable[int]) -> list[int]:
    """Each room lowered to the largest sum of `sizes` (each any number of times) within it.

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
    return [best[room] for room in rooms]


def _gate_slacks(problem: Problem, slots: Sequence[CardModel]) -> dict[str, int]:
    """Per gated seat, the largest need − requested over the card sizes present.

    Only from a `PairTable` (the plan's); a seat without a request on some size is left out.
    """
    table = problem.need
    if not isinstance(table, PairTable):
        return {}
    sizes = {(slot.cuda_total, slot.cuda_context_bytes): slot for slot in slots}
    out: dict[str, int] = {}
    for new in problem.seats:
        slack = [table.gate_slack(new.name, slot) for slot in sizes.values()]
        if slack and all(e is not None for e in slack):
            out[new.name] = max(e for e in slack if e is not None)
    return out
