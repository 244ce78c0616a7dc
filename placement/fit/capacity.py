"""Per-card accounting shared by the ledger view, the verifier, `check` and the report.

The formulas are DESIGN.md's "What fits means", in exact integer bytes:

    cuda_total(c)  = total_bytes − reserved_bytes          (NVML v1 only: total_bytes)
    engine_free(c) = free_bytes − cuda_context(host)
    reserve_bytes(r) = cuda_total(c) if r.amount_bytes == "card" else r.amount_bytes
    held(c, s) = Σ_{r on c, s ∉ for(r)} max(0, reserve_bytes(r) − Σ resident of r's own seats on c)
               + Σ resident of running seats declared on c (other than s) whose `match` finds no process on c
               + Σ need of active holds on c (other than s's own)
    plannable(c) = max(0, free − held(c, ·) − margin)

Held bytes and plannable are read off the card's one model (`placement.fit.card`).
"""

from __future__ import annotations

from collections.abc import Collection

from inventory.snapshot import Card, Snapshot
from placement.fit.card import HeldPart, card_model, resident_of
from placement.fit.room import room_bytes
from seats.model import Catalogue, Seat


def seats_declared_on(catalogue: Catalogue, host: str, index: int) -> list[Seat]:
    """Running seats the catalogue pins to card `index` of `host`."""
    return list(catalogue.pinned_on(host, index))


def present_seats(card: Card) -> set[str]:
    """Names of seats with an attributed process on `card` (run `attribute` first)."""
    return {process.seat for process in card.processes if process.seat is not None}


def absent_seats(catalogue: Catalogue, host: str, card: Card) -> list[Seat]:
    """Running seats declared on `card` that have a `match` and no process there (down, keeps its place)."""
    present = present_seats(card)
    return [
        seat
        for seat in seats_declared_on(catalogue, host, card.index)
        if seat.match is not None and seat.name not in present
    ]


def held_parts(
    catalogue: Catalogue,
    host: str,
    card: Card,
    seat: str | None = None,
    placed_here: Collection[str] = (),
) -> list[HeldPart]:
    """What is held on `card` against `seat` (None: against any seat), part by part.

    `placed_here` names new seats this plan puts on the card; a reserve's own seats among
    them consume it, so it is not counted twice. Read off the card's one model.
    """
    placed = {name: resident_of(catalogue, name) or 0 for name in placed_here}
    return card_model(catalogue, host, card).held_parts(seat, placed)


def held_bytes(
    catalogue: Catalogue,
    host: str,
    card: Card,
    seat: str | None = None,
    placed_here: Collection[str] = (),
) -> int:
    """Σ of `held_parts`: bytes on `card` that `seat` may not plan into."""
    return sum(part.bytes for part in held_parts(catalogue, host, card, seat, placed_here))


def margin_bytes(catalogue: Catalogue, host: str) -> int:
    """The host's margin, 0 for a host the catalogue does not describe."""
    described = catalogue.hosts.get(host)
    return described.margin_bytes if described is not None else 0


def cuda_context_bytes(catalogue: Catalogue, host: str) -> int:
    """The host's cuda_context, 0 when not given (output should say so for vLLM seats)."""
    described = catalogue.hosts.get(host)
    return described.cuda_context_bytes if described is not None else 0


def plannable_bytes(catalogue: Catalogue, snapshot: Snapshot, card: Card) -> int:
    """max(0, free − held − margin); 0 for a card in error."""
    if card.free_bytes is None:
        return 0
    return max(0, card_model(catalogue, snapshot.host, card).plannable_bytes)


def plannable_at(free_bytes: int, held_bytes: int, margin_bytes: int) -> int:
    """max(0, free − held − margin): a card's plannable bytes at a moment it had `free_bytes`."""
    return max(
        0, room_bytes(free_bytes=free_bytes, held_bytes=held_bytes, margin_bytes=margin_bytes)
    )


def attributed_bytes(card: Card) -> int:
    """Σ bytes of the processes on `card` matched to a seat (run `attribute` first); 0 in error."""
    return sum(p.used_bytes or 0 for p in card.processes if p.seat is not None)


def unexplained_bytes(card: Card) -> int | None:
    """used − attributed: memory no seat explains (NVML v1: the driver reserve included); None in error."""
    if card.used_bytes is None:
        return None
    return card.used_bytes - attributed_bytes(card)
