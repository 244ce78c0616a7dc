"""Prometheus as a history: a host's moments from its exporter's raw samples, and the report's
figures of a window (`*_over_time` answers), through one client. The PromQL lives in
`inventory.prometheus`."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta

from inventory.history.figures import (
    CardBuckets,
    CardUsage,
    ForeignUsage,
    ReserveBreaches,
    SeatUsage,
    Span,
    breaches_of,
    seat_rows,
)
from inventory.history.model import CardReading, Moment, ProcessReading, Rollups
from inventory.history.rollup import hourly
from inventory.prometheus import metrics as m
from inventory.prometheus.range import (
    LOOKBACK_S,
    PERCENTILE_DEFINITION,
    HostSpan,
    Matrix,
    PromClient,
    ReserveSpec,
    WindowAnswers,
    load_window,
    moment_series,
)
from inventory.prometheus.reader import DCGM_FREE, Fleet, read_fleet

__all__ = [
    "DCGM_FREE",
    "PERCENTILE_DEFINITION",
    "SNAPSHOT_TIMESTAMP",
    "Fleet",
    "HostSpan",
    "PromClient",
    "PrometheusHistory",
    "PrometheusWindow",
    "ReserveSpec",
]

SNAPSHOT_TIMESTAMP = m.SNAPSHOT_TIMESTAMP


class PrometheusHistory:
    """The history gpuplan's exporters left in one Prometheus; the report's figures at `step_s`.

    A moment is one scrape of a host's exporter: the samples Prometheus stored at one time. A
    scrape that saw the same snapshot as the one before (its snapshot time unchanged) adds none.
    """

    def __init__(self, client: PromClient, *, step_s: int = 60, host_label: str | None = None):
        self.client = client
        self.step_s = step_s
        self.host_label = host_label

    @property
    def shown(self) -> str:
        """The server as messages name it: no credentials, no query string."""
        return self.client.shown

    def moments(self, host: str, start: datetime, end: datetime) -> Iterator[Moment]:
        """`host`'s snapshots seen in [start, end), oldest first."""
        series = moment_series(self.client, host, _s(start), _s(end), self.host_label)
        if not series:
            return
        read = {metric: _Samples(answer) for metric, answer in series.items()}
        seen: set[int] = set()
        for _, scraped_ms, taken in read[m.SNAPSHOT_TIMESTAMP].each():
            taken_s = round(taken)
            if taken_s in seen:
                continue
            seen.add(taken_s)
            yield Moment(host, datetime.fromtimestamp(taken_s, UTC), _cards(read, scraped_ms))

    def rollups(self, host: str, start: datetime, end: datetime) -> Rollups:
        """`host`'s hourly rollups of [start, end) (computed from its moments)."""
        return hourly(self.moments(host, start, end))

    def window(
        self,
        hosts: list[str],
        start_s: int,
        end_s: int,
        *,
        chart_step_s: Callable[[int], int],
        segment_s: Callable[[int, int], int],
        reserves: Sequence[ReserveSpec],
        running_seats: Sequence[tuple[str, str]],
        lookback_s: int,
        on_spans: Callable[[dict[str, HostSpan]], None] | None = None,
    ) -> PrometheusWindow:
        """The report's figures of `hosts` over [start_s, end_s) (see `range.load_window`)."""
        answers = load_window(
            self.client, hosts, start_s, end_s, step_s=self.step_s, chart_step_s=chart_step_s,
            segment_s=segment_s, reserves=reserves, running_seats=running_seats,
            lookback_s=lookback_s, host_label=self.host_label, on_spans=on_spans,
        )  # fmt: skip
        return PrometheusWindow(answers)

    def latest(
        self, at: datetime, *, max_age: timedelta, expected_cards: Mapping[str, int]
    ) -> Fleet:
        """Every host's snapshot at `at`, as `plan --prometheus` reads it."""
        client = self.client
        return read_fleet(
            client.base, now=at, max_age=max_age, expected_cards=expected_cards,
            timeout=client.timeout, opener=client.opener, host_label=self.host_label,
        )  # fmt: skip


class PrometheusWindow:
    """The report's figures of one window (`figures.WindowFigures`) from Prometheus's answers."""

    def __init__(self, answers: WindowAnswers) -> None:
        self.answers = answers
        self.hosts = answers.hosts
        self.ignored = answers.ignored

    def span(self) -> Span | None:
        spans = list(self.hosts.values())
        if not spans:
            return None
        first, last = min(h.first_s for h in spans), max(h.last_s for h in spans)
        return Span(first, last, sum(h.samples for h in spans))

    def card_usage(self) -> list[CardUsage]:
        return self.answers.cards

    def seat_usage(self, first_s: int, last_s: int, segment_s: int) -> list[SeatUsage]:
        found = self.answers
        return seat_rows(found.seats_all, found.seats_first, found.seats_last)

    def foreign_usage(self) -> list[ForeignUsage]:
        return self.answers.foreign

    def reserve_breaches(
        self, host: str, card: int, own: Sequence[str], fixed_bytes: int | None
    ) -> ReserveBreaches:
        points = self.answers.breaches.get((host, card, tuple(own)), [])
        found = self.answers.holders
        return breaches_of(points, lambda: ((n, b) for w, n, b in found if w == (host, card)), own)

    def chart_buckets(self, step_s: int) -> list[CardBuckets]:
        return self.answers.buckets

    def window_hosts(self) -> set[str]:
        return set(self.hosts)

    def last_sighting(self, host: str, seat: str, before_s: int, after_s: int) -> int | None:
        return self.answers.sightings.get((host, seat))


# An instant query finds a series' newest sample this recent (Prometheus's default lookback).
_LOOKBACK_MS = LOOKBACK_S * 1000


class _Samples:
    """One metric's series of one host, each sample at the time (ms) it was scraped."""

    def __init__(self, answer: Matrix) -> None:
        self.series = [
            (dict(labels), [round(t * 1000) for t, _ in points], [v for _, v in points])
            for labels, points in answer
        ]

    def each(self) -> Iterator[tuple[dict[str, str] | None, int, float]]:
        """Every sample of the (one) series, oldest first."""
        for labels, times, values in self.series[:1]:
            yield from zip([labels] * len(times), times, values, strict=True)

    def at(self, scraped_ms: int) -> list[tuple[dict[str, str], float]]:
        """Each series' sample of that very scrape (a process that ended has none)."""
        out = []
        for labels, times, values in self.series:
            i = bisect_left(times, scraped_ms)
            if i < len(times) and times[i] == scraped_ms:
                out.append((labels, values[i]))
        return out

    def latest(self, scraped_ms: int) -> list[tuple[dict[str, str], float, int]]:
        """Each series' newest sample at or before the scrape, within the lookback, as an instant
        query at that time reads it (an exporter may send a constant figure less often)."""
        out = []
        for labels, times, values in self.series:
            i = bisect_right(times, scraped_ms) - 1
            if i >= 0 and scraped_ms - times[i] < _LOOKBACK_MS:
                out.append((labels, values[i], times[i]))
        return out


def _cards(read: dict[str, _Samples], scraped_ms: int) -> tuple[CardReading, ...]:
    """Every card the host's series show at one scrape, by index."""

    def by_card(metric: str) -> dict[int, tuple[dict[str, str], float]]:
        # Of several series of a card (its error label changed), the newest sample tells.
        newest: dict[int, tuple[dict[str, str], float, int]] = {}
        for labels, value, when in read[metric].latest(scraped_ms):
            gpu = labels.get("gpu", "")
            if gpu.isdigit() and (int(gpu) not in newest or when > newest[int(gpu)][2]):
                newest[int(gpu)] = (labels, value, when)
        return {gpu: (labels, value) for gpu, (labels, value, _) in newest.items()}

    total, reserved = by_card(m.CARD_TOTAL), by_card(m.CARD_RESERVED)
    used, free, error = by_card(m.CARD_USED), by_card(m.CARD_FREE), by_card(m.CARD_ERROR)
    processes: dict[int, list[ProcessReading]] = defaultdict(list)
    for labels, value in read[m.PROCESS_USED].at(scraped_ms):
        gpu, seat = labels.get("gpu", ""), labels.get("seat", "")
        if gpu.isdigit():
            pid = int(labels.get("pid", "0") or 0)
            named = None if seat in ("", m.FOREIGN) else seat
            processes[int(gpu)].append(ProcessReading(pid, round(value), None, named))
    cards: list[CardReading] = []
    for index in sorted(set(used) | set(error)):
        failed = error.get(index)
        if failed is not None and failed[1] >= 1:
            text = failed[0].get("error") or "error"
            cards.append(CardReading(index, None, None, None, None, text))
            continue
        cards.append(
            CardReading(
                index,
                _bytes(total.get(index)),
                _bytes(reserved.get(index)),
                _bytes(used.get(index)),
                _bytes(free.get(index)),
                None,
                tuple(sorted(processes.get(index, ()), key=lambda p: p.pid)),
            )
        )
    return tuple(cards)


def _bytes(found: tuple[dict[str, str], float] | None) -> int | None:
    return None if found is None else round(found[1])


def _s(moment: datetime) -> int:
    return int(moment.timestamp())
