"""Where the report's aggregates over a window come from: the SQLite ledger, or Prometheus.

Both answer with `inventory.ledger.report_queries`' row types, so `figures` builds one `Report`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from inventory.ledger import report_queries as q
from inventory.ledger.report_queries import (
    CardBuckets,
    CardUsage,
    Connection,
    ForeignUsage,
    ReserveBreaches,
    SeatUsage,
    Span,
)


class WindowSource(Protocol):
    """The window's aggregates (see `inventory.ledger.report_queries` for each one's meaning)."""

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


class LedgerSource:
    """The ledger's aggregates over [start_s, end_s), after `report_queries.prepare_window`.

    The span and the window's hosts are asked several times by one report (and by the
    catalogue bound); each is queried once and remembered.
    """

    def __init__(self, conn: Connection, start_s: int, end_s: int) -> None:
        self.conn = conn
        self.start_s = start_s
        self.end_s = end_s
        self._span: tuple[Span | None] | None = None
        self._hosts: frozenset[str] | None = None

    def span(self) -> Span | None:
        if self._span is None:
            self._span = (q.window_span(self.conn, self.start_s, self.end_s),)
        return self._span[0]

    def card_usage(self) -> list[CardUsage]:
        return q.card_usage(self.conn)

    def seat_usage(self, first_s: int, last_s: int, segment_s: int) -> list[SeatUsage]:
        return q.seat_usage(self.conn, first_s, last_s, segment_s)

    def foreign_usage(self) -> list[ForeignUsage]:
        return q.foreign_usage(self.conn)

    def reserve_breaches(
        self, host: str, card: int, own: Sequence[str], fixed_bytes: int | None
    ) -> ReserveBreaches:
        return q.reserve_breaches(self.conn, host, card, own, fixed_bytes)

    def chart_buckets(self, step_s: int) -> list[CardBuckets]:
        return q.chart_buckets(self.conn, step_s)

    def window_hosts(self) -> set[str]:
        if self._hosts is None:
            self._hosts = frozenset(q.window_hosts(self.conn))
        return set(self._hosts)

    def last_sighting(self, host: str, seat: str, before_s: int, after_s: int) -> int | None:
        return q.last_sighting(self.conn, host, seat, before_s, after_s)


class CatalogueBound:
    """Another source's aggregates of the catalogue's hosts only (DESIGN.md "Fleets")."""

    def __init__(self, source: WindowSource, hosts: frozenset[str]) -> None:
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
