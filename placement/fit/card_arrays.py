"""A fleet's card models as numpy rows: what a seat meets on every card at once.

Read off `CardModel` (never a second rule): each row is one card's model, and a placed seat's
row is read again from the copy with it placed (`CardModel.with_seat`). For a seat that nothing
on a card names (no reserve or hold is for it, no process or absent place of its own there:
`named`), the card model reads its name nowhere, and

    pair_mask(need, request)  = what `CardModel.pair_bound` answers, card by card
    fits(need, bound)         = what `CardModel.exclusive_refuses` and `left_after` answer

in the same integers, so a placer asks every card in one pass instead of one call per card.
A seat in `named` is asked card by card (its own processes, reserves and holds change its room).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from placement.fit.card import CardModel

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]

# No bound: above every byte figure a card can have (int64 holds 2⁶² with room to add a need).
UNBOUNDED = 1 << 62


@dataclass(frozen=True)
class _Each:
    """`CardArrays`' figures that placing changes, card by card, as Python lists."""

    room: list[int]
    load: list[int]
    floor: list[int]
    placed_any: list[bool]
    placed_exclusive: list[bool]
    # min(room, floor − load): the most need the card takes now, whoever asks (a seat of need
    # n fits only where n ≤ room and load + n ≤ floor).
    headroom: list[int]
    width: list[int]

    def takes(self, i: int, need_bytes: int, bound_bytes: int) -> bool:
        """`CardArrays.fits` of row `i` alone, for a placer that walks the rows one by one:
        need ≤ room and load + need ≤ min(floor, bound), i.e. need ≤ headroom and load + need ≤
        bound. The pair mask and `exclusive_refuses` (`placed_any`/`placed_exclusive`) are read
        by the walk before it asks."""
        return need_bytes <= self.headroom[i] and self.load[i] + need_bytes <= bound_bytes


class CardArrays:
    """Rows over `models` (in their order): the figures no placed seat changes, and the ones a
    placed seat does (`read` refreshes one card from its model)."""

    def __init__(self, models: Sequence[CardModel], new_residents: Mapping[str, int]) -> None:
        count = len(models)
        self.ok: Bools = np.array([m.ok for m in models], dtype=bool)
        loose = [m.loosest(new_residents) if m.ok else None for m in models]
        # pair_bound's figures for a seat nothing here names: the least held it could meet.
        self.loose_room: Ints = np.array([r.room_bytes if r else 0 for r in loose], np.int64)
        self.loose_gate: Ints = np.array([r.gate_free_bytes if r else 0 for r in loose], np.int64)
        self.hold_cap: Ints = np.array(
            [
                UNBOUNDED if r is None or r.hold_cap_bytes is None else r.hold_cap_bytes
                for r in loose
            ],
            np.int64,
        )
        self.open: Ints = np.array([m.open_bytes for m in models], np.int64)
        self.exclusive_running: Bools = np.array([m.exclusive_running for m in models], bool)
        self.occupied: Bools = np.array([bool(m.occupants) for m in models], bool)
        named: set[str] = set()
        for model, room in zip(models, loose, strict=True):
            named.update(model.own_bytes, model.seen_bytes, model.occupants)
            named.update(name for name, _ in model.absent)
            named.update(hold.seat for hold in model.holds)
            if room is not None:
                named.update(room.named)
        # Seats some card reads by name: never answered by these rows.
        self.named = frozenset(named)
        self.room: Ints = np.zeros(count, np.int64)
        self.load: Ints = np.zeros(count, np.int64)
        self.floor: Ints = np.zeros(count, np.int64)
        self.width: Ints = np.zeros(count, np.int64)
        self.placed_any: Bools = np.zeros(count, bool)
        self.placed_exclusive: Bools = np.zeros(count, bool)
        # The same figures as Python lists, for a placer that asks a few cards one by one.
        self.each = _Each(
            [0] * count,
            [0] * count,
            [0] * count,
            [False] * count,
            [False] * count,
            [0] * count,
            [0] * count,
        )
        for i, model in enumerate(models):
            self.read(i, model)

    def copy(self) -> CardArrays:
        """Independent rows for the figures placing changes; the rest shared (never written)."""
        twin = object.__new__(CardArrays)
        twin.__dict__.update(self.__dict__)
        for name in ("room", "load", "floor", "width", "placed_any", "placed_exclusive"):
            setattr(twin, name, getattr(self, name).copy())
        each = self.each
        twin.each = _Each(
            list(each.room),
            list(each.load),
            list(each.floor),
            list(each.placed_any),
            list(each.placed_exclusive),
            list(each.headroom),
            list(each.width),
        )
        return twin

    def read(self, i: int, model: CardModel) -> None:
        """Row `i` from `model` (the card with the seats placed on it so far)."""
        each = self.each
        self.room[i] = each.room[i] = model.room_for(None) if model.ok else 0
        self.load[i] = each.load[i] = model.placed_bytes
        floor = model.gate_floor_bytes
        self.floor[i] = each.floor[i] = UNBOUNDED if floor is None else floor
        self.width[i] = each.width[i] = model.width_bytes
        self.placed_any[i] = each.placed_any[i] = bool(model.placed)
        self.placed_exclusive[i] = each.placed_exclusive[i] = bool(model.placed_exclusive)
        each.headroom[i] = min(each.room[i], each.floor[i] - each.load[i])

    def pair_mask(
        self,
        need_bytes: Ints,
        requested_bytes: Ints,
        requests: Bools,
        *,
        exclusive: bool,
    ) -> tuple[Bools, Ints]:
        """(cards the seat could go on alone, its gate bound there or UNBOUNDED): `pair_bound`
        for every card at once, the seat's need and request per card given (`requests`: where
        its gate requests bytes)."""
        mask = self.ok & ~self.exclusive_running
        if exclusive:
            mask &= ~self.occupied
        mask &= need_bytes <= self.loose_room
        mask &= need_bytes <= self.hold_cap
        mask &= ~requests | (self.loose_gate >= requested_bytes)
        own_gate = np.where(requests, self.loose_gate + need_bytes - requested_bytes, UNBOUNDED)
        bound = np.minimum(self.hold_cap, own_gate)
        return mask, np.where(bound < self.open, bound, UNBOUNDED)

    def fits(
        self, mask: Bools, need_bytes: Ints | np.int64, bound_bytes: Ints, *, exclusive: bool
    ) -> Bools:
        """The cards that take the seat now: where `exclusive_refuses` is false and `left_after`
        leaves room (`room − need`), on the cards of `mask` (its `pair_mask`)."""
        after = self.load + need_bytes
        fit = mask & (need_bytes <= self.room)
        fit &= after <= np.minimum(self.floor, bound_bytes)
        # exclusive_refuses: an exclusive seat beside any placed seat, any seat beside an
        # exclusive one.
        fit &= ~(self.placed_any if exclusive else self.placed_exclusive)
        return fit
