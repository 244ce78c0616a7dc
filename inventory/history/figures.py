"""The weekly report's figures of a window, as either source answers them, and their row types.

The rows are the ledger's (`inventory.ledger.report_queries` defines them; Prometheus answers the
same types); `CatalogueBound` cuts any source to the catalogue's hosts (DESIGN.md "Fleets").
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
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
    "breaches_of",
    "ranked_holders",
    "seat_rows",
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


# --- what both sources reduce alike ------------------------------------------------------------


def seat_rows(
    stats: Mapping[tuple[str, int, str], tuple[int, int, int, int]],
    firsts: Mapping[tuple[str, int, str], int],
    lasts: Mapping[tuple[str, int, str], int],
) -> list[SeatUsage]:
    """Every (host, card, seat)'s row, by host, seat and card: (samples, p50, p95, max) from
    `stats`, its first and last parts' medians where it ran in them."""
    rows = [
        SeatUsage(*key, n, p50, p95, top, firsts.get(key), lasts.get(key))
        for key, (n, p50, p95, top) in stats.items()
    ]
    return sorted(rows, key=lambda r: (r.host, r.seat, r.card))


def breaches_of(
    points: Sequence[tuple[int, int]],
    holders: Callable[[], Iterable[tuple[str, int]]],
    own: Collection[str],
) -> ReserveBreaches:
    """A reserve's breaches from the moments (time, others' bytes) where others held more of its
    card than it leaves them: how many, first and last, the worst (the earliest of equals), and
    the five largest `holders` (name, most bytes) other than its `own` seats, asked only if any."""
    if not points:
        return ReserveBreaches(0, None, None, None, None, ())
    worst_at, worst = max(points, key=lambda p: (p[1], -p[0]))
    return ReserveBreaches(
        snapshots=len(points),
        first_s=min(t for t, _ in points),
        last_s=max(t for t, _ in points),
        worst_bytes=worst,
        worst_at_s=worst_at,
        holders=ranked_holders(holders(), own),
    )


def ranked_holders(found: Iterable[tuple[str, int]], own: Collection[str]) -> tuple[Holder, ...]:
    """The five largest of (name, bytes) by each name's most, largest first (then by name),
    `own` left out."""
    best: dict[str, int] = {}
    for name, held in found:
        if name not in own:
            best[name] = max(held, best.get(name, held))
    ranked = sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    return tuple(Holder(name, held) for name, held in ranked)
