"""The greedy placers: first-fit-decreasing and best-fit-decreasing on the model's numbers.

Seats go in priority, then size, descending. Both place seats on copies of the cards' one model
(`CardModel.with_seat`) and ask it whether a seat may go there now (room, gate bounds,
exclusive) through the models' rows (`placement.fit.card_arrays`): card by card in the order
the placer prefers (host order; narrowest first), passing over blocks of cards whose largest
headroom min(room, floor − load) is below the seat's least need (no card there takes it), and
every card at once where a walk runs long; a seat some card names is asked card by card on the
models. The verifier re-checks the result like any proposal.
"""

from __future__ import annotations

import weakref
from bisect import bisect_left, bisect_right, insort
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, Self

import numpy as np

from placement.fit.card import CardKey, CardModel
from placement.fit.card_arrays import UNBOUNDED, Bools, CardArrays, Ints
from placement.plan.problem import NewSeat, PairTable, Problem
from placement.plan.verified import Assignment

# A host with fewer usable cards than k: its k-th widest width.
_NONE = -UNBOUNDED


def placing_key(new: NewSeat) -> tuple[int, int, str]:
    """Priority, then bytes over all its cards, descending; then name."""
    return (-new.seat.priority, -new.seat.resident_bytes * new.seat.card_count, new.name)


def placing_order(problem: Problem) -> list[NewSeat]:
    """The seats by `placing_key`: priority, then bytes over all its cards, descending."""
    return sorted(problem.seats, key=placing_key)


@dataclass(frozen=True)
class _Rows:
    """A seat's pairs over every card: where it could go alone (`PairTable`'s answer), its need
    (one figure where the fleet has one card size) and its gate bound (UNBOUNDED: none)."""

    mask: Bools
    need: Ints | np.int64
    bound: Ints
    # The same as Python lists (`need`: an int where it is one figure), asked card by card.
    mask_each: list[bool]
    need_each: list[int] | int
    bound_each: list[int]
    need_least: int  # its least need over every card: no card with less headroom takes it

    def need_at(self, i: int) -> int:
        """The seat's need in bytes on card `i`."""
        return self.need_each if isinstance(self.need_each, int) else self.need_each[i]

    def pair(self, i: int) -> tuple[int, int | None]:
        """(need, gate bound or None) on card `i`: `Problem.pair`'s answer there."""
        bound = self.bound_each[i]
        return self.need_at(i), None if bound == UNBOUNDED else bound


@dataclass(frozen=True, slots=True)
class _Step:
    """What placing one seat reads, looked up once per seat of a problem (`_Fleet.step`)."""

    new: NewSeat
    name: str
    count: int  # cards it takes
    home: int | None  # the position of the host it names (-1: not in the fleet); None: names none
    rows: _Rows | None  # `_Fleet.rows`
    least_width: int  # `Problem.least_width`
    resident_bytes: int
    exclusive: bool


class _Fleet:
    """What placing never changes: the cards in host order, and each seat's pairs as rows.

    Shared by every packing of one problem (`fleet_of`).
    """

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.host_names = list(problem.hosts)
        self.position = {host: i for i, host in enumerate(self.host_names)}
        self.keys: list[CardKey] = [slot.key for h in self.host_names for slot in problem.hosts[h]]
        self.flat = {key: i for i, key in enumerate(self.keys)}
        self.host_of = np.array([self.position[host] for host, _ in self.keys], np.int64)
        self.index_of = np.array([index for _, index in self.keys], np.int64)
        # Each host's cards are one run of the rows: [start, stop).
        self.start = np.searchsorted(self.host_of, np.arange(len(self.host_names)))
        self.stop = np.searchsorted(self.host_of, np.arange(len(self.host_names)), side="right")
        # Best fit's tie-break among cards of one width: host order, then card index.
        order = sorted(range(len(self.keys)), key=lambda i: (self.host_of[i], self.index_of[i]))
        self.rank = np.empty(len(self.keys), np.int64)
        self.rank[order] = np.arange(len(self.keys))
        self.ranked = bool((self.rank == np.arange(len(self.keys))).all())
        self.exclusive = {new.name for new in problem.seats if new.seat.exclusive}
        self.residents = {new.name: new.seat.resident_bytes for new in problem.seats}
        self.depth = max((new.seat.card_count for new in problem.seats), default=1)
        models = [problem.models[key] for key in self.keys]
        self.arrays = CardArrays(models, self.residents)
        # Per card, its size class (CUDA total, context): a seat's need depends on it alone.
        classes: dict[tuple[int, int], int] = {}
        self.class_of = np.array(
            [
                classes.setdefault((m.cuda_total, m.cuda_context_bytes), len(classes))
                for m in models
            ],
            np.int64,
        )
        # Per size class, one card of it (the first).
        self.class_models: list[CardModel] = []
        for c, model in zip(self.class_of.tolist(), models, strict=True):
            if c == len(self.class_models):
                self.class_models.append(model)
        ok_count = np.bincount(self.host_of[self.arrays.ok], minlength=len(self.host_names))
        self.ok_count = ok_count[self.host_of] if len(self.keys) else ok_count
        self.table = problem.need if isinstance(problem.need, PairTable) else None
        # Rows by seat, and by shape: seats of one shape share their rows.
        self._rows: dict[str, _Rows | None] = {}
        self._shapes: dict[Hashable, _Rows] = {}
        self._eligible: dict[str, bool] = {}
        self._eligible_shapes: dict[tuple[int, int, int], bool] = {}
        self._pairs: dict[int, int] = {}  # eligible pairs of a seat's rows, by id(rows)
        # Rows and cards as Python lists, for placers that read one card at a time.
        self.host_each: list[int] = self.host_of.tolist()
        self.index_each: list[int] = self.index_of.tolist()
        self.ok_each: list[bool] = self.arrays.ok.tolist()
        self.steps: dict[int, _Step] = {}  # by id(new): `step`

    def step(self, new: NewSeat) -> _Step:
        """The seat's `_Step`, kept by the seat's identity."""
        found = self.steps.get(id(new))
        if found is None or found.new is not new:
            seat = new.seat
            home = None if seat.host is None else self.position.get(seat.host, -1)
            found = self.steps[id(new)] = _Step(
                new,
                seat.name,
                seat.card_count,
                home,
                self.rows(new),
                self.problem.least_width(seat.name),
                seat.resident_bytes,
                seat.exclusive,
            )
        return found

    def pairs_exceed(self, limit: int) -> bool:
        """`Problem.pairs_exceed`: more than `limit` eligible (seat, card) pairs, each seat's
        counted off its rows (a seat some card names, pair by pair)."""
        count = 0
        for new in self.problem.seats:
            rows = self.rows(new)
            if rows is None:
                count += sum(
                    1 for host, index in self.keys if self.problem.pair(new.name, host, index)
                )
            else:
                found = self._pairs.get(id(rows))
                if found is None:
                    found = self._pairs[id(rows)] = int(rows.mask.sum())
                count += found
            if count > limit:
                return True
        return False

    def rows(self, new: NewSeat) -> _Rows | None:
        """The seat's rows; None when some card names the seat (it is asked card by card)."""
        name = new.name
        try:
            return self._rows[name]
        except KeyError:
            pass
        found = None
        if self.table is not None and name not in self.arrays.named:
            found = self._seat_rows(new, self.table)
        self._rows[name] = found
        return found

    def _seat_rows(self, new: NewSeat, table: PairTable) -> _Rows:
        seat = new.seat
        sized = [table.sized(new.name, model) for model in self.class_models]
        shape = (
            tuple(sized),
            seat.exclusive,
            seat.card_count,
            seat.host,
            seat.pinned_cards,
        )
        found = self._shapes.get(shape)
        if found is not None:
            return found
        need = np.array([s[0] if s else 0 for s in sized], np.int64)
        requested = np.array([s[1] if s and s[1] is not None else 0 for s in sized], np.int64)
        requests = np.array([s is not None and s[1] is not None for s in sized], bool)
        need_row = need[self.class_of]
        mask, bound = self.arrays.pair_mask(
            need_row, requested[self.class_of], requests[self.class_of], exclusive=seat.exclusive
        )
        # PairTable's own cuts: the seat's host, its pinned cards, hosts with too few cards.
        mask &= self.ok_count >= seat.card_count
        if seat.host is not None:
            at = self.position.get(seat.host, -1)
            mask &= self.host_of == at
        if seat.pinned_cards is not None:
            mask &= np.isin(self.index_of, np.array(seat.pinned_cards, np.int64))
        one = len(need) == 1
        need_of = need[0] if one else need_row
        found = self._shapes[shape] = _Rows(
            mask,
            need_of,
            bound,
            mask.tolist(),
            int(need[0]) if one else need_row.tolist(),
            bound.tolist(),
            int(need.min()) if len(need) else 0,
        )
        return found

    def has_eligible_host(self, new: NewSeat) -> bool:
        """`Problem.has_eligible_host`: a host with as many cards the seat could go on alone
        (and whose open room reaches its resident) as it takes."""
        name = new.name
        found = self._eligible.get(name)
        if found is None:
            rows = self.rows(new)
            if rows is None:
                found = self.problem.has_eligible_host(name)
            else:
                # Seats of one shape and resident share the answer.
                key = (id(rows), new.seat.resident_bytes, new.seat.card_count)
                found = self._eligible_shapes.get(key)
                if found is None:
                    cards = rows.mask & (self.arrays.open >= new.seat.resident_bytes)
                    have = np.bincount(self.host_of[cards], minlength=len(self.host_names))
                    found = self._eligible_shapes[key] = bool((have >= new.seat.card_count).any())
            self._eligible[name] = found
        return found


_FLEETS: dict[int, tuple[weakref.ref[Problem], _Fleet]] = {}


def fleet_of(problem: Problem) -> _Fleet:
    """The problem's fleet rows, built once per problem and kept while it lives."""
    key = id(problem)
    found = _FLEETS.get(key)
    if found is not None and found[0]() is problem:
        return found[1]
    fleet = _Fleet(problem)
    gone = _FLEETS.pop
    _FLEETS[key] = (weakref.ref(problem, lambda _: gone(key, None)), fleet)
    return fleet


def pairs_exceed(problem: Problem, limit: int) -> bool:
    """`problem.pairs_exceed(limit)`, counted off the fleet's rows where the pair table has them."""
    fleet = fleet_of(problem)
    return fleet.pairs_exceed(limit) if fleet.table is not None else problem.pairs_exceed(limit)


def has_eligible_host(problem: Problem, new: NewSeat) -> bool:
    """`problem.has_eligible_host(new.name)`, answered from the fleet's rows."""
    return fleet_of(problem).has_eligible_host(new)


class _Cards:
    """The cards as the placer fills them: per card its model with the seats placed so far, its
    rows (`CardArrays`), and per host its k-th widest card's width (room before held reserves,
    own processes freed), so hosts with fewer cards wide enough for a seat are skipped."""

    def __init__(self, problem: Problem, fleet: _Fleet | None = None) -> None:
        self.problem = problem
        self.fleet = fleet or fleet_of(problem)
        self.slots: dict[CardKey, CardModel] = {slot.key: slot for slot in problem.cards}
        self.arrays = self.fleet.arrays.copy()
        hosts = len(self.fleet.host_names)
        self.kth = np.full((self.fleet.depth, hosts), _NONE, np.int64)
        for at in range(hosts):
            self._widths(at)
        # Hosts a seat was placed on since their k-th widths were last read (`_kth`): read
        # again only when a seat asks by host, not after each one-card placement.
        self.stale: set[int] = set()

    @property
    def host_names(self) -> list[str]:
        return self.fleet.host_names

    def copy(self) -> Self:
        """An independent copy of the cards' state (the problem and the fleet are shared)."""
        twin = object.__new__(type(self))
        twin.problem, twin.fleet = self.problem, self.fleet
        twin.slots = dict(self.slots)
        twin.arrays = self.arrays.copy()
        twin.kth = self.kth.copy()
        twin.stale = set(self.stale)
        return twin

    def _kth(self) -> Ints:
        """Per depth and host, its k-th widest card's width, the stale hosts read again."""
        for at in self.stale:
            self._widths(at)
        self.stale.clear()
        return self.kth

    def _widths(self, at: int) -> None:
        fleet = self.fleet
        start, stop = fleet.start[at], fleet.stop[at]
        width = self.arrays.width[start:stop][fleet.arrays.ok[start:stop]]
        depth = fleet.depth
        row = np.full(depth, _NONE, np.int64)
        top = -np.sort(-width)[:depth]
        row[: len(top)] = top
        self.kth[:, at] = row

    def room_left(self, name: str, host: str, index: int) -> int | None:
        """Bytes of room left on card `index` of `host` if `name` goes there now; None if it cannot."""
        slot = self.slots[(host, index)]
        # The seat adds at least its resident less its own bytes there (a cheap first test).
        if slot.gate_floor_excludes(self.fleet.residents[name]):
            return None
        found = self.problem.pair(name, host, index)
        if found is None:
            return None
        need, own_gate = found
        if self.fleet.exclusive and slot.exclusive_refuses(name, name in self.fleet.exclusive):
            return None
        return slot.left_after(name, need, own_gate)

    def fitting(self, new: NewSeat) -> Bools:
        """The cards that take `new` now, over every card in host order."""
        rows = self.fleet.rows(new)
        if rows is not None:
            return self.arrays.fits(rows.mask, rows.need, rows.bound, exclusive=new.seat.exclusive)
        return self._asked(new)[0]

    def left_after(self, new: NewSeat) -> Ints:
        """Per card, the room left once `new` goes there (read where `fitting` says it may)."""
        rows = self.fleet.rows(new)
        if rows is not None:
            return self.arrays.room - rows.need
        return self._asked(new)[1]

    def _asked(self, new: NewSeat) -> tuple[Bools, Ints]:
        """`fitting` and `left_after` of a seat some card names: asked card by card."""
        keys = self.fleet.keys
        fit = np.zeros(len(keys), bool)
        left = np.zeros(len(keys), np.int64)
        for i, (host, index) in enumerate(keys):
            got = self.room_left(new.name, host, index)
            if got is not None:
                fit[i], left[i] = True, got
        return fit, left

    def hosts_with(self, new: NewSeat, fit: Bools) -> Bools:
        """Hosts with enough fitting cards whose k-th widest card is wide enough for `new`."""
        count = new.seat.card_count
        fleet = self.fleet
        have = np.bincount(fleet.host_of[fit], minlength=len(fleet.host_names))
        hosts: Bools = (have >= count) & (
            self._kth()[count - 1] >= self.problem.least_width(new.name)
        )
        return hosts

    def host_cards(self, at: int, fit: Bools) -> Ints:
        """The fitting cards of host `at`, in its card order (positions in the rows)."""
        start = self.fleet.start[at]
        where: Ints = np.flatnonzero(fit[start : self.fleet.stop[at]]) + start
        return where

    def place(self, new: NewSeat, at: int, cards: tuple[int, ...]) -> None:
        """`new` placed on `cards` of host `at`: each card's model copied with it, rows read again."""
        name, fleet = new.name, self.fleet
        host = fleet.host_names[at]
        rows = fleet.rows(new)
        for index in cards:
            key = (host, index)
            i = fleet.flat[key]
            found = self.problem.pair(name, host, index) if rows is None else rows.pair(i)
            if found is None:
                raise KeyError((name, host, index))
            need, gate = found
            self.slots[key] = model = self.slots[key].with_seat(
                name,
                need,
                resident_bytes=fleet.residents[name],
                exclusive=name in fleet.exclusive,
                gate_bound_bytes=gate,
            )
            self.arrays.read(i, model)
        self.stale.add(at)

    def place_row(self, step: _Step, i: int) -> None:
        """`place` of a one-card seat the rows answer (`step.rows`) on row `i`."""
        fleet, rows = self.fleet, step.rows
        assert rows is not None
        at = fleet.host_each[i]
        key = (fleet.host_names[at], fleet.index_each[i])
        need, bound = rows.pair(i)
        self.slots[key] = model = self.slots[key].with_seat(
            step.name,
            need,
            resident_bytes=step.resident_bytes,
            exclusive=step.exclusive,
            gate_bound_bytes=bound,
        )
        self.arrays.read(i, model)
        self.stale.add(at)

    def host_widths(self, at: int) -> list[int]:
        """Host `at`'s usable cards' widths, widest first (`kth`'s row, read one card at a time)."""
        fleet, width, ok = self.fleet, self.arrays.each.width, self.fleet.ok_each
        start, stop = int(fleet.start[at]), int(fleet.stop[at])
        return sorted((width[j] for j in range(start, stop) if ok[j]), reverse=True)


# Best fit asks at most this many cards one by one, narrowest first, before it asks every card
# at once.
_WALK = 256
# Cards per block of `_FirstFit` and of `_Narrow` (whose block is split past twice this).
_BLOCK = 32


class _FirstFit(_Cards):
    """First fit's choice of one card over the rows: the first card, in host order, that takes
    the seat on a host wide enough, its cards asked in blocks of `_BLOCK` rows and the blocks in
    groups of `_BLOCK`. `tops[b]` is the largest headroom min(room, floor − load) of block b's
    cards and `group_tops[g]` the largest of group g's blocks: a card takes a seat of need n only
    where n ≤ its headroom, so a block or group whose top is below the seat's least need holds
    no card that takes it, and passing it over changes no answer."""

    def __init__(self, problem: Problem, fleet: _Fleet | None = None) -> None:
        super().__init__(problem, fleet)
        headroom = self.arrays.each.headroom
        self.tops = [max(headroom[k : k + _BLOCK]) for k in range(0, len(headroom), _BLOCK)]
        self.group_tops = [max(self.tops[g : g + _BLOCK]) for g in range(0, len(self.tops), _BLOCK)]

    def copy(self) -> Self:
        twin = super().copy()
        twin.tops, twin.group_tops = list(self.tops), list(self.group_tops)
        return twin

    def place(self, new: NewSeat, at: int, cards: tuple[int, ...]) -> None:
        """`_Cards.place`, the tops of each placed card's block and group read again."""
        super().place(new, at, cards)
        headroom, host, tops = self.arrays.each.headroom, self.fleet.host_names[at], self.tops
        for index in cards:
            b = self.fleet.flat[(host, index)] // _BLOCK
            tops[b] = max(headroom[b * _BLOCK : (b + 1) * _BLOCK])
            g = b // _BLOCK
            self.group_tops[g] = max(tops[g * _BLOCK : (g + 1) * _BLOCK])

    def first_cards(self, step: _Step) -> tuple[int, tuple[int, ...]] | None:
        """For a seat the rows answer (`step.rows`) that names no host, what `fitting`,
        `hosts_with` and the first host's first fitting cards choose: the first host, in host
        order, with as many cards that take it (`CardArrays.fits` of each) as the seat takes
        and whose k-th widest usable card is at least its least width; its first such cards."""
        rows = step.rows
        assert rows is not None
        each, tops, host_each = self.arrays.each, self.tops, self.fleet.host_each
        mask, bound, need = rows.mask_each, rows.bound_each, rows.need_each
        room = each.room
        blocked = each.placed_any if step.exclusive else each.placed_exclusive
        one, needs = (need, []) if isinstance(need, int) else (-1, need)
        cards, least_need, blocks = len(room), rows.need_least, len(tops)
        asked = -1  # the host last asked: its later cards answer as it did
        for g, group_top in enumerate(self.group_tops):
            if group_top < least_need:
                continue
            for b in range(g * _BLOCK, min(blocks, (g + 1) * _BLOCK)):
                if tops[b] < least_need:
                    continue
                for i in range(b * _BLOCK, min(cards, (b + 1) * _BLOCK)):
                    if not mask[i] or blocked[i]:
                        continue
                    fits = each.takes(i, one if one >= 0 else needs[i], bound[i])
                    if fits and host_each[i] != asked:
                        asked = host_each[i]
                        chosen = self._host_cards_from(step, i)
                        if chosen is not None:
                            return asked, chosen
        return None

    def _host_cards_from(self, step: _Step, first: int) -> tuple[int, ...] | None:
        """On the host of row `first` (its first card that takes the seat), the seat's first
        `step.count` cards that take it, where it has that many and its k-th widest usable card
        is at least the seat's least width (`hosts_with`); else None."""
        fleet, each, rows = self.fleet, self.arrays.each, step.rows
        assert rows is not None
        at, count = fleet.host_each[first], step.count
        widths = self.host_widths(at)
        if (widths[count - 1] if count <= len(widths) else _NONE) < step.least_width:
            return None
        taking = [fleet.index_each[first]]
        blocked = each.placed_any if step.exclusive else each.placed_exclusive
        for j in range(first + 1, int(fleet.stop[at])):
            if len(taking) == count:
                break
            if not rows.mask_each[j] or blocked[j]:
                continue
            if each.takes(j, rows.need_at(j), rows.bound_each[j]):
                taking.append(fleet.index_each[j])
        return tuple(sorted(taking)) if len(taking) == count else None


def first_fit(problem: Problem, order: Sequence[NewSeat] | None = None) -> Assignment:
    """First-fit-decreasing: hosts in their order, the first cards that take the seat.

    `order`: the seats to try, in this order (default: all, in `placing_order`).
    """
    cards = _FirstFit(problem)
    out: Assignment = {}
    for new in placing_order(problem) if order is None else order:
        step = cards.fleet.step(new)
        home = step.home
        if home is None and step.rows is not None:
            best = cards.first_cards(step)
            if best is None:
                continue
            at, chosen = best
        else:
            fit = cards.fitting(new)
            hosts = cards.hosts_with(new, fit)
            if home is not None:
                # A seat that names its host has no eligible card anywhere else: that host alone.
                found_at = home if home >= 0 and hosts[home] else None
            else:
                found_at = int(np.argmax(hosts)) if hosts.any() else None
            if found_at is None:
                continue
            at = found_at
            found = cards.host_cards(at, fit)[: new.seat.card_count]
            chosen = tuple(sorted(int(cards.fleet.index_of[i]) for i in found))
        cards.place(new, at, chosen)
        out[new.name] = (cards.host_names[at], chosen)
    return out


class _Narrow:
    """Every card as (width, tie-break rank, row), narrowest first, kept in order as seats are
    placed, in blocks of about `_BLOCK`: a one-card seat meets the narrowest cards wide enough
    first, and passes over a whole block whose cards cannot take it.

    `tops[b]` is at least the largest headroom h = min(room, floor − load) of block b's cards
    (`CardArrays.headroom`). A card takes a seat of need n only where n ≤ room and
    load + n ≤ floor, i.e. n ≤ h: a block whose `tops` is below the seat's least need holds
    no card that takes it, and skipping it changes no answer.
    """

    __slots__ = ("blocks", "firsts", "rows", "tops")

    def __init__(self, entries: list[tuple[int, int, int]], headroom: list[int]) -> None:
        self.blocks = [entries[k : k + _BLOCK] for k in range(0, len(entries), _BLOCK)]
        self.firsts = [block[0] for block in self.blocks]
        # Each block's rows (the entries' last figure), for its top.
        self.rows = [[i for _, _, i in block] for block in self.blocks]
        self.tops = [max(map(headroom.__getitem__, rows)) for rows in self.rows]

    def copy(self) -> _Narrow:
        twin = object.__new__(_Narrow)
        twin.blocks = [list(block) for block in self.blocks]
        twin.firsts = list(self.firsts)
        twin.rows = [list(rows) for rows in self.rows]
        twin.tops = list(self.tops)
        return twin

    def start(self, key: tuple[int, ...]) -> tuple[int, int]:
        """(block, position in it) of the first entry at or after `key`."""
        b = max(0, bisect_right(self.firsts, key) - 1)
        return b, bisect_left(self.blocks[b], key) if self.blocks else 0

    def move(
        self, old: tuple[int, int, int], new: tuple[int, int, int], was: int, headroom: list[int]
    ) -> None:
        """Entry `old` (its card's headroom was `was`) replaced by `new`, `headroom` read again."""
        blocks, firsts, tops, rows = self.blocks, self.firsts, self.tops, self.rows
        b = bisect_right(firsts, old) - 1
        block = blocks[b]
        k = bisect_left(block, old)
        del block[k], rows[b][k]
        if not block:
            del blocks[b], firsts[b], tops[b], rows[b]
        else:
            firsts[b] = block[0]
            if was >= tops[b]:  # it may have been the block's largest
                tops[b] = max(map(headroom.__getitem__, rows[b]))
        i = new[2]
        if not blocks:
            blocks.append([new])
            firsts.append(new)
            rows.append([i])
            tops.append(headroom[i])
            return
        b = max(0, bisect_right(firsts, new) - 1)
        block = blocks[b]
        k = bisect_left(block, new)
        block.insert(k, new)
        rows[b].insert(k, i)
        firsts[b] = block[0]
        if headroom[i] > tops[b]:
            tops[b] = headroom[i]
        if len(block) > 2 * _BLOCK:
            half = len(block) // 2
            parts = [rows[b][:half], rows[b][half:]]
            blocks[b : b + 1] = [block[:half], block[half:]]
            firsts[b : b + 1] = [block[0], block[half]]
            rows[b : b + 1] = parts
            tops[b : b + 1] = [max(map(headroom.__getitem__, part)) for part in parts]


class _BestFit(_Cards):
    """Best fit's choices over the rows: the narrowest card, or host, that takes the seat.

    `narrow`: every card by width, narrowest first (`_Narrow`).
    """

    def __init__(self, problem: Problem, fleet: _Fleet | None = None) -> None:
        super().__init__(problem, fleet)
        self.rank = rank = self.fleet.rank.tolist()
        self.narrow = _Narrow(
            sorted((width, rank[i], i) for i, width in enumerate(self.arrays.width.tolist())),
            self.arrays.each.headroom,
        )
        # Per k ≥ 2, each host's k-th widest usable width and the hosts as (that width, host),
        # narrowest first; `moved`: hosts placed on since they were last read (`_wide`).
        self.kth_each = [row.tolist() for row in self.kth[1:]]
        self.wide = [sorted((w, at) for at, w in enumerate(row)) for row in self.kth_each]
        self.moved: set[int] = set()

    def copy(self) -> Self:
        twin = super().copy()
        twin.narrow, twin.rank = self.narrow.copy(), self.rank
        twin.kth_each = [list(row) for row in self.kth_each]
        twin.wide = [list(row) for row in self.wide]
        twin.moved = set(self.moved)
        return twin

    def _wide(self, depth: int) -> list[tuple[int, int]]:
        """The hosts by their `depth`-th widest usable width, narrowest first (then host
        order), the hosts placed on read again."""
        for at in self.moved:
            widths = self.host_widths(at)
            for k, (row, wide) in enumerate(zip(self.kth_each, self.wide, strict=True), start=1):
                now = widths[k] if k < len(widths) else _NONE
                if now != row[at]:
                    del wide[bisect_left(wide, (row[at], at))]
                    insort(wide, (now, at))
                    row[at] = now
        self.moved.clear()
        return self.wide[depth - 2]

    def many_rows(self, step: _Step) -> tuple[int, tuple[int, ...]] | Literal[False] | None:
        """`many_cards(new, fitting(new))` for a multi-card seat the rows answer (`step.rows`):
        the hosts by their k-th widest width from the seat's least width, each host's cards
        asked one by one (`CardArrays.fits` of each), the first with k that take it; False past
        `_WALK` cards asked (ask every card at once)."""
        rows = step.rows
        assert rows is not None
        fleet, each, count = self.fleet, self.arrays.each, step.count
        wide = self._wide(count)
        mask, bound, need = rows.mask_each, rows.bound_each, rows.need_each
        room = each.room
        blocked = each.placed_any if step.exclusive else each.placed_exclusive
        one, needs = (need, []) if isinstance(need, int) else (-1, need)
        index_each = fleet.index_each
        asked = 0
        for width, at in wide[bisect_left(wide, (step.least_width,)) :]:
            if width >= UNBOUNDED or asked >= _WALK:
                return False
            taking: list[tuple[int, int]] = []
            for i in range(int(fleet.start[at]), int(fleet.stop[at])):
                asked += 1
                if not mask[i] or blocked[i]:
                    continue
                needed = one if one >= 0 else needs[i]
                if each.takes(i, needed, bound[i]):
                    taking.append((room[i] - needed, index_each[i]))
            if len(taking) >= count:
                return at, tuple(sorted(index for _, index in sorted(taking)[:count]))
        return None

    def place(self, new: NewSeat, at: int, cards: tuple[int, ...]) -> None:
        """`_Cards.place`, each card moved to its new width's place in `narrow`."""
        fleet, narrow, each, rank = self.fleet, self.narrow, self.arrays.each, self.rank
        host = fleet.host_names[at]
        rows = [fleet.flat[(host, index)] for index in cards]
        width, headroom = each.width, each.headroom
        before = [((width[i], rank[i], i), headroom[i]) for i in rows]
        super().place(new, at, cards)
        self.moved.add(at)
        for (old, had), i in zip(before, rows, strict=True):
            narrow.move(old, (width[i], old[1], i), had, headroom)

    def place_row(self, step: _Step, i: int) -> None:
        """`_Cards.place_row`, the card moved to its new width's place in `narrow`."""
        each = self.arrays.each
        old, had = (each.width[i], self.rank[i], i), each.headroom[i]
        super().place_row(step, i)
        self.moved.add(self.fleet.host_each[i])
        self.narrow.move(old, (each.width[i], old[1], i), had, each.headroom)

    def narrowest(self, step: _Step) -> int | None:
        """The row of `one_card(new, fitting(new))` for a one-card seat the rows answer
        (`step.rows`): the narrowest cards wide enough asked one by one (`CardArrays.fits` of
        each), blocks that take none passed over, then, past `_WALK` cards asked, every card at
        once; None where no card takes it."""
        rows = step.rows
        assert rows is not None
        narrow = self.narrow
        blocks, tops = narrow.blocks, narrow.tops
        first, start = narrow.start((step.least_width,))
        each = self.arrays.each
        mask, bound, need, least = rows.mask_each, rows.bound_each, rows.need_each, rows.need_least
        blocked = each.placed_any if step.exclusive else each.placed_exclusive
        # One need on every card (one size class), or a need per card.
        one, needs = (need, []) if isinstance(need, int) else (-1, need)
        asked = 0
        for b in range(first, len(blocks)):
            if tops[b] < least:
                start = 0
                continue
            block = blocks[b]
            for k in range(start, len(block)):
                width, _, i = block[k]
                if width >= UNBOUNDED:
                    return None
                if asked == _WALK:
                    found = self.one_card(step.new, self.fitting(step.new))
                    return (
                        None
                        if found is None
                        else self.fleet.flat[(self.fleet.host_names[found[0]], found[1][0])]
                    )
                asked += 1
                if not mask[i] or blocked[i]:
                    continue
                if each.takes(i, one if one >= 0 else needs[i], bound[i]):
                    return i
            start = 0
        return None

    def one_card(self, new: NewSeat, fit: Bools) -> tuple[int, tuple[int, ...]] | None:
        """The narrowest card wide enough that takes the seat (then host order, card index)."""
        width = self.arrays.width
        width = np.where(fit & (width >= self.problem.least_width(new.name)), width, UNBOUNDED)
        i = int(np.argmin(width))
        if width[i] == UNBOUNDED:
            return None
        if not self.fleet.ranked:
            ties = np.flatnonzero(width == width[i])
            i = int(ties[np.argmin(self.fleet.rank[ties])])
        return int(self.fleet.host_of[i]), (int(self.fleet.index_of[i]),)

    def many_cards(self, new: NewSeat, fit: Bools) -> tuple[int, tuple[int, ...]] | None:
        """The host whose k-th widest card is narrowest among those that take the seat."""
        hosts = self.hosts_with(new, fit)
        if not hosts.any():
            return None
        at = int(np.argmin(np.where(hosts, self._kth()[new.seat.card_count - 1], UNBOUNDED)))
        return at, self._tightest(new, fit, at)

    def at_home(self, new: NewSeat, fit: Bools, home: int) -> tuple[int, tuple[int, ...]] | None:
        """A seat naming its host: that host alone, where the fewest bytes of room are left."""
        if home < 0 or not self.hosts_with(new, fit)[home]:
            return None
        return home, self._tightest(new, fit, home)

    def _tightest(self, new: NewSeat, fit: Bools, at: int) -> tuple[int, ...]:
        """The seat's cards on host `at`: the fewest bytes left after it, then card index."""
        left = self.left_after(new)
        where = self.host_cards(at, fit)
        index = self.fleet.index_of[where]
        chosen = sorted(zip(left[where].tolist(), index.tolist(), strict=True))
        return tuple(sorted(i for _, i in chosen[: new.seat.card_count]))


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

        `all_or_none`: stop at the first seat that finds no card (1 is returned; the packing is
        then part-way and only good to drop)."""
        cards, missed, placed = self.cards, 0, self.placed
        fleet = cards.fleet
        hosts = fleet.host_names
        for new in seats:
            step = fleet.step(new)
            if step.count == 1 and step.home is None and step.rows is not None:
                i = cards.narrowest(step)
                if i is None:
                    missed += 1
                    if all_or_none:
                        return missed
                    continue
                cards.place_row(step, i)
                placed[step.name] = (hosts[fleet.host_each[i]], (fleet.index_each[i],))
                continue
            if step.home is not None:
                best = cards.at_home(new, cards.fitting(new), step.home)
            elif step.count == 1:
                best = cards.one_card(new, cards.fitting(new))
            else:
                walked = False if step.rows is None else cards.many_rows(step)
                best = cards.many_cards(new, cards.fitting(new)) if walked is False else walked
            if best is None:
                missed += 1
                if all_or_none:
                    return missed
                continue
            at, chosen = best
            cards.place(new, at, chosen)
            placed[step.name] = (hosts[at], chosen)
        return missed


@dataclass(frozen=True)
class BestFitLevel:
    """One priority level of a best-fit-decreasing pass: the placement when it began, the
    packing when it ended, and its seats that found no card."""

    start: tuple[tuple[str, tuple[str, tuple[int, ...]]], ...]
    end: BestFitPacking
    seats: frozenset[str]
    missed: frozenset[str]


@dataclass(frozen=True)
class BestFitRun:
    """`best_fit` of the whole problem, kept level by level (`best_fit_levels`)."""

    placed: Assignment
    levels: dict[int, BestFitLevel]


def best_fit_levels(problem: Problem) -> BestFitRun:
    """`best_fit(problem)`, with each priority level's start and end kept: a search that packs
    the same seats of a level in the same order from the same start (`placement.plan.most`)
    reads the pass off it instead of packing again."""
    packing = BestFitPacking(problem)
    levels: dict[int, BestFitLevel] = {}
    order = placing_order(problem)
    for priority in dict.fromkeys(new.seat.priority for new in order):
        level = [new for new in order if new.seat.priority == priority]
        start = tuple(packing.placed.items())
        before = len(packing.placed)
        packing.add(level)
        placed = set(list(packing.placed)[before:])
        levels[priority] = BestFitLevel(
            start,
            packing.copy(),
            frozenset(new.name for new in level),
            frozenset(new.name for new in level if new.name not in placed),
        )
    return BestFitRun(dict(packing.placed), levels)


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
