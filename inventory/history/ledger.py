"""The ledger as a history: its stored snapshots as moments, and the report's figures of a window.

Every read is one of `inventory.ledger.report_queries`' functions (the SQL lives there).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from itertools import groupby

from inventory.history.figures import (
    CardBuckets,
    CardUsage,
    DecisionRow,
    ForeignUsage,
    ReserveBreaches,
    SeatOf,
    SeatUsage,
    Span,
    breaches_of,
    seat_rows,
)
from inventory.history.model import CardReading, Moment, ProcessReading, Rollups
from inventory.history.rollup import hourly
from inventory.ledger import report_queries as q
from inventory.ledger.report_queries import Connection

__all__ = ["Connection", "LedgerHistory", "LedgerWindow"]


def _utc(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


class LedgerHistory:
    """The history a ledger holds, read through its open connection."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    # --- moments and rollups ---------------------------------------------------------------

    def hosts(self, start: datetime, end: datetime) -> list[str]:
        """The hosts with a moment in [start, end), sorted."""
        return [host for host, _ in self.newest_per_host(_s(start), _s(end))]

    def moments(self, host: str, start: datetime, end: datetime) -> Iterator[Moment]:
        """`host`'s snapshots taken in [start, end), oldest first."""
        cards, processes = q.moment_rows(self.connection, host, _s(start), _s(end))
        by_card: dict[tuple[int, int], list[ProcessReading]] = {}
        for taken_s, idx, pid, used, cmdline, seat in processes:
            by_card.setdefault((taken_s, idx), []).append(ProcessReading(pid, used, cmdline, seat))
        for taken_s, rows in groupby(cards, key=lambda row: row[0]):
            yield Moment(
                host,
                _utc(taken_s),
                tuple(
                    CardReading(
                        idx,
                        total,
                        reserved,
                        used,
                        free,
                        error,
                        tuple(by_card.get((taken_s, idx), ())),
                    )
                    for _, idx, total, reserved, used, free, error in rows
                ),
            )

    def rollups(self, host: str, start: datetime, end: datetime) -> Rollups:
        """`host`'s hourly rollups of [start, end) (computed from its moments)."""
        return hourly(self.moments(host, start, end))

    # --- the ledger's own records ----------------------------------------------------------

    def span(self) -> Span | None:
        """First and last snapshot time and count of the whole ledger, None when it holds none."""
        return q.ledger_span(self.connection)

    def newest_per_host(self, start_s: int, end_s: int) -> list[tuple[str, int]]:
        """(host, time of its newest snapshot in [start_s, end_s)), by host."""
        return q.newest_per_host(self.connection, start_s, end_s)

    def newest_decision_s(self) -> int | None:
        return q.newest_decision_s(self.connection)

    def decisions(self, start_s: int, end_s: int) -> list[DecisionRow]:
        """Decisions taken in [start_s, end_s), oldest first."""
        return q.decisions_in(self.connection, start_s, end_s)

    def window(self, start_s: int, end_s: int, seat_of: SeatOf) -> LedgerWindow | None:
        """The report's figures of [start_s, end_s), None when it holds no snapshot.

        A process whose seat was not recorded at capture is attributed by `seat_of`.
        """
        span = q.window_span(self.connection, start_s, end_s)
        if span is None:
            return None
        q.prepare_window(self.connection, start_s, end_s, seat_of)
        return LedgerWindow(self.connection, span)


class LedgerWindow:
    """The report's figures of one window of the ledger (`figures.WindowFigures`)."""

    def __init__(self, connection: Connection, span: Span) -> None:
        self.connection = connection
        self._span = span
        self._hosts: frozenset[str] | None = None

    def span(self) -> Span | None:
        return self._span

    def card_usage(self) -> list[CardUsage]:
        return q.card_usage(self.connection)

    def seat_usage(self, first_s: int, last_s: int, segment_s: int) -> list[SeatUsage]:
        return seat_rows(*q.seat_stats(self.connection, first_s, last_s, segment_s))

    def foreign_usage(self) -> list[ForeignUsage]:
        return q.foreign_usage(self.connection)

    def reserve_breaches(
        self, host: str, card: int, own: Sequence[str], fixed_bytes: int | None
    ) -> ReserveBreaches:
        points = q.breach_points(self.connection, host, card, own, fixed_bytes)
        return breaches_of(points, lambda: q.holders_on(self.connection, host, card), own)

    def chart_buckets(self, step_s: int) -> list[CardBuckets]:
        return q.chart_buckets(self.connection, step_s)

    def window_hosts(self) -> set[str]:
        # Asked several times by one report: queried once and remembered.
        if self._hosts is None:
            self._hosts = frozenset(q.window_hosts(self.connection))
        return set(self._hosts)

    def last_sighting(self, host: str, seat: str, before_s: int, after_s: int) -> int | None:
        return q.last_sighting(self.connection, host, seat, before_s, after_s)


def _s(moment: datetime) -> int:
    return int(moment.timestamp())
