"""One pass over a host's moments into plain columns of ints: per card, its free bytes at each
moment and the bytes each seat or foreign command line held there.

The replay then works on these lists (no Moment is looked at twice): at 7 days of 1-minute
moments and 8 cards that is 80,640 card readings, read once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from inventory.attribution import match_seat
from inventory.history.model import CardReading, Moment
from seats.model import Catalogue, Seat

# A group of processes on a card: ("seat", name) or ("cmd", masked command line).
Key = tuple[str, str]


@dataclass
class Column:
    """One card over the window; index i is the i-th moment (oldest first).

    `free[i]` is None where the card was in error or missing at moment i (unseen, never zero);
    `held[key][i]` the bytes the group's processes held then (0 where it had none);
    `signatures[seat]` the (i, distinct command lines) at each moment a seat's lines changed (a
    second process with the same line is no change: the rollups keep lines, not processes).
    """

    free: list[int | None]
    held: dict[Key, list[int]] = field(default_factory=dict)
    signatures: dict[str, list[tuple[int, str]]] = field(default_factory=dict)


@dataclass(frozen=True)
class Series:
    """A host's moments as columns: times (epoch seconds), and one Column per card index."""

    host: str
    times: list[int]
    arrivals: list[int | None]
    columns: dict[int, Column]

    @property
    def end_index(self) -> int:
        return len(self.times) - 1


def attribution_of(catalogue: Catalogue, host: str) -> tuple[list[Seat], list[Seat]]:
    """The seats a process of `host` may be: the live ones first (as `attribute` tries them),
    then the retired ones (whose processes the replay removes)."""
    mine = [s for s in catalogue.seats if s.host in (host, None)]
    return [s for s in mine if s.state != "retired"], [s for s in mine if s.state == "retired"]


def series_of(catalogue: Catalogue, host: str, moments: Iterable[Moment]) -> Series:
    """Every moment of `host` (sorted by taken_at) as columns; a process's group is the seat
    recorded at capture, else the seat whose `match` finds its command line (asked once per
    distinct line), else its masked command line."""
    ordered: Sequence[Moment] = sorted(moments, key=lambda m: m.taken_at)
    times = [int(moment.taken_at.timestamp()) for moment in ordered]
    arrivals: list[int | None] = []
    for moment in ordered:
        arrived = getattr(moment, "arrived_at", None)  # recorded live only; absent on old ledgers
        arrivals.append(None if arrived is None else int(arrived.timestamp()))
    builder = SeriesBuilder(catalogue, host, times, arrivals)
    for i, moment in enumerate(ordered):
        builder.moment(i, moment)
    return builder.series()


class SeriesBuilder:
    """A host's columns filled moment by moment in time order (`moment`), or a whole hour of one
    card at a time from what its rollups prove (`placement.fit.week.prune`); `series_of` reads
    every moment."""

    def __init__(
        self, catalogue: Catalogue, host: str, times: list[int], arrivals: list[int | None]
    ) -> None:
        self.host = host
        self.times = times
        self.arrivals = arrivals
        self.columns: dict[int, Column] = {}
        self.last_signature: dict[tuple[int, str], str] = {}
        self._live, self._retired = attribution_of(catalogue, host)
        self._keys: dict[tuple[str | None, str | None], Key] = {}

    def key_of(self, seat: str | None, cmdline: str | None) -> Key:
        """A process's group: its recorded seat, else the seat its line matches, else its line."""
        found = self._keys.get((seat, cmdline))
        if found is None:
            name = seat or match_seat(cmdline, self._live) or match_seat(cmdline, self._retired)
            found = ("seat", name) if name else ("cmd", cmdline or "")
            self._keys[(seat, cmdline)] = found
        return found

    def column(self, card: int) -> Column:
        found = self.columns.get(card)
        if found is None:
            found = self.columns[card] = Column([None] * len(self.times))
        return found

    def moment(self, i: int, moment: Moment) -> None:
        """Moment i as read: each readable card's free and its processes' groups."""
        for reading in moment.cards:
            column = self.column(reading.card)
            if reading.ok and reading.free_bytes is not None:
                column.free[i] = reading.free_bytes
                if reading.processes:
                    _read_processes(column, reading, i, self.key_of, self.last_signature)

    def series(self) -> Series:
        return Series(self.host, self.times, self.arrivals, self.columns)


def _read_processes(
    column: Column,
    reading: CardReading,
    i: int,
    key_of: Callable[[str | None, str | None], Key],
    last_signature: dict[tuple[int, str], str],
) -> None:
    """Add moment i's processes of one card to its column: bytes per group, and each seat's
    command lines where they changed since its last sighting on the card."""
    n = len(column.free)
    lines: dict[str, list[str]] = {}
    for process in reading.processes:
        key = key_of(process.seat, process.cmdline)
        held = column.held.get(key)
        if held is None:
            held = column.held[key] = [0] * n
        held[i] += process.used_bytes or 0
        if key[0] == "seat":
            lines.setdefault(key[1], []).append(process.cmdline or "")
    for seat, seen in lines.items():
        signature = seen[0] if len(seen) == 1 else "\n".join(sorted(set(seen)))
        if last_signature.get((reading.card, seat)) != signature:
            last_signature[(reading.card, seat)] = signature
            column.signatures.setdefault(seat, []).append((i, signature))
