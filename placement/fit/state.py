"""One card as one seat meets it: free, held (reserves, absent seats, holds), margin, room and gate free.

`card_state` reads the card's one model (`placement.fit.card`) and is the only place the
verifier's per-card figures are computed; the rules of `placement.fit.rules` read nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

from inventory.snapshot import Card
from placement.fit.card import CardModel, HeldPart
from seats.model import Seat

# One hold as a refusal names it: (its note, bytes it holds, its need, what its seat holds here
# now: 0 unless it is a redeploy). The words: placement/cli/reasons_text.py `hold_note`.
HoldFacts = tuple[str, int, int, int]


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
    hold_notes: tuple[HoldFacts, ...]
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


def hold_facts(part: HeldPart) -> HoldFacts:
    """What a refusal or the ledger says of one hold (a redeploy's says what it replaces)."""
    return (part.note, part.bytes, part.need_bytes, part.seen_bytes)


def card_state(seat: Seat, card: Card, model: CardModel) -> CardState:
    """`card` as `seat` meets it, started last beside the new seats placed on `model` (the card's
    one model, `placement.fit.card`, with those seats placed by `CardModel.with_seat`).

    A view: every figure is the model's, for `seat`, with its own processes freed first (a
    redeploy): free + mine, room(seat) + mine, gate_free(seat) + mine, each hold's gate + mine.
    """
    name = seat.name
    mine = model.seen_bytes.get(name, 0)
    parts = model.held_parts(name)
    reserves = [part for part in parts if part.kind == "reserve"]
    # Reserves whose own seats are on the card count in held, but only idle ones block.
    idle = [part for part in reserves if not part.in_use]
    shares = {reserve.name: reserve for reserve in model.reserves}
    holds = [part for part in parts if part.kind == "hold"]
    declared = [n for n in model.declared if n != name]
    foreign = [
        f"pid {pid}" if s is None else s
        for s, pid in model.processes
        if s != name and s not in declared
    ]
    return CardState(
        card=card,
        cuda_total_bytes=model.cuda_total,
        free_bytes=model.free_bytes + mine,
        held_bytes=sum(part.bytes for part in parts),
        reserve_held_bytes=sum(part.bytes for part in idle),
        reserve_names=tuple(part.name for part in idle),
        reserve_for=tuple(n for part in idle for n in shares[part.name].for_),
        hold_held_bytes=sum(part.bytes for part in holds),
        hold_notes=tuple(hold_facts(part) for part in holds if part.bytes),
        others_bytes=model.placed_bytes,
        margin_bytes=model.margin_bytes,
        cuda_context_bytes=model.cuda_context_bytes,
        room_bytes=model.room_for(name) + mine,
        gate_free_bytes=model.gate_free_bytes(name) + mine,
        occupants=(*declared, *foreign, *model.placed),
        exclusive_neighbours=(
            *(n for n in model.declared_exclusive if n != name),
            *(n for n in model.placed if n in model.placed_exclusive),
        ),
        kept_reserves=tuple(
            (part.name, part.bytes, tuple(sorted(shares[part.name].for_)))
            for part in reserves
            if part.in_use
        ),
        freeable_bytes=model.freeable_bytes(name),
        hold_gates=tuple(
            HoldGate(hold.seat, hold.note(), hold.requested_bytes, free + mine)
            for hold, free in model.hold_gates(name)
        ),
    )
