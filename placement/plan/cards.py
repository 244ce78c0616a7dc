"""Each card before and after a placement: the rows of `plan`'s table and its JSON `cards` list."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from inventory.snapshot import Snapshot
from placement.fit.capacity import seats_declared_on
from placement.fit.card import CardKey, CardModel, FleetCards, resident_of
from placement.fit.verify import Placement, other_need
from placement.fit.verify import card_views as lazy_card_views
from placement.plan.problem import few_collections
from seats.model import Catalogue


@dataclass(frozen=True)
class PlanCardRow:
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


def card_rows(
    catalogue: Catalogue,
    snapshots: Sequence[Snapshot],
    placements: Sequence[Placement],
    *,
    card_views: Mapping[tuple[str, int], Catalogue] | None = None,
    models: Mapping[CardKey, CardModel] | None = None,
) -> list[PlanCardRow]:
    """Each card before and after the placements (`card_views`: card_catalogues, when at hand;
    `models`: the cards' models before them, where the caller has them or simulates on them)."""
    with few_collections():
        return _rows(catalogue, snapshots, placements, card_views, models)


def _rows(
    catalogue: Catalogue,
    snapshots: Sequence[Snapshot],
    placements: Sequence[Placement],
    card_views: Mapping[tuple[str, int], Catalogue] | None,
    models: Mapping[CardKey, CardModel] | None,
) -> list[PlanCardRow]:
    rows: list[PlanCardRow] = []
    # Views are cut only for the cards that need one: those in error and those a seat goes to.
    views = card_views if card_views is not None else lazy_card_views(catalogue)
    fleet: FleetCards | None = None
    # Placements by card, in placement order: one pass instead of one per card.
    by_card: dict[tuple[str, int], list[Placement]] = defaultdict(list)
    for placement in placements:
        for index in dict.fromkeys(placement.cards):
            by_card[(placement.host, index)].append(placement)
    for snapshot in snapshots:
        host = snapshot.host
        for card in snapshot.cards:
            key = (host, card.index)
            here = by_card.get(key, []) if by_card else []
            if card.error is not None or card.free_bytes is None:
                view = views.get(key, catalogue)
                declared = [s.name for s in seats_declared_on(view, host, card.index)]
                rows.append(
                    PlanCardRow(
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
            before = models.get(key) if models else None
            if before is None:
                fleet = fleet or FleetCards(catalogue)
                before = fleet.model(host, card)
            after = before
            if here:
                view = views.get(key, catalogue)
                for p in here:
                    need = other_need(view, snapshot, p, card, "plan", before.free_bytes)
                    resident = resident_of(view, p.seat.name) or 0
                    after = after.with_seat(p.seat.name, need, resident_bytes=resident)
            if before.reserves or before.absent or before.holds:
                held = before.held_parts()
                held_bytes, held_names = sum(p.bytes for p in held), tuple(p.name for p in held)
            else:
                held_bytes, held_names = 0, ()  # nothing held (most cards): no part to list
            # Nothing held and nothing placed: the plannable room is the open room.
            plannable_before = max(
                0, before.plannable_bytes if held_names or before.placed else before.open_bytes
            )
            processes = before.processes
            total = card.total_bytes
            # Built without the frozen dataclass's __init__ (a field at a time): every field.
            row = object.__new__(PlanCardRow)
            object.__setattr__(
                row,
                "__dict__",
                {
                    "host": host,
                    "index": card.index,
                    "error": None,
                    "total_bytes": total,
                    "used_bytes": card.used_bytes,
                    "free_before_bytes": before.free_bytes,
                    "free_after_bytes": before.free_bytes - after.placed_bytes,
                    "held_bytes": held_bytes,
                    "held": held_names,
                    "plannable_before_bytes": plannable_before,
                    "plannable_after_bytes": max(0, after.plannable_bytes)
                    if here
                    else plannable_before,
                    "seats": tuple(
                        sorted(before.declared)
                        + [f"pid {pid}" for seat, pid in processes if seat is None]
                    )
                    if processes or before.declared
                    else (),
                    "new_seats": tuple(p.seat.name for p in here) if here else (),
                    # Card.cuda_total_bytes, read off the fields already at hand.
                    "cuda_total_bytes": None
                    if total is None
                    else total - (card.reserved_bytes or 0),
                },
            )
            rows.append(row)
    return rows
