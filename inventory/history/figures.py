"""The weekly report's figures of a window, as either source answers them, and their row types.

The rows are the ledger's (`inventory.ledger.report_queries` defines them; Prometheus answers the
same types); `CatalogueBound` cuts any source to the catalogue's hosts (DESIGN.md "Fleets").
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from inventory.attribution import shown_parent
from inventory.ledger.report_queries import (
    CardBuckets,
    CardPart,
    CardUsage,
    ChartSums,
    DecisionRow,
    ForeignProcess,
    ForeignUsage,
    Holder,
    ReserveBreaches,
    ReserveReading,
    SeatOf,
    SeatUsage,
    Span,
)
from inventory.snapshot import Process

__all__ = [
    "CardBuckets",
    "CardPart",
    "CardSource",
    "CardUsage",
    "CatalogueBound",
    "ChartSums",
    "DecisionRow",
    "ForeignProcess",
    "ForeignUsage",
    "Holder",
    "ReserveBreaches",
    "ReserveReading",
    "SeatOf",
    "SeatUsage",
    "Span",
    "WindowFigures",
    "breach_points",
    "breaches_of",
    "card_usage",
    "chart_buckets",
    "foreign_usage",
    "nearest_rank",
    "ranked_holders",
    "seat_rows",
    "seat_usage",
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


class CardSource(Protocol):
    """What `card_usage` asks a source of its cards over a window; each answers natively (SQL on
    the ledger, PromQL on Prometheus). None of these is an aggregate of the report."""

    def card_parts(self) -> Iterable[CardPart]:
        """Each card's bounds over consecutive parts of the window (the source picks the parts)."""
        ...

    def first_lowest_free(
        self, wanted: Mapping[tuple[str, int], tuple[int, int, int]]
    ) -> dict[tuple[str, int], int]:
        """Per card: (start, end, free bytes) → the first moment in [start, end) with that free."""
        ...

    def used_at_ranks(
        self, wanted: Mapping[tuple[str, int], tuple[int, Sequence[int]]]
    ) -> dict[tuple[str, int], tuple[int, ...]]:
        """Per card: (its samples, ranks) → its used bytes at each rank, ascending from 1: a
        sample it stored, never an interpolation."""
        ...

    def nvml_v1_cards(self) -> set[tuple[str, int]]:
        """The cards some reading of which had no driver reserve (NVML v1 only)."""
        ...

    def unexplained_max(self) -> Mapping[tuple[str, int], tuple[int | None, int | None]]:
        """Per card where the source knows it: the most memory no seat explained (used − the
        bytes of processes some seat claims), first when (None, None: the source cannot tell, as
        DCGM's figures); a card left out reads 0."""
        ...


@dataclass
class _CardTotal:
    samples: int = 0
    errors: int = 0
    top: int | None = None
    low: int | None = None
    low_part: tuple[int, int] = (0, 0)

    def add(self, part: CardPart) -> None:
        self.samples += part.samples
        self.errors += part.error_samples
        if part.max_used_bytes is not None and (self.top is None or part.max_used_bytes > self.top):
            self.top = part.max_used_bytes
        low = part.min_free_bytes
        span = (part.start_s, part.end_s)
        if low is not None and (self.low is None or (low, span) < (self.low, self.low_part)):
            self.low, self.low_part = low, span


def card_usage(source: CardSource) -> list[CardUsage]:
    """Every card the window saw (read or in error), by host and index: the one reduction of the
    report's card figures, whichever source answers.

    Samples, errors, the most used and the least free are summed, maxed and minimised over the
    source's parts; the least free is dated by the first moment holding it in the earliest part
    holding it; p50 and p95 of used are the samples at the nearest ranks ceil(p·N/100). A card
    whose unexplained memory the source does not report reads 0 where it was read.
    """
    totals: dict[tuple[str, int], _CardTotal] = {}
    for part in source.card_parts():
        totals.setdefault((part.host, part.card), _CardTotal()).add(part)
    lowest = {k: (*t.low_part, t.low) for k, t in totals.items() if t.low is not None}
    low_at = source.first_lowest_free(lowest) if lowest else {}
    ranked = {
        key: (t.samples, (nearest_rank(50, t.samples), nearest_rank(95, t.samples)))
        for key, t in totals.items()
        if t.samples
    }
    used = source.used_at_ranks(ranked) if ranked else {}
    v1 = source.nvml_v1_cards()
    unexplained = source.unexplained_max()
    rows: list[CardUsage] = []
    for key in sorted(totals):
        t = totals[key]
        if not t.samples and not t.errors:
            continue
        p50, p95 = used.get(key, (None, None))
        most, most_at = unexplained.get(key, (0, None)) if t.samples else (None, None)
        rows.append(
            CardUsage(
                host=key[0],
                card=key[1],
                samples=t.samples,
                error_samples=t.errors,
                used_p50_bytes=p50,
                used_p95_bytes=p95,
                used_max_bytes=t.top if t.samples else None,
                min_free_bytes=t.low,
                min_free_at_s=low_at.get(key),
                unexplained_max_bytes=most,
                unexplained_max_at_s=most_at,
                nvml_v1=key in v1,
            )
        )
    return rows


def nearest_rank(p: int, n: int) -> int:
    """The rank (1-based) of the p-th percentile of n ascending samples, nearest-rank:
    ceil(p·n/100), in integer arithmetic. Both sources select the sample at this rank."""
    return (p * n + 99) // 100


SeatKey = tuple[str, int, str]
# A part of the window, [start, end) in unix seconds; None: the whole window.
Part = tuple[int, int] | None


class SeatSource(Protocol):
    """What `seat_usage` asks a source of the seats' bytes on each card (a seat's processes on a
    card summed at each moment); each answers natively. None of these is an aggregate."""

    def seat_counts(
        self, parts: Sequence[Part]
    ) -> Sequence[Mapping[SeatKey, tuple[int, int | None]]]:
        """Per part: each (host, card, seat) seen there → (its samples, its most bytes); only
        the whole window's most is read, so a source may leave a part's out (None)."""
        ...

    def seat_at_ranks(
        self, asks: Sequence[tuple[Part, Mapping[SeatKey, tuple[int, Sequence[int]]]]]
    ) -> list[dict[SeatKey, tuple[int, ...]]]:
        """Per (part, wanted: key → its samples there, ranks): its bytes at each rank,
        ascending from 1: a sample it stored, never an interpolation."""
        ...


def seat_usage(source: SeatSource, first_s: int, last_s: int, segment_s: int) -> list[SeatUsage]:
    """Every (host, card, seat)'s row of the window: samples, p50, p95 (the samples at the nearest
    ranks ceil(p·N/100)) and most bytes, and the medians of its first part [first_s, first_s +
    segment_s) and last part (last_s − segment_s, last_s]: the one reduction of the report's seat
    figures, whichever source answers."""
    parts: list[Part] = [None, (first_s, first_s + segment_s), (last_s - segment_s + 1, last_s + 1)]
    counts = source.seat_counts(parts)
    asks = [
        (part, {k: (n, tuple(nearest_rank(p, n) for p in wanted)) for k, (n, _) in found.items()})
        for part, found, wanted in zip(parts, counts, ((50, 95), (50,), (50,)), strict=True)
    ]
    whole, firsts, lasts = source.seat_at_ranks(asks)
    stats: dict[SeatKey, tuple[int, int, int, int]] = {}
    for key, (n, top) in counts[0].items():
        if top is not None and len(found := whole.get(key, ())) == 2:
            stats[key] = (n, found[0], found[1], top)
    return seat_rows(
        stats, {k: v[0] for k, v in firsts.items()}, {k: v[0] for k, v in lasts.items()}
    )


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


# --- reserves ----------------------------------------------------------------------------------


def breach_points(
    readings: Iterable[ReserveReading], fixed_bytes: int | None
) -> list[tuple[int, int]]:
    """(time, others' bytes) of the moments where processes other than the reserve's own seats
    held more of its card than it leaves them, oldest first: `placement.fit.reserves`' rule.

    others = used − own; a whole-card reserve (`fixed_bytes` None) leaves them nothing, a fixed
    one max(0, total − driver reserve − fixed), which a moment without the card's total cannot
    tell (it breaks nothing).
    """
    points: list[tuple[int, int]] = []
    for r in readings:
        others = r.used_bytes - r.own_bytes
        if fixed_bytes is None:
            allowed = 0
        elif r.total_bytes is None:
            continue
        else:
            allowed = max(0, r.total_bytes - (r.reserved_bytes or 0) - fixed_bytes)
        if others > allowed:
            points.append((r.at_s, others))
    return sorted(points)


# --- foreign processes -------------------------------------------------------------------------


def foreign_usage(processes: Iterable[ForeignProcess], by_command_line: bool) -> list[ForeignUsage]:
    """The report's foreign rows: processes grouped by host, card, command line and ancestors'
    lines where the source keeps them (`by_command_line`), else by host and card; each row its
    distinct pids, samples summed, first and last sight and most bytes, by host, card and first
    sight. A bare process title is told apart, and shown, by its server's line."""
    groups: dict[tuple[object, ...], list[ForeignProcess]] = defaultdict(list)
    for p in processes:
        key = (p.host, p.card, p.cmdline, p.parents) if by_command_line else (p.host, p.card)
        groups[key].append(p)
    rows: list[ForeignUsage] = []
    for found in groups.values():
        one = found[0]
        cmdline = one.cmdline if by_command_line else None
        parents = one.parents if by_command_line else ()
        rows.append(
            ForeignUsage(
                host=one.host,
                card=one.card,
                cmdline=cmdline,
                pids=len({p.pid for p in found}),
                samples=sum(p.samples for p in found),
                first_s=min(p.first_s for p in found),
                last_s=max(p.last_s for p in found),
                max_bytes=max(p.max_bytes for p in found),
                parent=shown_parent(Process(pid=0, cmdline=cmdline, parents=parents))
                if by_command_line
                else None,
            )
        )
    return sorted(
        rows,
        key=lambda f: (f.host, f.card, f.first_s, f.cmdline is not None, f.cmdline or ""),
    )


# --- charts ------------------------------------------------------------------------------------


def chart_buckets(sums: Iterable[ChartSums]) -> list[CardBuckets]:
    """The report's chart buckets of each card, by host and card: its sums, and the unexplained
    per bucket, where the source gives no moment's, Σ used less its seats' sums (seat by seat, a
    seat without the bucket counting 0.0), never below zero."""
    rows: list[CardBuckets] = []
    for s in sorted(sums, key=lambda s: (s.host, s.card)):
        other = s.unexplained_bytes
        if other is None:
            other = _unexplained_of_sums(s.used_bytes, s.seat_bytes)
        rows.append(CardBuckets(s.host, s.card, s.samples, other, s.seat_bytes, s.free_min_bytes))
    return rows


def _unexplained_of_sums(
    used: Mapping[int, float], by_seat: Mapping[str, Mapping[int, float]]
) -> dict[int, float]:
    if not by_seat:
        return {b: max(0.0, v) for b, v in used.items()}
    layers = [[layer.get(b, 0.0) for b in used] for layer in by_seat.values()]
    totals = map(sum, zip(*layers, strict=True))
    return {b: max(0.0, v - t) for (b, v), t in zip(used.items(), totals, strict=True)}
