"""Process attribution: which seat a process on a card belongs to, by the catalogue's `match` regexes.

A process whose cmdline matches no seat of its host is "foreign"; its bytes count as
unexplained. A process whose cmdline is None (the PID vanished before /proc was read)
cannot be matched and is foreign too, unless the poller already named its seat.
"""

from __future__ import annotations

from collections.abc import Iterable

from inventory.snapshot import Card, Process, Snapshot
from seats.model import Catalogue, Seat, match_pattern


def host_seats(catalogue: Catalogue, host: str) -> list[Seat]:
    """Seats of `catalogue` that may run on `host`: those naming it and those naming no host."""
    return [
        seat for seat in catalogue.seats if seat.host in (host, None) and seat.state != "retired"
    ]


def match_seat(cmdline: str | None, seats: Iterable[Seat]) -> str | None:
    """Name of the first seat whose `match` regex finds `cmdline` (re.search), else None."""
    if cmdline is None:
        return None
    for seat in seats:
        if seat.match is not None and match_pattern(seat.match).search(cmdline):
            return seat.name
    return None


def attribute(snapshot: Snapshot, catalogue: Catalogue) -> Snapshot:
    """The snapshot with every process's `seat` filled where a regex matches.

    A seat recorded at capture is kept as it is; only null seats are attributed.
    """
    seats = host_seats(catalogue, snapshot.host)
    cards: list[Card] = []
    for card in snapshot.cards:
        processes: list[Process] = []
        for process in card.processes:
            if process.seat is None:
                name = match_seat(process.cmdline, seats)
                if name is not None:
                    process = process.model_copy(update={"seat": name})
            processes.append(process)
        cards.append(card.model_copy(update={"processes": tuple(processes)}))
    return snapshot.model_copy(update={"cards": tuple(cards)})
