"""The capacity ledger view: per card what NVML saw beside what the catalogue declares and holds.

Pure: catalogue + snapshots in, rows out; the per-card formulas are `placement.fit.capacity`'s.
`ledger_json` is the `--json` shape of DESIGN.md; `placement.cli.ledger_text` the same content for people.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from inventory.attribution import attribute, shown_parent
from inventory.snapshot import Card, Snapshot, format_utc
from placement.fit.capacity import (
    attributed_bytes,
    cuda_context_bytes,
    held_parts,
    margin_bytes,
    plannable_bytes,
    seats_declared_on,
    unexplained_bytes,
)
from placement.fit.card import HeldPart, cuda_total
from placement.fit.consistency import check_snapshot
from placement.fit.engines import util_decimal
from placement.fit.engines.note import Said, fact_json
from placement.fit.engines.registry import process_engine
from placement.fit.kv import ProfileResident, profile_resident
from seats.model import Catalogue, Seat

if TYPE_CHECKING:
    from placement.fit.engines.base import EngineRule

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class LedgerForeignProcess:
    """A process on a card that no seat's `match` claims: its bytes are unexplained."""

    card: int
    pid: int
    used_bytes: int | None
    cmdline: str | None
    # The engine kind its command line starts (None where no engine recognises it).
    engine: str | None = None
    # Its nearest ancestor's command line where its own is a bare process title
    # (`VLLM::EngineCore` under `vllm serve … --port 8027`), else None.
    parent: str | None = None


@dataclass(frozen=True)
class LedgerCardRow:
    """One card's figures; None where the card could not be read."""

    index: int
    uuid: str | None
    total_bytes: int | None
    reserved_bytes: int | None
    cuda_total_bytes: int | None
    declared_bytes: int
    held_bytes: int | None
    held_by: tuple[HeldPart, ...]
    used_bytes: int | None
    attributed_bytes: int | None
    unexplained_bytes: int | None
    free_bytes: int | None
    margin_bytes: int
    plannable_bytes: int
    seats: tuple[str, ...]
    absent: tuple[str, ...]
    error: str | None

    @property
    def nvml_v1(self) -> bool:
        """Read through NVML v1 only: reserve unknown, counted in used."""
        return self.error is None and self.reserved_bytes is None


@dataclass(frozen=True)
class LedgerSeatRow:
    """One seat: the bytes the catalogue declares for it against the bytes its processes hold."""

    seat: str
    state: str
    cards: tuple[int, ...]
    observed_cards: tuple[int, ...]
    declared_bytes: int
    observed_bytes: int | None
    status: str  # present | absent | assumed | elsewhere | planned
    # What the seat's engine.profile says it holds on one of its cards (None without one).
    profile: ProfileResident | None = None
    # Its engine kind: declared, else recognised in its processes' command lines, else None.
    engine: str | None = None

    @property
    def difference_bytes(self) -> int | None:
        """observed − declared, where both are known."""
        if self.observed_bytes is None or self.status in ("absent", "planned"):
            return None
        return self.observed_bytes - self.declared_bytes


@dataclass(frozen=True)
class HostView:
    """One host's snapshot, read against the catalogue."""

    host: str
    taken_at: datetime
    source: str
    driver: str | None
    margin_bytes: int
    cuda_context_bytes: int
    cards: tuple[LedgerCardRow, ...]
    seats: tuple[LedgerSeatRow, ...]
    foreign: tuple[LedgerForeignProcess, ...]
    warnings: tuple[Said, ...]


@dataclass(frozen=True)
class LedgerView:
    """Every host the snapshots cover."""

    hosts: tuple[HostView, ...]

    @property
    def warnings(self) -> list[Said]:
        """All hosts' warnings, in order."""
        return [w for host in self.hosts for w in host.warnings]


def build_ledger(
    catalogue: Catalogue, snapshots: Sequence[Snapshot], sources: Sequence[str]
) -> LedgerView:
    """The view of `snapshots` (read from `sources`, one each) against `catalogue`.

    Raises BadInputError where a snapshot contradicts the catalogue (`check_snapshot`).
    """
    hosts = []
    for snapshot, source in zip(snapshots, sources, strict=True):
        warnings = check_snapshot(catalogue, snapshot, source)
        hosts.append(_host_view(catalogue, attribute(snapshot, catalogue), source, warnings))
    return LedgerView(tuple(hosts))


def _host_view(
    catalogue: Catalogue, snapshot: Snapshot, source: str, warnings: Sequence[Said]
) -> HostView:
    host = snapshot.host
    cards = tuple(_card_row(catalogue, snapshot, card) for card in snapshot.cards)
    foreign = tuple(
        LedgerForeignProcess(
            card.index,
            process.pid,
            process.used_bytes,
            process.cmdline,
            _kind(process_engine(process.cmdline)),
            shown_parent(process),
        )
        for card in snapshot.cards
        for process in card.processes
        if process.seat is None
    )
    return HostView(
        host=host,
        taken_at=snapshot.taken_at,
        source=source,
        driver=snapshot.driver,
        margin_bytes=margin_bytes(catalogue, host),
        cuda_context_bytes=cuda_context_bytes(catalogue, host),
        cards=cards,
        seats=tuple(_seat_rows(catalogue, snapshot)),
        foreign=foreign,
        warnings=tuple(warnings),
    )


def _card_row(catalogue: Catalogue, snapshot: Snapshot, card: Card) -> LedgerCardRow:
    host = snapshot.host
    declared = seats_declared_on(catalogue, host, card.index)
    parts = tuple(held_parts(catalogue, host, card)) if card.ok else ()
    return LedgerCardRow(
        index=card.index,
        uuid=card.uuid,
        total_bytes=card.total_bytes,
        reserved_bytes=card.reserved_bytes,
        cuda_total_bytes=cuda_total(card) if card.ok else None,
        declared_bytes=sum(seat.resident_bytes for seat in declared),
        held_bytes=sum(part.bytes for part in parts) if card.ok else None,
        held_by=parts,
        used_bytes=card.used_bytes,
        attributed_bytes=attributed_bytes(card) if card.ok else None,
        unexplained_bytes=unexplained_bytes(card),
        free_bytes=card.free_bytes,
        margin_bytes=margin_bytes(catalogue, host),
        plannable_bytes=plannable_bytes(catalogue, snapshot, card),
        seats=tuple(seat.name for seat in declared),
        absent=tuple(part.name for part in parts if part.kind == "absent"),
        error=card.error,
    )


def _seat_rows(catalogue: Catalogue, snapshot: Snapshot) -> list[LedgerSeatRow]:
    """Seats of this host (and host-less seats seen running on it), retired ones left out."""
    observed: dict[str, dict[int, int]] = {}
    cmdlines: dict[str, list[str | None]] = {}
    for card in snapshot.cards:
        for process in card.processes:
            if process.seat is not None:
                per_card = observed.setdefault(process.seat, {})
                per_card[card.index] = per_card.get(card.index, 0) + (process.used_bytes or 0)
                cmdlines.setdefault(process.seat, []).append(process.cmdline)
    rows = []
    here = (*catalogue.on_host(snapshot.host), *catalogue.on_host(None))
    for _, seat in sorted(here, key=lambda p: p[0]):
        if seat.state == "retired":
            continue
        if seat.host is None and seat.name not in observed:
            continue
        row = _seat_row(seat, observed.get(seat.name))
        row = dataclasses.replace(row, engine=_seat_engine(seat, cmdlines.get(seat.name, [])))
        rows.append(_with_profile(catalogue, snapshot, seat, row))
    return rows


def _seat_engine(seat: Seat, cmdlines: Sequence[str | None]) -> str | None:
    """The seat's declared engine kind, else the first its processes' command lines start."""
    for cmdline in (*cmdlines, None):
        found = process_engine(cmdline, seat.engine)
        if found is not None:
            return found.kind
    return None


def _kind(found: EngineRule | None) -> str | None:
    return found.kind if found is not None else None


def _with_profile(
    catalogue: Catalogue, snapshot: Snapshot, seat: Seat, row: LedgerSeatRow
) -> LedgerSeatRow:
    """The row with the profile's resident on the first of its cards that NVML read."""
    if seat.engine.profile is None:
        return row
    by_index = {card.index: card for card in snapshot.cards if card.error is None}
    indices = [i for i in (*row.cards, *row.observed_cards) if i in by_index]
    if not indices:
        return row
    util = seat.engine.gpu_memory_utilization
    found = profile_resident(
        seat,
        util_decimal(util) if util is not None else None,
        cuda_total(by_index[indices[0]]),
        cuda_context_bytes(catalogue, snapshot.host),
    )
    return dataclasses.replace(row, profile=found)


def _seat_row(seat: Seat, seen: dict[int, int] | None) -> LedgerSeatRow:
    cards = seat.pinned_cards or ()
    declared = seat.resident_bytes * seat.card_count
    observed_cards = tuple(sorted(seen)) if seen else ()
    observed = sum(seen.values()) if seen else None
    if seen:
        # Running where the catalogue says it runs, or started somewhere else.
        status = "present" if not cards or set(seen) <= set(cards) else "elsewhere"
    elif seat.state == "planned":
        status = "planned"
    elif seat.match is None:
        status = "assumed"  # DESIGN.md: a seat without `match` is assumed present
    else:
        status = "absent"
        observed = 0
    return LedgerSeatRow(seat.name, seat.state, cards, observed_cards, declared, observed, status)


# --- JSON ----------------------------------------------------------------------------------


def ledger_json(view: LedgerView) -> dict[str, Any]:
    """DESIGN.md's `ledger` shape (schema 1, raw byte ints), with a few added keys."""
    return {
        "schema": SCHEMA_VERSION,
        "hosts": [
            {
                "host": host.host,
                "taken_at": format_utc(host.taken_at),
                "source": host.source,
                "driver": host.driver,
                "margin_bytes": host.margin_bytes,
                "cuda_context_bytes": host.cuda_context_bytes,
                "cards": [_card_json(card) for card in host.cards],
                "seats": [
                    {
                        "seat": seat.seat,
                        "cards": list(seat.cards),
                        "declared_bytes": seat.declared_bytes,
                        "observed_bytes": seat.observed_bytes,
                        "status": seat.status,
                        "state": seat.state,
                        "observed_cards": list(seat.observed_cards),
                        "profile": _profile_json(seat.profile),
                        "engine": seat.engine,
                    }
                    for seat in host.seats
                ],
                "foreign": [asdict(p) for p in host.foreign],
                "warnings": [fact_json(w) for w in host.warnings],
            }
            for host in view.hosts
        ],
        "warnings": [fact_json(w) for w in view.warnings],
    }


def _profile_json(found: ProfileResident | None) -> dict[str, int] | None:
    """The profile's parts on one card, in bytes (None without a profile)."""
    if found is None:
        return None
    return {
        "weights_bytes": found.weights_bytes,
        "non_kv_bytes": found.non_kv_bytes,
        "kv_bytes": found.kv_bytes,
        "cuda_graphs_bytes": found.cuda_graphs_bytes,
        "cuda_context_bytes": found.cuda_context_bytes,
        "per_card_bytes": found.total_bytes,
    }


def _card_json(card: LedgerCardRow) -> dict[str, Any]:
    return {
        "index": card.index,
        "uuid": card.uuid,
        "total_bytes": card.total_bytes,
        "reserved_bytes": card.reserved_bytes,
        "declared_bytes": card.declared_bytes,
        "held_bytes": card.held_bytes,
        "used_bytes": card.used_bytes,
        "attributed_bytes": card.attributed_bytes,
        "unexplained_bytes": card.unexplained_bytes,
        "free_bytes": card.free_bytes,
        "plannable_bytes": card.plannable_bytes,
        "error": card.error,
        "cuda_total_bytes": card.cuda_total_bytes,
        "margin_bytes": card.margin_bytes,
        "held_by": [{"kind": p.kind, "name": p.name, "bytes": p.bytes} for p in card.held_by],
        "seats": list(card.seats),
        "nvml_v1": card.nvml_v1,
    }
