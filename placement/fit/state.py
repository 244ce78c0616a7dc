"""One card as one seat meets it: free, held (reserves and absent seats), margin, room and gate free.

`card_state` is the only place the verifier's per-card figures are computed; the rules of
`placement.fit.rules` read nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from inventory.snapshot import Card
from placement.fit.capacity import (
    cuda_context_bytes,
    cuda_total,
    held_parts,
    margin_bytes,
    seats_declared_on,
)
from placement.fit.room import engine_free_bytes, room_bytes
from seats.model import Catalogue, Seat
from seats.units import format_bytes as b


@dataclass(frozen=True)
class CardState:
    """What `seat` meets on `card`, beside the new seats placed there first (exact bytes)."""

    card: Card
    cuda_total_bytes: int
    free_bytes: int  # the seat's own processes freed first (a redeploy)
    held_bytes: int  # reserves the seat is not for, absent seats and holds
    reserve_held_bytes: int  # reserves none of whose own seats is on the card (they block)
    reserve_names: tuple[str, ...]
    reserve_for: tuple[str, ...]
    hold_held_bytes: int  # active holds of other approved deploys (a ledger's)
    hold_notes: tuple[str, ...]
    others_bytes: int  # what the other new seats on the card take
    margin_bytes: int
    cuda_context_bytes: int
    room_bytes: int
    gate_free_bytes: int  # engine_free: what vLLM's gate reads
    occupants: tuple[str, ...]  # every other seat or process on the card, new ones included
    exclusive_neighbours: tuple[str, ...]


def own_bytes(card: Card, name: str) -> int:
    """Bytes the processes of seat `name` hold on `card` now (freed first by a redeploy)."""
    return sum(p.used_bytes or 0 for p in card.processes if p.seat == name)


def card_state(
    catalogue: Catalogue,
    host: str,
    seat: Seat,
    card: Card,
    others_here: Sequence[Seat],
    others_bytes: int,
) -> CardState:
    """`card` of `host` as `seat` meets it, started last beside `others_here` (taking `others_bytes`)."""
    free = (card.free_bytes or 0) + own_bytes(card, seat.name)
    parts = held_parts(
        catalogue, host, card, seat.name, [s.name for s in others_here] + [seat.name]
    )
    # Reserves whose own seats are on the card count in held, but only idle ones block.
    reserves = [part for part in parts if part.kind == "reserve" and not part.in_use]
    reserve_names = {part.name for part in reserves}
    reserve_for = tuple(
        name
        for reserve in catalogue.reserves
        if reserve.name in reserve_names
        for name in reserve.for_
    )
    held = sum(part.bytes for part in parts)
    margin = margin_bytes(catalogue, host)
    ctx = cuda_context_bytes(catalogue, host)
    declared = [s for s in seats_declared_on(catalogue, host, card.index) if s.name != seat.name]
    declared_names = {s.name for s in declared}
    foreign = [p for p in card.processes if p.seat != seat.name and p.seat not in declared_names]
    return CardState(
        card=card,
        cuda_total_bytes=cuda_total(card),
        free_bytes=free,
        held_bytes=held,
        reserve_held_bytes=sum(part.bytes for part in reserves),
        reserve_names=tuple(part.name for part in reserves),
        reserve_for=reserve_for,
        hold_held_bytes=sum(part.bytes for part in parts if part.kind == "hold"),
        hold_notes=tuple(f"{b(part.bytes)} {part.note}" for part in parts if part.kind == "hold"),
        others_bytes=others_bytes,
        margin_bytes=margin,
        cuda_context_bytes=ctx,
        room_bytes=room_bytes(
            free_bytes=free, held_bytes=held, margin_bytes=margin, load_bytes=others_bytes
        ),
        gate_free_bytes=engine_free_bytes(
            free_bytes=free, cuda_context_bytes=ctx, load_bytes=others_bytes
        ),
        occupants=tuple(
            [s.name for s in declared]
            + [f"pid {p.pid}" if p.seat is None else p.seat for p in foreign]
            + [s.name for s in others_here]
        ),
        exclusive_neighbours=tuple(
            [s.name for s in declared if s.exclusive] + [s.name for s in others_here if s.exclusive]
        ),
    )
