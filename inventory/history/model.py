"""What a history yields: a host's moments (each stored snapshot) and their hourly rollups.

Frozen data, bytes as ints, times as UTC `datetime`s; both sources (the ledger, Prometheus) build
the same types, so whoever reads them never knows which one answered.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class ProcessReading:
    """One compute process on a card at a moment."""

    pid: int
    used_bytes: int | None  # None: NVML could not say
    cmdline: str | None  # masked as stored; None where the source keeps none (Prometheus)
    seat: str | None  # the seat recorded at capture; None for an unclaimed process


@dataclass(frozen=True, slots=True)
class CardReading:
    """One card at a moment; its figures are None where it was in error."""

    card: int
    total_bytes: int | None
    reserved_bytes: int | None  # None: NVML v1 only (used then includes the driver reserve)
    used_bytes: int | None
    free_bytes: int | None
    error: str | None
    processes: tuple[ProcessReading, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None and self.used_bytes is not None


@dataclass(frozen=True, slots=True)
class Moment:
    """One stored snapshot of a host: every card it read then.

    `arrived_at` is when the source received it, where it recorded that (the ledger, for a
    snapshot recorded live); None for an imported file, an older ledger and Prometheus.
    """

    host: str
    taken_at: datetime
    cards: tuple[CardReading, ...]
    arrived_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class CardHour:
    """One card over one UTC hour [hour, hour + 1 h): its readings' bounds.

    `samples` counts the readable readings, `error_samples` those in error; the lowest free and the
    highest used are over the readable ones, `min_free_at` the earliest moment with that free
    (where `dated`).
    """

    host: str
    card: int
    hour: datetime
    samples: int
    error_samples: int
    min_free_bytes: int | None
    min_free_at: datetime | None
    max_used_bytes: int | None
    # False where the source bounds the hour without dating its least free (Prometheus's
    # aggregates of a card whose free moved): `min_free_at` is then None.
    dated: bool = True


@dataclass(frozen=True, slots=True)
class CommandHour:
    """One distinct process group on a card over one UTC hour: the bytes its processes held.

    A group is a (seat, masked command line) pair; its processes on the card are summed at each
    moment. Prometheus keeps no command lines: there a group is a seat, or every unclaimed
    process of the card. `min_at`/`max_at` are the earliest moments of each extreme.
    """

    host: str
    card: int
    hour: datetime
    seat: str | None
    cmdline: str | None
    samples: int
    min_bytes: int
    min_at: datetime
    max_bytes: int
    max_at: datetime
    # False where the source bounds the hour without dating its extremes (Prometheus's
    # aggregates of a group whose bytes moved): `min_at` and `max_at` are then the hour's first
    # moment, not the extremes'.
    dated: bool = True


@dataclass(frozen=True, slots=True)
class Rollups:
    """A host's hourly rollups over a window, ordered by hour, then card (and group)."""

    cards: tuple[CardHour, ...]
    commands: tuple[CommandHour, ...]
