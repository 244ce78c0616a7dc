"""Synthetic ledgers for the week's scenarios, written by the real ledger writer.

A host's week is a function from a moment's time to what each card holds (processes) or an
error; `write_week` turns it into snapshots every `step` and stores them with
`Ledger.append_many`, as `gpuplan snapshot --ledger` stores them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from inventory.ledger.store import open_ledger
from inventory.snapshot import Card, Process, Snapshot

GIB = 2**30
MIB = 2**20
TOTAL = 97_871 * MIB  # fv-ml1's NVML total per card (docs/facts.md §3)
RESERVED = 622 * MIB
CUDA_TOTAL = TOTAL - RESERVED  # 101,972,967,424 B: vLLM's 94.97 GiB
# A Monday at 00:00 UTC: day d, hour h is START + d days + h hours.
START = datetime(2026, 9, 14, 0, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Proc:
    """One process on a card: pid, bytes, command line (and the seat recorded at capture)."""

    pid: int
    used_bytes: int
    cmdline: str
    seat: str | None = None


# What a card holds at a moment: its processes, or None for a card in error.
CardAt = Callable[[datetime], Sequence[Proc] | None]


def snapshot_at(host: str, at: datetime, cards: Sequence[CardAt]) -> Snapshot:
    """One snapshot of `host` at `at`: each card's processes, free = CUDA total − Σ used."""
    built = []
    for index, card_at in enumerate(cards):
        procs = card_at(at)
        if procs is None:
            built.append(Card(index=index, uuid=f"GPU-{host}-{index}", error="GpuIsLost"))
            continue
        used = sum(p.used_bytes for p in procs)
        built.append(
            Card(
                index=index,
                uuid=f"GPU-{host}-{index}",
                name="NVIDIA H200",
                total_bytes=TOTAL,
                reserved_bytes=RESERVED,
                used_bytes=used,
                free_bytes=CUDA_TOTAL - used,
                processes=tuple(
                    Process(pid=p.pid, used_bytes=p.used_bytes, cmdline=p.cmdline, seat=p.seat)
                    for p in procs
                ),
            )
        )
    return Snapshot(host=host, taken_at=at, driver="580.159.04", cards=tuple(built))


def moments(
    host: str,
    cards: Sequence[CardAt],
    *,
    days: float = 7,
    step: timedelta = timedelta(minutes=10),
    start: datetime = START,
    skip: Callable[[datetime], bool] = lambda at: False,
) -> Iterator[Snapshot]:
    """Snapshots every `step` from `start` for `days` (the last one `step` before the end),
    leaving out the moments `skip` names (a gap)."""
    at, end = start, start + timedelta(days=days)
    while at < end:
        if not skip(at):
            yield snapshot_at(host, at, cards)
        at += step


def write_week(path: Path, snapshots: Iterator[Snapshot]) -> Path:
    """Store the snapshots in a new ledger at `path` with the ledger's own writer."""
    with open_ledger(path) as ledger:
        ledger.append_many(snapshots)
    return path


def between(at: datetime, first_hour: int, last_hour: int) -> bool:
    """True from first_hour:00 to last_hour:59 UTC."""
    return first_hour <= at.hour <= last_hour
