"""The ledger as a history: its stored snapshots as moments, and the report's figures of a window.

Every read is one of `inventory.ledger.report_queries`' functions, or `inventory.ledger.moments`'
(the SQL lives there); the report's are imported where they are read, so that a window's replay
imports only the moments' and the rollups'.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from itertools import groupby
from typing import TYPE_CHECKING

from inventory.history.model import (
    CardHour,
    CardReading,
    CommandHour,
    Moment,
    ProcessReading,
    Rollups,
)
from inventory.history.rollup import HOUR_S, hourly
from inventory.ledger import fleet_rooms as fleet
from inventory.ledger import moments as raw
from inventory.ledger import rollups as stored
from inventory.ledger.moments import Connection
from inventory.snapshot import unix_s, utc

if TYPE_CHECKING:
    from inventory.history.figures import (
        CardBuckets,
        CardPart,
        CardUsage,
        DecisionRow,
        ForeignUsage,
        Part,
        ReserveBreaches,
        SeatKey,
        SeatOf,
        SeatUsage,
        Span,
    )

__all__ = ["Connection", "LedgerHistory", "LedgerWindow"]


# A stored second as a UTC datetime (`utc`); the same few thousand (a week's hours and minutes)
# come back for every card and host of a fleet, each made once.
_utc = lru_cache(maxsize=1 << 16)(utc)


class LedgerHistory:
    """The history a ledger holds, read through its open connection."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    # --- moments and rollups ---------------------------------------------------------------

    def hosts(self, start: datetime, end: datetime) -> list[str]:
        """The hosts with a moment in [start, end), sorted."""
        return [host for host, _ in self.newest_per_host(unix_s(start), unix_s(end))]

    def moments(
        self, host: str, start: datetime, end: datetime, cards: Sequence[int] | None = None
    ) -> Iterator[Moment]:
        """`host`'s snapshots taken in [start, end), oldest first; with `cards`, each moment
        holds only those cards (a moment where none of them was stored is left out)."""
        rows, processes = raw.moment_rows(self.connection, host, unix_s(start), unix_s(end), cards)
        arrived = stored.arrivals(self.connection, host, unix_s(start), unix_s(end))
        by_card: dict[tuple[int, int], list[ProcessReading]] = {}
        for taken_s, idx, pid, used, cmdline, seat in processes:
            by_card.setdefault((taken_s, idx), []).append(ProcessReading(pid, used, cmdline, seat))
        for taken_s, same in groupby(rows, key=lambda row: row[0]):
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
                    for _, idx, total, reserved, used, free, error in same
                ),
                None if (came := arrived.get(taken_s)) is None else _utc(came),
            )

    def moment_times(
        self, host: str, start: datetime, end: datetime
    ) -> list[tuple[int, int | None]] | None:
        """(taken_at, arrived_at or None) in epoch seconds of `host`'s snapshots taken in
        [start, end), in time order: what a replay from rollups needs of every moment. None
        where the ledger keeps no rollups (a read-only one from before them): read the moments."""
        if not stored.has_rollups(self.connection):
            return None
        return raw.moment_times(self.connection, host, unix_s(start), unix_s(end))

    def rollups(self, host: str, start: datetime, end: datetime) -> Rollups:
        """`host`'s hourly rollups of [start, end): the stored ones of the whole hours inside it,
        `hourly` of the moments of a part-hour at either end. A part-hour whose raw moments
        `compact` removed is answered by its whole hour's stored rollup (see `raw_since`)."""
        if not stored.has_rollups(self.connection):  # a read-only ledger from before rollups
            return hourly(self.moments(host, start, end))
        start_s, end_s = unix_s(start), unix_s(end)
        if start_s >= end_s:
            return Rollups((), ())
        raw = stored.raw_since(self.connection, host)
        low, high = start_s - start_s % HOUR_S, -(-end_s // HOUR_S) * HOUR_S

        def edge(hour: int) -> Rollups | None:
            """A part-hour's rollups from its moments; None: take the hour's stored rollup."""
            part_start, part_end = max(start_s, hour), min(end_s, hour + HOUR_S)
            if (part_start, part_end) == (hour, hour + HOUR_S) or (raw is not None and hour < raw):
                return None
            return hourly(self.moments(host, _utc(part_start), _utc(part_end)))

        head = edge(low)
        tail = edge(high - HOUR_S) if high - HOUR_S > low else None
        first = low + HOUR_S if head is not None else low
        last = high - HOUR_S if tail is not None else high
        parts = [part for part in (head, tail) if part is not None]
        if first < last:
            parts.insert(1 if head is not None else 0, self._stored(host, first, last))
        return Rollups(
            tuple(c for part in parts for c in part.cards),
            tuple(c for part in parts for c in part.commands),
        )

    def _stored(self, host: str, first_s: int, end_s: int) -> Rollups:
        """The stored rollups of the whole hours in [first_s, end_s)."""
        return Rollups(
            tuple(
                CardHour(r.host, r.card, _utc(r.hour_s), r.samples, r.error_samples,
                         r.min_free_bytes, _at(r.min_free_at_s), r.max_used_bytes)
                for r in stored.card_hours(self.connection, host, first_s, end_s)
            ),
            tuple(
                CommandHour(r.host, r.card, _utc(r.hour_s), r.seat or None, r.cmdline or None,
                            r.samples, r.min_bytes, _utc(r.min_at_s), r.max_bytes, _utc(r.max_at_s))
                for r in stored.command_hours(self.connection, host, first_s, end_s)
            ),
        )  # fmt: skip

    def daily_rooms(
        self, windows: Mapping[str, tuple[datetime, datetime]]
    ) -> list[fleet.DailyRoom]:
        """For every host of `windows` (host → (start, end)) at once: its cards' stored hours
        starting in [start, end), by 24 h bucket ending at its end (least free and when, hours
        and samples seen): a fleet's window judged on its hourly rollups, in one query."""
        return fleet.daily_rooms(
            self.connection,
            [(host, unix_s(a), unix_s(b)) for host, (a, b) in sorted(windows.items())],
        )

    def raw_kept(self) -> dict[str, datetime]:
        """host → from when its raw moments are kept, for every host `compact` thinned."""
        return {host: _utc(s) for host, s in fleet.raw_kept(self.connection).items()}

    def raw_since(self, host: str) -> datetime | None:
        """From when `host`'s raw moments are kept: a window starting before it was judged on
        hourly rollups there (`gpuplan compact`); None when none was ever removed."""
        found = stored.raw_since(self.connection, host)
        return None if found is None else _utc(found)

    # --- the ledger's own records ----------------------------------------------------------

    def span(self) -> Span | None:
        """First and last snapshot time and count of the whole ledger, None when it holds none."""
        from inventory.ledger import report_queries as q

        return q.ledger_span(self.connection)

    def newest_per_host(self, start_s: int, end_s: int) -> list[tuple[str, int]]:
        """(host, time of its newest snapshot in [start_s, end_s)), by host."""
        from inventory.ledger import report_queries as q

        return q.newest_per_host(self.connection, start_s, end_s)

    def newest_decision_s(self) -> int | None:
        from inventory.ledger import report_queries as q

        return q.newest_decision_s(self.connection)

    def decisions(self, start_s: int, end_s: int) -> list[DecisionRow]:
        """Decisions taken in [start_s, end_s), oldest first."""
        from inventory.ledger import report_queries as q

        return q.decisions_in(self.connection, start_s, end_s)

    def window(self, start_s: int, end_s: int, seat_of: SeatOf) -> LedgerWindow | None:
        """The report's figures of [start_s, end_s), None when it holds no snapshot.

        A process whose seat was not recorded at capture is attributed by `seat_of`.
        """
        from inventory.ledger import report_queries as q

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
        from inventory.history.figures import card_usage

        return card_usage(_LedgerCards(self.connection))

    def seat_usage(self, first_s: int, last_s: int, segment_s: int) -> list[SeatUsage]:
        from inventory.history.figures import seat_usage

        return seat_usage(_LedgerSeats(self.connection), first_s, last_s, segment_s)

    def foreign_usage(self) -> list[ForeignUsage]:
        from inventory.history.figures import foreign_usage
        from inventory.ledger import report_queries as q

        return foreign_usage(q.foreign_processes(self.connection), by_command_line=True)

    def reserve_breaches(
        self, host: str, card: int, own: Sequence[str], fixed_bytes: int | None
    ) -> ReserveBreaches:
        from inventory.history.figures import breach_points, breaches_of
        from inventory.ledger import report_queries as q

        readings = q.reserve_readings(self.connection, host, card, own)
        return breaches_of(
            breach_points(readings, fixed_bytes),
            lambda: q.holders_on(self.connection, host, card),
            own,
        )

    def chart_buckets(self, step_s: int) -> list[CardBuckets]:
        from inventory.history.figures import chart_buckets
        from inventory.ledger import report_queries as q

        return chart_buckets(q.chart_sums(self.connection, step_s))

    def window_hosts(self) -> set[str]:
        # Asked several times by one report: queried once and remembered.
        if self._hosts is None:
            from inventory.ledger import report_queries as q

            self._hosts = frozenset(q.window_hosts(self.connection))
        return set(self._hosts)

    def last_sighting(self, host: str, seat: str, before_s: int, after_s: int) -> int | None:
        from inventory.ledger import report_queries as q

        return q.last_sighting(self.connection, host, seat, before_s, after_s)


class _LedgerCards:
    """The ledger's answers to `figures.card_usage`'s questions (`figures.CardSource`), in SQL."""

    def __init__(self, connection: Connection) -> None:
        from inventory.ledger import report_queries

        self.q = report_queries
        self.connection = connection

    def card_parts(self) -> list[CardPart]:
        return self.q.card_parts(self.connection)

    def first_lowest_free(
        self, wanted: Mapping[tuple[str, int], tuple[int, int, int]]
    ) -> dict[tuple[str, int], int]:
        return self.q.first_lowest_free(self.connection, wanted)

    def used_at_ranks(
        self, wanted: Mapping[tuple[str, int], tuple[int, Sequence[int]]]
    ) -> dict[tuple[str, int], tuple[int, ...]]:
        return self.q.used_at_ranks(self.connection, wanted)

    def nvml_v1_cards(self) -> set[tuple[str, int]]:
        return self.q.nvml_v1_cards(self.connection)

    def unexplained_max(self) -> dict[tuple[str, int], tuple[int | None, int | None]]:
        return dict(self.q.unexplained_max(self.connection))


class _LedgerSeats:
    """The ledger's answers to `figures.seat_usage`'s questions (`figures.SeatSource`), in SQL."""

    def __init__(self, connection: Connection) -> None:
        from inventory.ledger import report_queries

        self.q = report_queries
        self.connection = connection

    def seat_counts(self, parts: Sequence[Part]) -> list[dict[SeatKey, tuple[int, int]]]:
        return self.q.seat_counts(self.connection, parts)

    def seat_at_ranks(
        self, asks: Sequence[tuple[Part, Mapping[SeatKey, tuple[int, Sequence[int]]]]]
    ) -> list[dict[SeatKey, tuple[int, ...]]]:
        return self.q.seat_at_ranks(self.connection, asks)


def _at(seconds: int | None) -> datetime | None:
    return None if seconds is None else _utc(seconds)
