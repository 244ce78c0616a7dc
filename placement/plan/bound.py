"""An upper bound on the seats any placement places, per priority level, without the integer program.

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
ascending, the last one split).

Rare sizes. Lowering a room to sums of sizes, each size any number of times, is weak when a few
seats have sizes off the others' grid (a few 50-unit seats among whole GiB, 16 units, make almost
every count of units a sum). With Q a set of rare sizes and N the pieces of them (a seat counted
once per card it takes), a card holding k rare pieces holds at most C_c + γ_c(k): C_c its room
lowered to sums of the other sizes, γ_c(k) what at most k rare pieces add to that (or to the
gated room g'_c lowered likewise, where it holds gated pieces), and Σ_c k_c ≤ N, so

    Σ pieces on cards of A_c ≥ t ≤ Σ_{A_c ≥ t} C_c + the N largest slopes of the γ_c there

(A_c: the room lowered to sums of every size; the slopes of each γ_c's least concave majorant, the
linear relaxation of sharing N pieces among the cards), and the gate term counts ℓ'_c = C_c − g'_c
lost per card of X, which must still hold the gated pieces within Σ_{c∈X} g_c. Q = ∅ is the
plain bound; a few Q (the sizes off a grid of 2, 4, …, 32 units) are tried and the least bound is
kept. Each step only loosens, so no placement places more seats of a level than its bound.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate

import numpy as np
import numpy.typing as npt

from placement.plan.greedy import has_eligible_host
from placement.plan.problem import NewSeat, PairTable, Problem
from seats.units import MiB

Ints = npt.NDArray[np.int64]


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
    """Per priority level, highest first: the relaxation's most seats, beside `placed`'s count
    (`each_level_bound`)."""
    return list(each_level_bound(problem, placed))


def each_level_bound(problem: Problem, placed: Iterable[str]) -> Iterator[LevelBound]:
    """Per priority level, highest first: the relaxation's most seats, beside `placed`'s count;
    a level is worked out when it is reached.

    Strict priority: a placement places at least `placed`'s count at each higher level, so
    the relaxation of level L carries that many seats of each level above it (the cheapest
    at every size threshold). A level's bound depends on those counts alone: it is worked out
    once per problem and counts above (`_Cards.bounds`).
    """
    done = set(placed)
    cards = _Cards.of(problem)
    above: list[tuple[_Pieces, int]] = []  # each higher level's pieces and its count
    for priority, members, pieces in cards.levels:
        count = sum(1 for new in members if new.name in done)
        key = (priority, tuple(n for _, n in above))
        most = cards.bounds.get(key)
        if most is None:
            most = cards.bounds[key] = cards.most(pieces, above)
        yield LevelBound(priority, len(members), most, count)
        above.append((pieces, count))


@dataclass
class _Cards:
    """What the bound reads of a problem, worked out once (`Problem.memo`): the readable cards'
    rooms in units, the gate's figures, each level's seats and pieces, and the bounds found."""

    rooms: Ints
    gate_free: Ints | None
    widest_gate: int | None
    levels: list[tuple[int, list[NewSeat], _Pieces]]
    bounds: dict[tuple[int, tuple[int, ...]], int] = field(default_factory=dict)

    @classmethod
    def of(cls, problem: Problem) -> _Cards:
        found = problem.memo.get("level_bounds")
        if isinstance(found, _Cards):
            return found
        own = _most_own(problem)
        ok = [slot for slot in problem.cards if slot.ok]
        # Per card (the readable ones, in order): its room and what gates leave, in bytes.
        open_bytes = np.fromiter((slot.open_bytes for slot in ok), np.int64, len(ok))
        slack = _gate_slacks(problem)
        widest_gate = max((e for e in slack.values() if e <= 0), default=None)
        gate_free = (
            np.fromiter((slot.gate_free_bytes() for slot in ok), np.int64, len(ok))
            if widest_gate is not None
            else None
        )
        levels: dict[int, list[NewSeat]] = defaultdict(list)
        for new in problem.seats:
            levels[new.seat.priority].append(new)
        pieces = [
            (
                priority,
                levels[priority],
                _Pieces(
                    [
                        (_size(new, own), new.seat.card_count, slack.get(new.name, 1) <= 0)
                        for new in levels[priority]
                        if has_eligible_host(problem, new)
                    ]
                ),
            )
            for priority in sorted(levels, reverse=True)
        ]
        cards = cls(np.maximum(open_bytes, 0) // UNIT_BYTES, gate_free, widest_gate, pieces)
        problem.memo["level_bounds"] = cards
        return cards

    def most(self, pieces: _Pieces, above: Sequence[tuple[_Pieces, int]]) -> int:
        """The most of a level's `pieces` beside `above`'s counts of each higher level."""
        rooms, gate_free, widest_gate = self.rooms, self.gate_free, self.widest_gate
        # Pieces per size (a seat once per card) of this level and those above.
        counts: Counter[int] = Counter()
        for size, cards, _ in (*(p for level, _ in above for p in level.pieces), *pieces.pieces):
            counts[size] += cards
        sizes = set(counts)
        thresholds = sorted(sizes | {0})
        carried = {t: sum(level.least(t, n) for level, n in above) for t in thresholds}
        carried_gated = sum(level.least_gated(n) for level, n in above)
        whole = _Lowering.of(rooms, gate_free, sizes, widest_gate)
        most = len(pieces)
        for rare in _rare_sizes(counts, len(rooms)):
            cut = (
                whole.without(rooms, gate_free, sizes - rare, rare, widest_gate) if rare else whole
            )
            room_at = cut.room_at(thresholds, sum(counts[size] for size in rare))
            if any(carried[t] > room_at[t] for t in thresholds):
                return 0  # cannot happen for a placement that exists; said as no room
            room = {t: room_at[t] - carried[t] for t in thresholds}
            most = min(most, _most(pieces, thresholds, room, cut.gate(), carried_gated))
        return most


# Rare sizes are those off a grid of this many units (whole GiB is 16): each grid is one try.
_GRIDS = (2, 4, 8, 16, 32)


def _rare_sizes(counts: Mapping[int, int], cards: int) -> list[frozenset[int]]:
    """The sets Q of rare sizes to try: none (the plain bound) and, per grid, the sizes off it,
    where they are some sizes but not all and fewer pieces than there are cards."""
    sizes = {size for size in counts if size > 0}
    out: list[frozenset[int]] = [frozenset()]
    for grid in _GRIDS:
        rare = frozenset(size for size in sizes if size % grid)
        if rare and rare != sizes and rare not in out and sum(counts[s] for s in rare) < cards:
            out.append(rare)
    return out


# A card's gain is worked out for up to this many rare pieces on it; more count as any number.
_RARE_ON_A_CARD = 3


@dataclass(frozen=True)
class _Lowering:
    """Per card, in units: its room lowered to sums of every size (A_c, which also says which
    thresholds it counts at) and to sums of the sizes not rare (C_c); the gated room lowered
    likewise (g_c, g'_c). C = A and g' = g where no size is rare.

    `slopes[j, c]`: what card c gains with its (j + 1)-th rare piece, on the least concave
    majorant of γ_c(k) = max(L_c(k) − C_c, G_c(k) − g'_c) (L_c(k), G_c(k): the room and the
    gated room lowered to sums with at most k rare pieces; k past `_RARE_ON_A_CARD` is any
    number, γ = max(A_c − C_c, g_c − g'_c)). The N largest slopes over cards bound what N rare
    pieces gain, however they share the cards (the linear relaxation of that choice)."""

    whole: Ints
    common: Ints
    gated: Ints | None = None
    gated_common: Ints | None = None
    slopes: npt.NDArray[np.float64] | None = None

    @classmethod
    def of(
        cls, rooms: Ints, gate_free: Ints | None, sizes: Iterable[int], widest: int | None
    ) -> _Lowering:
        """Every size counted: the plain bound's rooms."""
        lowered = _lowered(rooms, sizes)
        gated = _gated_rooms(gate_free, lowered, sizes, widest)
        return cls(lowered, lowered, gated, gated)

    def without(
        self,
        rooms: Ints,
        gate_free: Ints | None,
        common: Iterable[int],
        rare: Iterable[int],
        widest: int | None,
    ) -> _Lowering:
        """The same cards with C_c and g'_c lowered to sums of `common` alone, and the slopes
        of what `rare` pieces on a card gain there."""
        common, rare = list(common), list(rare)
        counted = _lowered_counted(rooms, common, rare, _RARE_ON_A_CARD)
        lowered = counted[0]
        gains = [k - lowered for k in counted] + [self.whole - lowered]
        gated_common = None
        if self.gated is not None and gate_free is not None and widest is not None:
            gate_rooms = np.maximum(gate_free + widest, 0) // UNIT_BYTES
            held = _lowered_counted(gate_rooms, common, rare, _RARE_ON_A_CARD)
            gated = [np.minimum(k, h) for k, h in zip(counted, held, strict=True)]
            gated_common = gated[0]
            extra = [g - gated_common for g in gated] + [self.gated - gated_common]
            gains = [np.maximum(a, b) for a, b in zip(gains, extra, strict=True)]
        return _Lowering(self.whole, lowered, self.gated, gated_common, _slopes(gains))

    def room_at(self, thresholds: Sequence[int], rare_pieces: int) -> dict[int, int]:
        """Per threshold t, Σ C_c over cards of A_c ≥ t, plus what `rare_pieces` gain there at most."""
        order = np.argsort(self.whole, kind="stable")
        ordered = self.whole[order]
        common = self.common[order]
        # after[i]: Σ common[i:]
        after = np.concatenate((np.cumsum(common[::-1])[::-1], np.zeros(1, np.int64)))
        starts = np.searchsorted(ordered, np.asarray(thresholds, np.int64), side="left")
        slopes = self.slopes[:, order] if self.slopes is not None else None
        out: dict[int, int] = {}
        for t, i in zip(thresholds, starts.tolist(), strict=True):
            gain = 0
            if slopes is not None and rare_pieces > 0:
                # Whole units: what the cards hold is a whole number of them.
                gain = math.floor(_largest_sum(slopes[:, i:].ravel(), rare_pieces) + 1e-9)
            out[t] = int(after[i]) + gain
        return out

    def gate(self) -> _GateLoss:
        """The gate term: ℓ'_c = C_c − g'_c lost on each card that holds gated pieces within g_c."""
        if self.gated is None or self.gated_common is None:
            return _GateLoss()
        return _GateLoss.of(self.gated, self.common - self.gated_common)


def _slopes(gains: Sequence[Ints]) -> npt.NDArray[np.float64]:
    """Per card, the slopes of the least concave majorant of k ↦ gains[k] (gains[0] = 0),
    made nondecreasing first: row j is the rise from k = j to j + 1."""
    points = np.maximum.accumulate(np.array(gains, np.float64), axis=0)
    last = len(points) - 1
    hull = points.copy()
    for i in range(last + 1):
        for j in range(i + 2, last + 1):
            for k in range(i + 1, j):
                line = points[i] + (points[j] - points[i]) * (k - i) / (j - i)
                hull[k] = np.maximum(hull[k], line)
    return np.diff(hull, axis=0)


def _largest_sum(values: npt.NDArray[np.float64], n: int) -> float:
    """Σ of the `n` largest of `values` (all of them when there are fewer)."""
    if n <= 0 or not len(values):
        return 0.0
    if n >= len(values):
        return float(values.sum())
    return float(np.partition(values, len(values) - n)[len(values) - n :].sum())


def _gated_rooms(
    gate_free: Ints | None, lowered: Ints, sizes: Iterable[int], widest: int | None
) -> Ints | None:
    """g_c: a card's room where it holds a gated piece, min(R_c, free − cuda_context − holds + E)
    lowered to sums of `sizes` (`lowered` is R_c, `gate_free` in bytes); None without a gated seat."""
    if widest is None or gate_free is None:
        return None
    return np.minimum(lowered, _lowered(np.maximum(gate_free + widest, 0) // UNIT_BYTES, sizes))


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
    """Cards as the gate term sees them, by ℓ_c / g_c ascending, as running sums: `held[k]` =
    Σ g_c and `lost[k]` = Σ ℓ_c of the first k + 1 cards, and each card's own (ℓ_c, g_c) in
    units. Cards with g_c = 0 sort last and hold nothing gated: only their count is kept."""

    held: Ints = field(default_factory=lambda: np.zeros(0, np.int64))
    lost: Ints = field(default_factory=lambda: np.zeros(0, np.int64))
    loss_c: Ints = field(default_factory=lambda: np.zeros(0, np.int64))
    room_c: Ints = field(default_factory=lambda: np.zeros(0, np.int64))
    cards: int = 0  # how many cards there are, those that hold nothing gated included

    @classmethod
    def of(cls, room: Ints, loss: Ints) -> _GateLoss:
        """From every card's g_c (`room`) and ℓ_c (`loss`), in units."""
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(room > 0, loss / np.where(room > 0, room, 1), np.inf)
        order = np.argsort(ratio, kind="stable")
        room, loss = room[order], loss[order]
        # Cards that hold nothing gated (g_c = 0, last) end the walk: they are left out.
        keep = int(np.count_nonzero(room > 0))
        room, loss = room[:keep], loss[:keep]
        return cls(np.cumsum(room), np.cumsum(loss), loss, room, len(order))

    def loss(self, gated: int) -> int:
        """A lower bound (whole units) on the least Σ ℓ_c over cards whose Σ g_c holds `gated`:
        the cards in order until their g_c hold it, the last one's ℓ_c split in proportion."""
        if gated <= 0 or not self.cards:
            return 0
        if not len(self.held) or gated > int(self.held[-1]):
            return _NEVER  # the gated pieces fit on no set of cards
        k = int(np.searchsorted(self.held, gated, side="left"))
        before_held = int(self.held[k - 1]) if k else 0
        before_lost = int(self.lost[k - 1]) if k else 0
        # The split card's share, rounded down.
        return before_lost + int(self.loss_c[k]) * (gated - before_held) // int(self.room_c[k])


UNIT_BYTES = 64 * MiB


def _size(new: NewSeat, own: Mapping[str, int]) -> int:
    """The least units the seat adds to any card: its resident, less its own bytes already there."""
    return max(0, new.seat.resident_bytes - own.get(new.name, 0)) // UNIT_BYTES


def _most_own(problem: Problem) -> dict[str, int]:
    """Per seat, the most bytes its own processes hold on any one card."""
    own: dict[str, int] = {}
    for slot in problem.cards:
        if slot.own_bytes:
            for name, held in slot.own_bytes.items():
                own[name] = max(held, own.get(name, 0))
    return own


def _lowered(rooms: Ints, sizes: Iterable[int]) -> Ints:
    """Each room lowered to the largest sum of `sizes` (each any number of times) within it.

    Seats on a card add up to at most its room, and their sizes (rounded down) to such a sum.
    """
    top = int(rooms.max()) if len(rooms) else 0
    mask = (1 << (top + 1)) - 1
    return _best(_closed(1, sizes, mask), rooms, top)


def _lowered_counted(
    rooms: Ints, common: Iterable[int], rare: Iterable[int], most: int
) -> list[Ints]:
    """Per k = 0 … `most`: each room lowered to the largest sum, within it, of `common` sizes
    (each any number of times) and at most k pieces of `rare` ones."""
    top = int(rooms.max()) if len(rooms) else 0
    mask = (1 << (top + 1)) - 1
    reach = _closed(1, common, mask)
    out = [_best(reach, rooms, top)]
    for _ in range(most):
        grown = reach
        for size in rare:
            grown |= reach << size
        reach = _closed(grown & mask, common, mask)
        out.append(_best(reach, rooms, top))
    return out


def _closed(reach: int, sizes: Iterable[int], mask: int) -> int:
    """The bit set `reach` (bit n: n units are a sum) with any number of each size added."""
    for size in sorted(s for s in set(sizes) if s > 0):
        while True:
            grown = (reach | (reach << size)) & mask
            if grown == reach:
                break
            reach = grown
    return reach


def _best(reach: int, rooms: Ints, top: int) -> Ints:
    """Per room, the largest n ≤ it whose bit is set in `reach` (0 is always one)."""
    bits = bin(reach)[:1:-1].ljust(top + 1, "0")[: top + 1]
    reached = np.frombuffer(bits.encode(), np.uint8) == ord("1")
    best = np.maximum.accumulate(np.where(reached, np.arange(top + 1), 0))
    found: Ints = best[rooms]
    return found


def _gate_slacks(problem: Problem) -> dict[str, int]:
    """Per gated seat, the largest need − requested over the card sizes of its readable cards.

    Only from a `PairTable` (the plan's); a seat without a request on some size is left out.
    """
    table = problem.need
    if not isinstance(table, PairTable):
        return {}
    sizes = table.size_slots()
    out: dict[str, int] = {}
    for new in problem.seats:
        slack = [table.gate_slack(new.name, slot) for slot in sizes]
        if slack and all(e is not None for e in slack):
            out[new.name] = max(e for e in slack if e is not None)
    return out
