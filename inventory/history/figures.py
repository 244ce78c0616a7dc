"""The weekly report's figures of a window, as either source answers them, and their row types.

The rows are the ledger's (`inventory.ledger.report_queries` defines them; Prometheus answers the
same types); `CatalogueBound` cuts any source to the catalogue's hosts (DESIGN.md "Fleets").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from inventory.ledger.report_queries import (
    CardBuckets,
    CardUsage,
    DecisionRow,
    ForeignUsage,
    Holder,
    ReserveBreaches,
    SeatOf,
    SeatUsage,
    Span,
)

__all__ = [
    "CardBuckets",
    "CardUsage",
    "CatalogueBound",
    "DecisionRow",
    "ForeignUsage",
    "Holder",
    "ReserveBreaches",
    "SeatOf",
    "SeatUsage",
    "Span",
    "WindowFigures",
]


class WindowFigures(Protocol):
    """A window's figures: percentiles are nearest-rank on the ledger, Prometheus's own on it."""

    def span(self) -> Span | None: ...

    def card_usage(self) -> list[CardUsage]: ...

    def seat_usage(self, first_s: int, last_s: int, segment_s: int) -> list[SeatUsage]: ...

    def foreign_usage(self) -> list[ForeignUsage]: ...

    def reserve_breaches(
        self, host: str, card: int, own: Sequence[str], fixed_bytes: int | None
    ) -> ReserveBreaches: ...

    def chart_buckets(self, step_s: int) -> list[CardBuckets]: ...

    def window_hosts(self) -> set[str]: ...

    def last_sighting(self, host: str, seat: str, before_s: int, after_s: int) -> int | None: ...


class CatalogueBound:
    """Another source's figures of the catalogue's hosts only."""

    def __init__(self, source: WindowFigures, hosts: frozenset[str]) -> None:
        self.source = source
        self.hosts = hosts

    def span(self) -> Span | None:
        return self.source.span()

    def card_usage(self) -> list[CardUsage]:
        return [r for r in self.source.card_usage() if r.host in self.hosts]

    def seat_usage(self, first_s: int, last_s: int, segment_s: int) -> list[SeatUsage]:
        rows = self.source.seat_usage(first_s, last_s, segment_s)
        return [r for r in rows if r.host in self.hosts]

    def foreign_usage(self) -> list[ForeignUsage]:
        return [r for r in self.source.foreign_usage() if r.host in self.hosts]

    def reserve_breaches(
        self, host: str, card: int, own: Sequence[str], fixed_bytes: int | None
    ) -> ReserveBreaches:
        return self.source.reserve_breaches(host, card, own, fixed_bytes)

    def chart_buckets(self, step_s: int) -> list[CardBuckets]:
        return [b for b in self.source.chart_buckets(step_s) if b.host in self.hosts]

    def window_hosts(self) -> set[str]:
        return self.source.window_hosts() & self.hosts

    def last_sighting(self, host: str, seat: str, before_s: int, after_s: int) -> int | None:
        return self.source.last_sighting(host, seat, before_s, after_s)
