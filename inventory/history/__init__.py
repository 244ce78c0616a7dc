"""One history over the ledger and Prometheus: a host's moments in a window and their hourly rollups.

`History` is what every reader of the past asks (the weekly report, and every `--window`); the
ledger (`inventory.history.ledger`) and Prometheus (`inventory.history.prometheus`) answer it.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Protocol

from inventory.history.model import (
    CardHour,
    CardReading,
    CommandHour,
    Moment,
    ProcessReading,
    Rollups,
)

__all__ = [
    "CardHour",
    "CardReading",
    "CommandHour",
    "History",
    "Moment",
    "ProcessReading",
    "Rollups",
]


class History(Protocol):
    """A host's past, from whichever source keeps it."""

    def moments(self, host: str, start: datetime, end: datetime) -> Iterator[Moment]:
        """`host`'s stored snapshots taken in [start, end), oldest first."""
        ...

    def rollups(self, host: str, start: datetime, end: datetime) -> Rollups:
        """`host`'s hourly rollups of [start, end): `rollup.hourly` of its moments, whether the
        source computes them or keeps them."""
        ...
