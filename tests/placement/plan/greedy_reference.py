"""The greedy placers: first-fit-decreasing and best-fit-decreasing on the model's numbers.

Seats go in priority, then size, descending. Both place seats on copies of the cards' one model
(`CardModel.with_seat`) and ask the copy whether a seat may go there now (room, gate bounds,
exclusive); the verifier re-checks the result like any proposal.
"""

from __future__ import annotations

import copy
from bisect import bisect_left, insort
from collections.abc import Iterable, Sequence
from typing import Literal

from placement.fit.card import CardKey, CardModel
from placement.plan.problem import NewSeat, Problem
from placement.plan.verified import Assignment

_NONE = -(1 << 80)


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
        self._tree = [_NONE] * (2 * size)
        for i, value in enumerate(values):
            self._tree[size + i] = value
        for node in range(size - 1, 0, -1):
            self._tree[node] = max(self._tree[2 * node], self._tree[2 * node + 1])

    def copy(self) -> _WidestFirst:
        twin = copy.copy(self)
        twin._tree = list(self._tree)
        return twin

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


def placing_key(new: NewSeat) -> tuple[int, int, str]:
    """Priority, then bytes over all its cards, descending; then name."""
    return (-new.seat.priority, -new.seat.resident_bytes * new.seat.card_count, new.name)


def placing_order(problem: Problem) -> list[NewSeat]:
    """The seats by `placing_key`: priority, then bytes over all its cards, descending."""
    return sorted(problem.seats, key=placing_key)


class _Cards:
    """The cards as the placer fills them: per card its model with the seats placed so far, and
    per host its widths.

    `trees[k - 1]`: per host, the k-th widest card's width (room before held reserves,
    own processes freed), so hosts with fewer cards wide enough for a seat's resident are
    skipped without looking at their cards.
    """

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.exclusive = {new.name for new in problem.seats if new.seat.exclusive}
        self.residents = {new.name: new.seat.resident_bytes for new in problem.seats}
        # Per card, its model with the seats placed on it so far.
        self.slots: dict[CardKey, CardModel] = {slot.key: slot for slot in problem.cards}
        self.host_names = list(problem.hosts)
        self.position = {host: i for i, host in enumerate(self.host_names)}
        self.depth = max((new.seat.card_count for new in problem.seats), default=1)
        self.host_widths = [self.widths(host) for host in self.host_names]
        self.trees = [_WidestFirst([row[k] for row in self.host_widths]) for k in range(self.depth)]

    def width(self, key: CardKey) -> int:
        """The most room any seat may meet on card `key` now (a necessary bound, never stricter)."""
        return self.slots[key].width_bytes

    def widths(self, host: str) -> list[int]:
        room = sorted(
            (self.width(slot.key) for slot in self.problem.hosts[host] if slot.ok), reverse=True
        )
        return (room + [_NONE] * self.depth)[: self.depth]

    def home(self, new: NewSeat) -> int | None:
        """Where the host `new` names stands (-1: no snapshot of it); None when it names none."""
        return self.position.get(new.seat.host, -1) if new.seat.host is not None else None

    def room_left(self, name: str, host: str, index: int) -> int | None:
        """Bytes of room left on card `index` of `host` if `name` goes there now; None if it cannot."""
        slot = self.slots[(host, index)]
        # The seat adds at least its resident less its own bytes there (a cheap first test).
        if slot.gate_floor_excludes(self.residents[name]):
            return None
        found = self.problem.pair(name, host, index)
        if found is None:
            return None
        need, own_gate = found
        if self.exclusive and slot.exclusive_refuses(name, name in self.exclusive):
            return None
        return slot.left_after(name, need, own_gate)

    def fitting(self, name: str, host: str, count: int | None) -> list[tuple[int, int]]:
        """(room left after, card) for the cards of `host` that can take `name` now (the first `count`)."""
        found: list[tuple[int, int]] = []
        for slot in self.problem.hosts[host]:
            left = self.room_left(name, host, slot.index)
            if left is None:
                continue
            found.append((left, slot.index))
            if len(found) == count:
                break
        return found

    def place(self, name: str, at: int, cards: tuple[int, ...]) -> None:
        host = self.host_names[at]
        for index in cards:
            found = self.problem.pair(name, host, index)
            if found is None:
                raise KeyError((name, host, index))
            need, gate = found
            key = (host, index)
            self.slots[key] = self.slots[key].with_seat(
                name,
                need,
                resident_bytes=self.residents[name],
                exclusive=name in self.exclusive,
                gate_bound_bytes=gate,
            )
        now = self.widths(host)
        for k, w in enumerate(now):
            self.trees[k].set(at, w)
        self.host_widths[at] = now


def first_fit(problem: Problem, order: Sequence[NewSeat] | None = None) -> Assignment:
    """First-fit-decreasing: hosts in their order, the first cards that take the seat.

    `order`: the seats to try, in this order (default: all, in `placing_order`).
    """
    cards = _Cards(problem)
    out: Assignment = {}
    for new in placing_order(problem) if order is None else order:
        count, resident = new.seat.card_count, problem.least_width(new.name)
        tree = cards.trees[count - 1]
        # A seat that names its host has no eligible card anywhere else: try that host alone.
        home = cards.home(new)
        at = tree.next_at_least(0 if home is None else max(home, 0), resident)
        while at is not None and (home is None or at == home):
            found = cards.fitting(new.name, cards.host_names[at], count)
            if len(found) >= count:
                chosen = tuple(sorted(index for _, index in found))
                cards.place(new.name, at, chosen)
                out[new.name] = (cards.host_names[at], chosen)
                break
            at = tree.next_at_least(at + 1, resident)
    return out


class _BestFit(_Cards):
    """Best fit's extra indexes: every usable card by width, and hosts by their k-th widest card."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem)
        self.by_width = sorted(
            (self.width(slot.key), self.position[host], slot.index)
            for host in self.host_names
            for slot in problem.hosts[host]
            if slot.ok
        )
        self.by_host = [
            sorted((row[k], at) for at, row in enumerate(self.host_widths))
            for k in range(self.depth)
        ]

    def copy(self) -> _BestFit:
        """An independent copy of the cards' state (the problem is shared, never changed)."""
        twin = copy.copy(self)
        twin.slots = dict(self.slots)
        twin.host_widths = list(self.host_widths)
        twin.trees = [tree.copy() for tree in self.trees]
        twin.by_width = list(self.by_width)
        twin.by_host = [list(column) for column in self.by_host]
        return twin

    def one_card(self, new: NewSeat) -> tuple[int, int, tuple[int, ...]] | None:
        """The narrowest card wide enough that takes the seat (a bisection, then a short walk)."""
        for j in range(
            bisect_left(self.by_width, (self.problem.least_width(new.name), -1, -1)),
            len(self.by_width),
        ):
            _, spot, index = self.by_width[j]
            host = self.host_names[spot]
            left = self.room_left(new.name, host, index)
            if left is not None:
                return (left, spot, (index,))
        return None

    def many_cards(self, new: NewSeat) -> tuple[int, int, tuple[int, ...]] | None:
        """The host whose k-th widest card is narrowest among those that take the seat."""
        count = new.seat.card_count
        column = self.by_host[count - 1]
        least = self.problem.least_width(new.name)
        for j in range(bisect_left(column, (least, -1)), len(column)):
            spot = column[j][1]
            found = self.fitting(new.name, self.host_names[spot], None)
            if len(found) >= count:
                return _tightest(found, count, spot)
        return None

    def at_home(self, new: NewSeat, home: int) -> tuple[int, int, tuple[int, ...]] | None:
        """A seat naming its host: that host alone, where the fewest bytes of room are left."""
        count = new.seat.card_count
        at = self.trees[count - 1].next_at_least(max(home, 0), self.problem.least_width(new.name))
        if at is None or at != home:
            return None
        found = self.fitting(new.name, self.host_names[at], None)
        return _tightest(found, count, at) if len(found) >= count else None

    def place(self, name: str, at: int, cards: tuple[int, ...]) -> None:
        host = self.host_names[at]
        for index in cards:
            del self.by_width[bisect_left(self.by_width, (self.width((host, index)), at, index))]
        before = self.host_widths[at]
        super().place(name, at, cards)
        for index in cards:
            insort(self.by_width, (self.width((host, index)), at, index))
        for k, w in enumerate(self.host_widths[at]):
            del self.by_host[k][bisect_left(self.by_host[k], (before[k], at))]
            insort(self.by_host[k], (w, at))


def _tightest(
    found: list[tuple[int, int]], count: int, at: int
) -> tuple[int, int, tuple[int, ...]]:
    chosen = sorted(found)[:count]
    return (sum(room for room, _ in chosen), at, tuple(sorted(index for _, index in chosen)))


class BestFitPacking:
    """A best-fit packing that can be resumed: the cards' state and the placement so far.

    `copy()` forks it, so searches that share a prefix of seats place that prefix once.
    """

    def __init__(self, problem: Problem) -> None:
        self.cards = _BestFit(problem)
        self.placed: Assignment = {}

    def copy(self) -> BestFitPacking:
        """An independent packing in the same state."""
        twin = object.__new__(BestFitPacking)
        twin.cards = self.cards.copy()
        twin.placed = dict(self.placed)
        return twin

    def add(self, seats: Iterable[NewSeat], *, all_or_none: bool = False) -> int:
        """Place each seat, in order, where best fit puts it; how many found no card.

        `all_or_none` is taken and ignored: the search drops a packing with any seat missed
        whether the pass stopped there or went on."""
        cards, missed = self.cards, 0
        for new in seats:
            home = cards.home(new)
            if home is not None:
                best = cards.at_home(new, home)
            elif new.seat.card_count == 1:
                best = cards.one_card(new)
            else:
                best = cards.many_cards(new)
            if best is None:
                missed += 1
                continue
            _, at, chosen = best
            cards.place(new.name, at, chosen)
            self.placed[new.name] = (cards.host_names[at], chosen)
        return missed


def best_fit(problem: Problem, order: Sequence[NewSeat] | None = None) -> Assignment:
    """Best-fit-decreasing: each seat where the fewest bytes of room are left after it.

    A one-card seat on the narrowest card that takes it; a multi-card seat on the host whose
    k-th widest card is narrowest among those that take it (its k narrowest fitting cards); a
    seat naming its host where the fewest bytes of room are left. A baseline beside first fit,
    and a second fallback. `order`: the seats to try, in this order (default: `placing_order`).
    """
    packing = BestFitPacking(problem)
    packing.add(placing_order(problem) if order is None else order)
    return packing.placed


def greedy_assignment(problem: Problem, *, fit: Literal["first", "best"] = "first") -> Assignment:
    """First-fit-decreasing (or best-fit) on the model's numbers: priority, then size, descending."""
    return best_fit(problem) if fit == "best" else first_fit(problem)
