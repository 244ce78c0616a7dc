"""Per-card accounting shared by the ledger view, the verifier, `check` and the report.

The formulas are DESIGN.md's "What fits means", in exact integer bytes:

    cuda_total(c)  = total_bytes − reserved_bytes          (NVML v1 only: total_bytes)
    engine_free(c) = free_bytes − cuda_context(host)
    reserve_bytes(r) = cuda_total(c) if r.amount_bytes == "card" else r.amount_bytes
    held(c, s) = Σ_{r on c, s ∉ for(r)} max(0, reserve_bytes(r) − Σ resident of r's own seats on c)
               + Σ resident of running seats declared on c (other than s) whose `match` finds no process on c
    plannable(c) = max(0, free − held(c, ·) − margin)
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from inventory.snapshot import Card, Snapshot
from placement.fit.room import reserve_left_bytes, room_bytes
from seats.model import Catalogue, Reserve, Seat


def cuda_total(card: Card) -> int:
    """What a CUDA process on `card` calls total (FACTS.md section 1); 0 for a card in error."""
    return card.cuda_total_bytes or 0


def fixed_reserve_bytes(reserve: Reserve) -> int | None:
    """A reserve's amount in bytes; None for `bytes: card`, whose bytes depend on the card read."""
    return None if reserve.amount_bytes == "card" else int(reserve.amount_bytes)


def reserve_bytes(reserve: Reserve, card: Card) -> int:
    """Bytes a reserve holds on its card; `card` means the whole CUDA total."""
    fixed = fixed_reserve_bytes(reserve)
    return cuda_total(card) if fixed is None else fixed


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


@dataclass(frozen=True)
class HeldPart:
    """One contribution to `held`: a reserve's unconsumed bytes, an absent seat's resident, or a hold."""

    kind: str  # "reserve", "absent" or "hold"
    name: str
    bytes: int
    note: str = ""  # a hold's approval: who, when, until when
    # A reserve some of whose own seats run or are placed on the card: what is left of it is
    # theirs (counted in held), but it does not stand between another seat and the card, its
    # seats do; and a seat is never told its own reserve blocks it.
    in_use: bool = False


def held_parts(
    catalogue: Catalogue,
    host: str,
    card: Card,
    seat: str | None = None,
    placed_here: Collection[str] = (),
) -> list[HeldPart]:
    """What is held on `card` against `seat` (None: against any seat), part by part.

    `placed_here` names new seats this plan puts on the card; a reserve's own seats among
    them consume it, so it is not counted twice.
    """
    parts: list[HeldPart] = []
    declared = {s.name: s for s in seats_declared_on(catalogue, host, card.index)}
    for reserve in catalogue.reserves:
        if reserve.host != host or reserve.gpu != card.index:
            continue
        if seat is not None and seat in reserve.for_:
            continue
        here = [
            name
            for name in reserve.for_
            if name != seat and (name in declared or name in placed_here)
        ]
        own = sum(catalogue.seat(name).resident_bytes for name in here)
        left = reserve_left_bytes(reserve_bytes=reserve_bytes(reserve, card), own_bytes=own)
        if left:
            parts.append(HeldPart("reserve", reserve.name, left, in_use=bool(here)))
    for absent in absent_seats(catalogue, host, card):
        if absent.name != seat:
            parts.append(HeldPart("absent", absent.name, absent.resident_bytes))
    # An approved deploy's hold, except the seat's own and those of seats placed here now
    # (judged beside it as new seats, so not counted twice).
    for hold in card.holds:
        if hold.seat != seat and hold.seat not in placed_here:
            parts.append(HeldPart("hold", hold.seat, hold.need_bytes, hold.note()))
    return parts


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
    room = room_bytes(
        free_bytes=card.free_bytes,
        held_bytes=held_bytes(catalogue, snapshot.host, card),
        margin_bytes=margin_bytes(catalogue, snapshot.host),
    )
    return max(0, room)


def attributed_bytes(card: Card) -> int:
    """Σ bytes of the processes on `card` matched to a seat (run `attribute` first); 0 in error."""
    return sum(p.used_bytes or 0 for p in card.processes if p.seat is not None)


def unexplained_bytes(card: Card) -> int | None:
    """used − attributed: memory no seat explains (NVML v1: the driver reserve included); None in error."""
    if card.used_bytes is None:
        return None
    return card.used_bytes - attributed_bytes(card)
