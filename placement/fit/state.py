"""One card as one seat meets it: free, held (reserves, absent seats, holds), margin, room and gate free.

`card_state` reads the card's one model (`placement.fit.card`) and is the only place the
verifier's per-card figures are computed; the rules of `placement.fit.rules` read nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from inventory.snapshot import Card
from placement.fit.card import CardModel, HeldPart, card_model
from placement.fit.room import engine_free_bytes, room_bytes
from seats.model import Catalogue, Seat
from seats.units import format_bytes as b


@dataclass(frozen=True)
class HoldGate:
    """An approved seat's own gate on the card, before the judged seat is placed.

    `free_bytes` is what the held seat's gate reads with every other new seat and hold placed
    (free − cuda_context − the others): the judged seat leaves it short by
    need − (free_bytes − requested_bytes) when that is positive.
    """

    seat: str
    note: str
    requested_bytes: int
    free_bytes: int


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
    gate_free_bytes: int  # engine_free less holds: what vLLM's gate reads
    occupants: tuple[str, ...]  # every other seat or process on the card, new ones included
    exclusive_neighbours: tuple[str, ...]
    hold_gates: tuple[HoldGate, ...] = ()  # approved seats' own gates, judged again
    # Reserves whose own seats are on the card, and what is left of them: part of the held
    # bytes a refusal names beside room (name, bytes, for).
    kept_reserves: tuple[tuple[str, int, tuple[str, ...]], ...] = ()
    freeable_bytes: int = 0  # what the card's processes hold, the seat's own aside


def hold_note(part: HeldPart) -> str:
    """`4.00 GiB approved for tts at …`; a redeploy's hold says what it replaces."""
    if not part.seen_bytes:
        return f"{b(part.bytes)} {part.note}"
    return (
        f"{b(part.bytes)} {part.note} (a redeploy: {b(part.need_bytes)} in place of the "
        f"{b(part.seen_bytes)} it holds here now)"
    )


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
    model: CardModel | None = None,
) -> CardState:
    """`card` of `host` as `seat` meets it, started last beside `others_here` (taking `others_bytes`).

    `model`: the card's `card_model(catalogue, host, card)` when the caller has it.
    """
    if model is None:
        model = card_model(catalogue, host, card)
    mine = own_bytes(card, seat.name)
    free = model.free_bytes + mine
    placed = {s.name: s.resident_bytes for s in others_here}
    placed[seat.name] = seat.resident_bytes
    parts = model.held_parts(seat.name, placed)
    # Reserves whose own seats are on the card count in held, but only idle ones block.
    reserves = [part for part in parts if part.kind == "reserve" and not part.in_use]
    reserve_names = {part.name for part in reserves}
    reserve_for = tuple(
        name for reserve in model.reserves if reserve.name in reserve_names for name in reserve.for_
    )
    shares = {reserve.name: reserve for reserve in model.reserves}
    kept = tuple(
        (part.name, part.bytes, tuple(sorted(shares[part.name].for_)))
        for part in parts
        if part.kind == "reserve" and part.in_use
    )
    holds = [part for part in parts if part.kind == "hold"]
    hold_total = sum(part.bytes for part in holds)
    held = sum(part.bytes for part in parts)
    ctx = model.cuda_context_bytes
    declared = [name for name in model.declared if name != seat.name]
    foreign = [(s, pid) for s, pid in model.processes if s != seat.name and s not in declared]
    return CardState(
        card=card,
        cuda_total_bytes=model.cuda_total,
        free_bytes=free,
        held_bytes=held,
        reserve_held_bytes=sum(part.bytes for part in reserves),
        reserve_names=tuple(part.name for part in reserves),
        reserve_for=reserve_for,
        hold_held_bytes=hold_total,
        hold_notes=tuple(hold_note(part) for part in holds if part.bytes),
        others_bytes=others_bytes,
        margin_bytes=model.margin_bytes,
        cuda_context_bytes=ctx,
        room_bytes=room_bytes(
            free_bytes=free,
            held_bytes=held,
            margin_bytes=model.margin_bytes,
            load_bytes=others_bytes,
        ),
        # Holds are approved new seats: their needs count in every later gate.
        gate_free_bytes=engine_free_bytes(
            free_bytes=free, cuda_context_bytes=ctx, load_bytes=others_bytes + hold_total
        ),
        occupants=tuple(
            declared
            + [f"pid {pid}" if s is None else s for s, pid in foreign]
            + [s.name for s in others_here]
        ),
        exclusive_neighbours=tuple(
            [n for n in model.declared_exclusive if n != seat.name]
            + [s.name for s in others_here if s.exclusive]
        ),
        kept_reserves=kept,
        # A reserve's own seats free nothing for others: the reserve keeps what they leave.
        freeable_bytes=sum(
            p.used_bytes or 0
            for p in card.processes
            if p.seat != seat.name
            and not any(p.seat in r.for_ and seat.name not in r.for_ for r in model.reserves)
        ),
        hold_gates=tuple(
            HoldGate(
                seat=part.name,
                note=part.note,
                requested_bytes=part.requested_bytes,
                # A redeploy's gate reads its own old processes freed: they stop first.
                free_bytes=engine_free_bytes(
                    free_bytes=free + part.seen_bytes,
                    cuda_context_bytes=ctx,
                    load_bytes=others_bytes + hold_total - part.bytes,
                ),
            )
            for part in holds
            if part.requested_bytes
        ),
    )
