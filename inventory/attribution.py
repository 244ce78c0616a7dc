"""Process attribution: which seat a process on a card belongs to, by the catalogue's `match` regexes.

A process whose cmdline, and each of its ancestors' (`parents`), matches no seat of its host is
"foreign"; its bytes count as unexplained. A process whose cmdline is None (the PID vanished
before /proc was read) cannot be matched by its own line and is foreign unless the poller
already named its seat or an ancestor's line matches.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TypeVar

from pydantic import BaseModel

from inventory.snapshot import Card, Process, Snapshot
from seats.model import Catalogue, Seat, match_pattern


def host_seats(catalogue: Catalogue, host: str) -> list[Seat]:
    """Seats of `catalogue` that may run on `host`: those naming it and those naming no host."""
    both = sorted((*catalogue.on_host(host), *catalogue.on_host(None)), key=lambda p: p[0])
    return [seat for _, seat in both if seat.state != "retired"]


def match_seat(cmdline: str | None, seats: Iterable[Seat]) -> str | None:
    """Name of the first seat whose `match` regex finds `cmdline` (re.search), else None."""
    return _first_match(cmdline, _patterns(seats))


def _patterns(seats: Iterable[Seat]) -> list[tuple[str, re.Pattern[str]]]:
    """(name, compiled match) of each seat with a `match`, in order: read once per host."""
    return [(seat.name, match_pattern(seat.match)) for seat in seats if seat.match is not None]


def _first_match(cmdline: str | None, patterns: list[tuple[str, re.Pattern[str]]]) -> str | None:
    if cmdline is None:
        return None
    for name, pattern in patterns:
        if pattern.search(cmdline):
            return name
    return None


def match_lines(lines: Iterable[str | None], seats: Sequence[Seat]) -> tuple[str, int] | None:
    """(seat, position) of the first of `lines` that a seat's `match` finds, else None.

    `lines` are a process's own command line, then its ancestors', nearest first (vLLM's
    `VLLM::EngineCore` is found by its API server's `--port 8027`): the nearest line that any
    seat matches decides, and among the seats that match it the first, as `match_seat` does.
    """
    return _match_lines(lines, _patterns(seats))


def _match_lines(
    lines: Iterable[str | None], patterns: list[tuple[str, re.Pattern[str]]]
) -> tuple[str, int] | None:
    for position, line in enumerate(lines):
        name = _first_match(line, patterns)
        if name is not None:
            return name, position
    return None


def process_seat(process: Process, seats: Sequence[Seat]) -> str | None:
    """The seat whose `match` finds the process's own command line, else its nearest ancestor's."""
    found = match_lines((process.cmdline, *process.parents), seats)
    return None if found is None else found[0]


def attribute(snapshot: Snapshot, catalogue: Catalogue) -> Snapshot:
    """The snapshot with every process's `seat` filled where a regex matches.

    A seat recorded at capture is kept as it is; only null seats are attributed.
    """
    return _attributed(snapshot, _patterns(host_seats(catalogue, snapshot.host)))


def attribute_fleet(snapshots: Sequence[Snapshot], catalogue: Catalogue) -> tuple[Snapshot, ...]:
    """`attribute(snapshot, catalogue)` of each snapshot, the catalogue's seats grouped by host
    once (a fleet's hosts each read their own seats and those naming no host, in catalogue
    order) instead of scanned per host."""
    hosted: dict[str, list[tuple[int, Seat]]] = {}
    hostless: list[tuple[int, Seat]] = []
    for position, seat in enumerate(catalogue.seats):
        if seat.state != "retired":
            where = hostless if seat.host is None else hosted.setdefault(seat.host, [])
            where.append((position, seat))

    def patterns(host: str) -> list[tuple[str, re.Pattern[str]]]:
        mine = hosted.get(host, [])
        spots = sorted(mine + hostless, key=lambda spot: spot[0]) if mine and hostless else mine
        return _patterns(seat for _, seat in spots or hostless)

    return tuple(_attributed(s, patterns(s.host)) for s in snapshots)


def _attributed(snapshot: Snapshot, patterns: list[tuple[str, re.Pattern[str]]]) -> Snapshot:
    """The snapshot with each null-seat process named by `patterns` (the host's seats)."""
    if not patterns:
        return snapshot
    cards: list[Card] = []
    changed = False
    for card in snapshot.cards:
        if not card.processes:
            cards.append(card)
            continue
        processes: list[Process] = []
        named = False
        for process in card.processes:
            if process.seat is None:
                # _match_lines over its own line, then its ancestors', without the tuple.
                seat = _first_match(process.cmdline, patterns)
                if seat is None and process.parents:
                    found = _match_lines(process.parents, patterns)
                    seat = None if found is None else found[0]
                if seat is not None:
                    process = _replaced(process, seat=seat)
                    named = True
            processes.append(process)
        # A card none of whose processes gains a seat is the same card: kept, not copied.
        cards.append(_replaced(card, processes=tuple(processes)) if named else card)
        changed = changed or named
    return _replaced(snapshot, cards=tuple(cards)) if changed else snapshot


M = TypeVar("M", bound=BaseModel)
# BaseModel's own slots, written as pydantic's copy writes them (past the frozen __setattr__).
_SET_FIELDS_SET = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_SET_EXTRA = BaseModel.__dict__["__pydantic_extra__"].__set__
_SET_PRIVATE = BaseModel.__dict__["__pydantic_private__"].__set__


def _replaced(model: M, **update: object) -> M:
    """A copy of `model` with some fields given anew, made as pydantic's model_copy makes it
    (fields, fields set, extra, private) without its generic path: a fleet attributes tens of
    thousands of processes."""
    copy = object.__new__(type(model))
    object.__setattr__(copy, "__dict__", {**model.__dict__, **update})
    _SET_FIELDS_SET(copy, model.__pydantic_fields_set__ | update.keys())
    extra, private = model.__pydantic_extra__, getattr(model, "__pydantic_private__", None)
    _SET_EXTRA(copy, None if extra is None else dict(extra))
    _SET_PRIVATE(copy, None if private is None else dict(private))
    return copy


def is_title(cmdline: str) -> bool:
    """True for a process title rather than a command: one word, or a first word with `::`
    (setproctitle's `VLLM::EngineCore`, `sglang::scheduler_TP0`, `ray::IDLE`)."""
    words = cmdline.split()
    return len(words) <= 1 or "::" in words[0]


def shown_parent(process: Process, seats: Sequence[Seat] = ()) -> str | None:
    """The ancestor's line output shows beside a process's own: the one whose match named its seat
    (from `seats`), or, for a bare process title, `server_line`'s; None when its own line says it."""
    if not process.parents:
        return None
    seat = [s for s in seats if s.name == process.seat]
    if seat and match_seat(process.cmdline, seat) is None:
        found = match_lines(process.parents, seat)
        if found is not None:
            return process.parents[found[1]]
    line = server_line(process)
    return line if line != process.cmdline else None


def server_line(process: Process) -> str | None:
    """The command line that says what a process serves: its own, or for a bare process title its
    nearest ancestor's that is no title (a `VLLM::Worker_TP0` under `VLLM::EngineCore` under
    `vllm serve … --port 8027` gives the last)."""
    if process.cmdline is not None and not is_title(process.cmdline):
        return process.cmdline
    for line in process.parents:
        if not is_title(line):
            return line
    return process.cmdline
