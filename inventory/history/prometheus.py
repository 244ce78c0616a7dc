"""Prometheus as a history: a host's moments from its exporter's raw samples, and the report's
figures of a window (`*_over_time` answers), through one client. The PromQL lives in
`inventory.prometheus`."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from inventory.history.figures import (
    CardBuckets,
    CardUsage,
    ForeignUsage,
    ReserveBreaches,
    SeatUsage,
    Span,
    breach_points,
    breaches_of,
    card_usage,
    chart_buckets,
    foreign_usage,
    seat_usage,
)
from inventory.history.model import (
    CardHour,
    CardReading,
    CommandHour,
    Moment,
    ProcessReading,
    Rollups,
)
from inventory.history.rollup import hourly
from inventory.ledger.fleet_rooms import DAY_S, DailyRoom
from inventory.prometheus import metrics as m
from inventory.prometheus.hours import (
    HOUR_S,
    HostHours,
    SeriesHours,
    host_hours,
    hour_start,
)
from inventory.prometheus.range import (
    LOOKBACK_S,
    MOMENT_METRICS,
    PERCENTILE_DEFINITION,
    HostSpan,
    Matrix,
    PromClient,
    ReserveSpec,
    WindowAnswers,
    host_queries,
    load_window,
)
from inventory.prometheus.reader import DCGM_FREE, HOST_LABELS, Fleet, host_of, read_fleet
from inventory.prometheus.tiles import (
    HEARTBEAT,
    RULE_DELAY_S,
    newest_evaluation_ms,
    recorded_hours,
    recorded_name,
    tiling,
)
from inventory.snapshot import unix_s, utc

if TYPE_CHECKING:
    from inventory.prometheus.range import _Queries

__all__ = [
    "DCGM_FREE",
    "PERCENTILE_DEFINITION",
    "SNAPSHOT_TIMESTAMP",
    "Fleet",
    "HostSpan",
    "HourBounds",
    "PromClient",
    "PrometheusHistory",
    "PrometheusWindow",
    "ReserveSpec",
]

SNAPSHOT_TIMESTAMP = m.SNAPSHOT_TIMESTAMP
# The series read at each scrape exactly; the rest as an instant query reads them.
_EXACT = (m.SNAPSHOT_TIMESTAMP, m.PROCESS_USED)
# How far a scrape may lie from its snapshot's time and still be found at a window's edge.
MAX_SKEW_S = 3600


class PrometheusHistory:
    """The history gpuplan's exporters left in one Prometheus; the report's figures at `step_s`.

    A moment is one scrape of a host's exporter: the samples Prometheus stored at one time. A
    scrape that saw the same snapshot as the one before (its snapshot time unchanged) adds none.
    """

    # What the exporter's series never carry: the window says so rather than guess it.
    keeps_command_lines = False
    # What keeps the rollups a fleet's window is judged on where raw samples no longer reach.
    recorded_rollups = "hourly rollups recorded by Prometheus (gpuplan rules)"

    def __init__(self, client: PromClient, *, step_s: int = 60, host_label: str | None = None):
        self.client = client
        self.step_s = step_s
        self.host_label = host_label
        # Per host: its series' queries (the label naming it), found once; and the least and
        # most (scrape time − snapshot time) seen, so a read by scrape time finds every
        # snapshot taken in a window however late or early its scrapes came.
        self._queries: dict[str, _Queries] = {}
        self._skew: dict[str, tuple[int, int]] = {}
        self._pool: ThreadPoolExecutor | None = None

    @property
    def shown(self) -> str:
        """The server as messages name it: no credentials, no query string."""
        return self.client.shown

    def moments(
        self, host: str, start: datetime, end: datetime, cards: Sequence[int] | None = None
    ) -> Iterator[Moment]:
        """`host`'s snapshots taken in [start, end), oldest first, each arrived when Prometheus
        first scraped it; with `cards`, each moment holds only those cards (a moment where none
        of them was read is left out)."""
        start_s, end_s = unix_s(start), unix_s(end)
        if end_s <= start_s:
            return
        early, late = self._skew.get(host, (0, 0))
        # A second wider each side: a range selector's left end is closed in Prometheus 2,
        # open in 3; the snapshot times, not the scrape times, choose the moments.
        series = self._moment_series(
            host, start_s + min(0, early) - 1, end_s + max(0, late) + 1, cards
        )
        if not series:
            return
        read = {metric: _Samples(answer) for metric, answer in series.items()}
        only = None if cards is None else frozenset(cards)
        found: list[Moment] = []
        for taken_s, scraped_ms in _first_scrapes(read[m.SNAPSHOT_TIMESTAMP]):
            if not start_s <= taken_s < end_s:
                continue
            readings = _cards(read, scraped_ms)
            if only is not None:
                readings = tuple(c for c in readings if c.card in only)
                if not readings:
                    continue
            arrived = datetime.fromtimestamp(scraped_ms // 1000, UTC)
            found.append(Moment(host, datetime.fromtimestamp(taken_s, UTC), readings, arrived))
        found.sort(key=lambda moment: moment.taken_at)
        yield from found

    def moment_times(
        self, host: str, start: datetime, end: datetime
    ) -> list[tuple[int, int | None]] | None:
        """(taken_at, arrived_at) in epoch seconds of `host`'s snapshots taken in [start, end), in
        time order: the snapshot time's own series (its value is when the exporter read the
        cards, its sample's time when Prometheus scraped them), read once, no card's. A snapshot
        scraped more than MAX_SKEW_S away from its time at the window's edges is not found."""
        start_s, end_s = unix_s(start), unix_s(end)
        if end_s <= start_s:
            return []
        low, high = start_s - MAX_SKEW_S, end_s + MAX_SKEW_S
        q = self._host_queries(host, low, high)
        if q is None:
            return []
        q = replace(q, start_s=low, end_s=high)
        stamps = _Samples(self.client.raw(f"{q.sel(m.SNAPSHOT_TIMESTAMP)}{q.rng}", q.at))
        times: list[tuple[int, int | None]] = []
        early, late = 0, 0
        for taken_s, scraped_ms in _first_scrapes(stamps):
            skew = scraped_ms // 1000 - taken_s
            early, late = min(early, skew), max(late, skew)
            if start_s <= taken_s < end_s:
                times.append((taken_s, scraped_ms // 1000))
        self._skew[host] = (early, late)
        times.sort()
        return times

    def _host_queries(self, host: str, start_s: int, end_s: int) -> _Queries | None:
        """`host`'s series' queries (the label naming it there), found once per history."""
        found = self._queries.get(host)
        if found is None:
            found = host_queries(self.client, host, start_s, end_s, self.host_label)
            if found is not None:  # a host with no series in one window may have some in another
                self._queries[host] = found
        return found

    def _moment_series(
        self, host: str, start_s: int, end_s: int, cards: Sequence[int] | None = None
    ) -> dict[str, Matrix]:
        """The samples of each of MOMENT_METRICS of `host` scraped in [start_s, end_s), by metric
        (its host's queries found once); with `cards`, the card series of those cards only. Two
        queries, each of several metrics (`__name__=~`): the series read at each scrape exactly,
        and the card figures."""
        q = self._host_queries(host, start_s, end_s)
        if q is None:
            return {}
        q = replace(q, start_s=start_s, end_s=end_s)
        # A card's figures from up to Prometheus's lookback before the window too: an instant
        # query at its first moment would find them there.
        wider = f"[{(end_s - start_s + LOOKBACK_S) * 1000 - 1}ms]"
        exact = _names(x for x in MOMENT_METRICS if x in _EXACT)
        figures = _names(x for x in MOMENT_METRICS if x not in _EXACT)
        if cards is not None:
            gpus = "|".join(str(c) for c in sorted(set(cards)))
            # The snapshot time has no card: its empty gpu label matches the trailing `|`.
            exact += f',gpu=~"{gpus}|"'
            figures += f',gpu=~"{gpus}"'
        exprs = [f"{q.sel('', exact)}{q.rng}", f"{q.sel('', figures)}{wider}"]
        if self._pool is None:  # one pool for every read: a window may read many runs of hours
            self._pool = ThreadPoolExecutor(max_workers=len(exprs))
        out: dict[str, Matrix] = {metric: [] for metric in MOMENT_METRICS}
        for answer in self._pool.map(lambda expr: self.client.raw(expr, q.at), exprs):
            for labels, points in answer:
                found = out.get(labels.get("__name__", ""))
                if found is not None:
                    found.append((labels, points))
        return out

    def rollups(self, host: str, start: datetime, end: datetime) -> Rollups:
        """`host`'s hourly rollups of [start, end): `hourly` of its moments, answered from
        `count_over_time`/`min_over_time`/`max_over_time` at `step=1h` where those decide an hour,
        and from the raw moments of the other hours (see `hour_bounds`)."""
        bounds = self.hour_bounds(host, start, end)
        raw = hourly(self.moments_in_hours(host, bounds.raw_hours, start, end))
        return Rollups(
            cards=tuple(sorted((*bounds.cards, *raw.cards), key=_card_order)),
            commands=tuple(sorted((*bounds.commands, *raw.commands), key=_command_order)),
        )

    def hour_bounds(
        self,
        host: str,
        start: datetime,
        end: datetime,
        *,
        undated: bool = False,
        cards: Sequence[int] | None = None,
    ) -> HourBounds:
        """The hours of [start, end) that Prometheus's hourly aggregates decide, as rollups, and
        the hours they cannot decide (`raw_hours`: read them with `moments_in_hours`). With
        `undated`, an hour that lacks only when its extremes fell is given without it; with
        `cards`, of those cards only."""
        start_s, end_s = unix_s(start), unix_s(end)
        if end_s <= start_s:
            return HourBounds((), (), ())
        first, end_hour = hour_start(start_s) - HOUR_S, hour_start(end_s - 1) + HOUR_S
        q = self._host_queries(host, first, end_hour)
        found = host_hours(self.client, host, start_s, end_s, self.host_label, cards, q)
        if found is None:
            return HourBounds((), (), ())
        return decide_hours(found, start_s, end_s, undated=undated)

    def bounds(
        self, host: str, start: datetime, end: datetime, cards: Sequence[int] | None = None
    ) -> Rollups:
        """`host`'s hourly bounds of [start, end) from the aggregates alone, no raw read: each
        hour `hour_bounds` decides, and each hour whose card free or group bytes moved (its
        least and most known, not when: `dated` False); an hour neither is absent; with `cards`,
        of those cards only. What the pruned replay reads first (`placement.fit.week.prune`);
        `rollups` dates every hour."""
        found = self.hour_bounds(host, start, end, undated=True, cards=cards)
        return Rollups(cards=found.cards, commands=found.commands)

    def raw_kept_in(self, start: datetime, end: datetime) -> dict[str, datetime]:
        """host → its first raw snapshot up to `end`, for every host whose raw samples start an
        hour or more after `start` while `gpuplan rules` kept rollups (`ledger --window` judges
        those on the recorded rollups, as the ledger's compacted hosts on theirs); {} where no
        rule recorded anything."""
        end_s = unix_s(end)
        if newest_evaluation_ms(self.client, HEARTBEAT, end_s + RULE_DELAY_S) is None:
            return {}
        labels = (self.host_label,) if self.host_label else (*HOST_LABELS, "instance")
        # Asked MAX_SKEW_S after the end: a snapshot is scraped after it was taken, and its
        # value (when it was taken) is what is compared, so later scrapes change no least.
        span = f"[{(end_s - unix_s(start) + LOOKBACK_S + MAX_SKEW_S) * 1000}ms]"
        found = self.client.instant(
            f"min by ({', '.join(labels)}) (min_over_time({m.SNAPSHOT_TIMESTAMP}{span}))",
            end_s + MAX_SKEW_S,
        )
        out: dict[str, datetime] = {}
        for series, first in found:
            host = host_of(series, self.host_label)
            if host is not None and first >= unix_s(start) + HOUR_S:
                seen = out.get(host)
                out[host] = min(seen, utc(int(first))) if seen else utc(int(first))
        return out

    def daily_rooms(self, windows: Mapping[str, tuple[datetime, datetime]]) -> list[DailyRoom]:
        """For every host of `windows` (host → (start, end)) at once, from the rollups `gpuplan
        rules` recorded: per card and 24 h bucket ending at its end, the least free and the end
        of the recorded hour holding it (the earliest of equals; `dated` False: the hour, not the
        moment), the hours seen and the host's snapshots in them (its samples: a card in error
        at a snapshot is not told apart). Each hour is the rule's own (`inventory.prometheus.
        tiles`: scrape times (e − 1 h, e], e the same millisecond past each clock hour), counted
        in the bucket holding e when e lies in (start, end): the first may begin up to an hour
        before the window, so a least there is counted (never missed); two range queries."""
        if not windows:
            return []
        first = min(unix_s(a) for a, _ in windows.values())
        last = max(unix_s(b) for _, b in windows.values())
        newest = newest_evaluation_ms(self.client, HEARTBEAT, last + RULE_DELAY_S)
        found = None if newest is None else tiling(first - HOUR_S, last, newest)
        if found is None:
            return []
        ask = [recorded_name(m.CARD_FREE, "min"), HEARTBEAT]
        with ThreadPoolExecutor(max_workers=len(ask)) as pool:
            free, stamps = pool.map(lambda name: recorded_hours(self.client, found, name), ask)
        snapshots: dict[str, dict[float, float]] = {}
        for labels, points in stamps:
            host = host_of(labels, self.host_label)
            if host is not None:
                snapshots.setdefault(host, {}).update((e / 1000, v) for e, v in points)
        out: list[DailyRoom] = []
        for labels, points in free:
            host, gpu = host_of(labels, self.host_label), labels.get("gpu", "")
            if host is None or host not in windows or not gpu.isdigit():
                continue
            lows = [(e / 1000, v) for e, v in points]
            out += _daily(host, int(gpu), lows, snapshots.get(host, {}), windows)
        out.sort(key=lambda r: (r.host, r.card, r.day))
        return out

    def moments_in_hours(
        self,
        host: str,
        hours: Iterable[datetime],
        start: datetime | None = None,
        end: datetime | None = None,
    ) -> Iterator[Moment]:
        """`host`'s moments scraped in the given UTC hours (cut to [start, end) when given),
        oldest first: one raw read per run of consecutive hours."""
        for first, stop in _runs(sorted({unix_s(h) for h in hours})):
            low = first if start is None else max(first, unix_s(start))
            high = stop if end is None else min(stop, unix_s(end))
            if low < high:
                yield from self.moments(host, utc(low), utc(high))

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
        charts: bool = True,
    ) -> PrometheusWindow:
        """The report's figures of `hosts` over [start_s, end_s) (see `range.load_window`);
        without `charts`, no chart bucket is asked."""
        answers = load_window(
            self.client, hosts, start_s, end_s, step_s=self.step_s, chart_step_s=chart_step_s,
            segment_s=segment_s, reserves=reserves, running_seats=running_seats,
            lookback_s=lookback_s, card_figures=card_usage, seat_figures=seat_usage,
            host_label=self.host_label, on_spans=on_spans, charts=charts,
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
        return self.answers.seats

    def foreign_usage(self) -> list[ForeignUsage]:
        return foreign_usage(self.answers.foreign, by_command_line=False)

    def reserve_breaches(
        self, host: str, card: int, own: Sequence[str], fixed_bytes: int | None
    ) -> ReserveBreaches:
        readings = self.answers.readings.get((host, card, tuple(own)), [])
        found = self.answers.holders
        return breaches_of(
            breach_points(readings, fixed_bytes),
            lambda: ((n, b) for w, n, b in found if w == (host, card)),
            own,
        )

    def chart_buckets(self, step_s: int) -> list[CardBuckets]:
        return chart_buckets(self.answers.buckets)

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

    def each(self) -> Iterator[tuple[int, float]]:
        """(scraped ms, value) of every sample of every series, oldest first (a host's snapshot
        time is one series, or one per exporter it was scraped from)."""
        merged = [
            (t, v) for _, times, values in self.series for t, v in zip(times, values, strict=True)
        ]
        yield from sorted(merged)

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


def _names(metrics: Iterable[str]) -> str:
    """A matcher of the series of any of `metrics`."""
    return f'__name__=~"{"|".join(metrics)}"'


def _first_scrapes(stamps: _Samples) -> Iterator[tuple[int, int]]:
    """(snapshot time s, scraped ms) of each snapshot at its first scrape, in scrape order: a
    scrape that saw the same snapshot again adds none."""
    seen: set[int] = set()
    for scraped_ms, taken in stamps.each():
        taken_s = round(taken)
        if taken_s not in seen:
            seen.add(taken_s)
            yield taken_s, scraped_ms


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


@dataclass(frozen=True)
class HourBounds:
    """What Prometheus's hourly aggregates decide of a window: whole hours' rollups, and the
    hours whose raw moments are needed instead."""

    cards: tuple[CardHour, ...]
    commands: tuple[CommandHour, ...]
    raw_hours: tuple[datetime, ...]


def decide_hours(
    found: HostHours, start_s: int, end_s: int, *, undated: bool = False
) -> HourBounds:
    """Each hour of [start_s, end_s) as rollups where its aggregates tell exactly what `hourly`
    of its moments would, else listed as raw.

    An hour is decided when it lies whole in the window; each of its scrapes saw a new snapshot
    taken in that hour (and the next hour's first scrape a newer one); every card it shows had
    one used and one free series with a sample at every scrape, and none was in error; the cards
    are those of the hour before (an instant read at the hour's first moment sees those); and
    every seat's (or the unclaimed processes') bytes on a card are one series, present at every
    scrape. The earliest moment of an extreme is the hour's first when the series stayed level;
    a series that moved within the hour needs its raw moments to say when (with `undated`, its
    rollup is given without that: `dated` False).
    """
    series = found.series
    stamps = _one(series.get(m.SNAPSHOT_TIMESTAMP, []))
    per_hour = _by_hour(series)
    cards: list[CardHour] = []
    commands: list[CommandHour] = []
    raw: list[int] = []
    host = found.host
    for hour in range(found.first_hour_s + HOUR_S, found.end_hour_s, HOUR_S):
        n = stamps.count.get(hour, 0) if stamps else 0
        if n == 0 and not _spills_back(stamps, hour + HOUR_S) and not _spills_on(stamps, hour):
            continue  # no moment in this hour
        decided = _decide(host, hour, n, stamps, found.changes, per_hour, start_s, end_s, undated)
        if decided is None:
            raw.append(hour)
            continue
        cards.extend(decided[0])
        commands.extend(decided[1])
    return HourBounds(tuple(cards), tuple(commands), tuple(utc(h) for h in raw))


# Per hour: metric → card index → its series with a sample in that hour.
_PerHour = dict[int, dict[str, dict[int, list[SeriesHours]]]]


def _by_hour(series: Mapping[str, list[SeriesHours]]) -> _PerHour:
    out: _PerHour = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for metric, found in series.items():
        for one in found:
            gpu = one.labels.get("gpu", "")
            if not gpu.isdigit() and metric != m.SNAPSHOT_TIMESTAMP:
                continue
            hours = set(one.count) | set(one.low) | set(one.high)
            for hour in hours:
                out[hour][metric][int(gpu) if gpu.isdigit() else -1].append(one)
    return out


def _one(found: list[SeriesHours]) -> SeriesHours | None:
    """The snapshot time's series (a host has one)."""
    return found[0] if len(found) == 1 else None


def _spills_back(stamps: SeriesHours | None, hour: int) -> bool:
    """Whether a scrape in `hour` carries a snapshot taken before it."""
    return stamps is not None and hour in stamps.low and stamps.low[hour] < hour


def _spills_on(stamps: SeriesHours | None, hour: int) -> bool:
    """Whether a scrape in the hour before `hour` carries a snapshot taken in it or later."""
    return stamps is not None and stamps.high.get(hour - HOUR_S, -1) >= hour


def _decide(
    host: str,
    hour: int,
    n: int,
    stamps: SeriesHours | None,
    changes: Mapping[int, int],
    per_hour: _PerHour,
    start_s: int,
    end_s: int,
    undated: bool = False,
) -> tuple[list[CardHour], list[CommandHour]] | None:
    """One hour's rollups from its aggregates, None where they cannot tell (see `decide_hours`)."""
    if stamps is None or hour < start_s or hour + HOUR_S > end_s:
        return None
    low, high, nxt = stamps.low.get(hour), stamps.high.get(hour), stamps.low.get(hour + HOUR_S)
    if low is None or high is None or low < hour or high >= hour + HOUR_S:
        return None  # a snapshot taken in another hour than the scrape that read it
    if _spills_back(stamps, hour + HOUR_S) or _spills_on(stamps, hour):
        return None  # a snapshot of this hour scraped in the next hour or the one before
    if changes.get(hour, 0) + 1 != n or (nxt is not None and nxt <= high):
        return None  # a snapshot scraped twice
    now, before = per_hour.get(hour, {}), per_hour.get(hour - HOUR_S, {})
    first = utc(round(low))
    cards = _card_hours(host, hour, n, first, now, before, undated)
    if cards is None:
        return None
    commands = _command_hours(host, hour, n, first, now.get(m.PROCESS_USED, {}), cards, undated)
    return None if commands is None else (cards, commands)


def _card_hours(
    host: str,
    hour: int,
    n: int,
    first: datetime,
    now: Mapping[str, Mapping[int, list[SeriesHours]]],
    before: Mapping[str, Mapping[int, list[SeriesHours]]],
    undated: bool = False,
) -> list[CardHour] | None:
    """Each card's hour: read at every scrape, never in error, level free (its first moment is
    then the lowest's); None otherwise, or where the cards differ from the hour before's."""
    used, free, error = (now.get(x, {}) for x in (m.CARD_USED, m.CARD_FREE, m.CARD_ERROR))
    gpus = set(used) | set(free) | set(error)
    earlier = set(before.get(m.CARD_USED, {})) | set(before.get(m.CARD_ERROR, {}))
    if earlier and earlier != gpus:
        return None
    cards: list[CardHour] = []
    for gpu in sorted(gpus):
        if any(e.high.get(hour, 0) > 0 for e in error.get(gpu, [])):
            return None
        (read, left) = used.get(gpu, []), free.get(gpu, [])
        if len(read) != 1 or len(left) != 1:
            return None
        if read[0].count.get(hour) != n or left[0].count.get(hour) != n:
            return None
        lowest, highest = left[0].low[hour], left[0].high[hour]
        level = lowest == highest
        if not level and not undated:
            return None  # when it was lowest needs its moments
        top = round(read[0].high[hour])
        at = first if level else None
        cards.append(CardHour(host, gpu, utc(hour), n, 0, round(lowest), at, top, dated=level))
    return cards


def _command_hours(
    host: str,
    hour: int,
    n: int,
    first: datetime,
    processes: Mapping[int, list[SeriesHours]],
    cards: list[CardHour],
    undated: bool = False,
) -> list[CommandHour] | None:
    """Each seat's (and the unclaimed processes') hour on a card: one series, at every scrape,
    level; None otherwise (several processes are summed per moment, which only moments tell)."""
    gpus = {c.card for c in cards}
    commands: list[CommandHour] = []
    for gpu, found in sorted(processes.items()):
        if gpu not in gpus:
            return None
        # A seat's processes are one group, every unclaimed process of the card another.
        groups: dict[str, list[SeriesHours]] = defaultdict(list)
        for process in found:
            groups[_named(process.labels.get("seat", "")) or ""].append(process)
        for seat, members in sorted(groups.items()):
            if len(members) != 1 or members[0].count.get(hour) != n:
                return None
            one = members[0]
            level = one.low[hour] == one.high[hour]
            if not level and not undated:
                return None
            low, high = round(one.low[hour]), round(one.high[hour])
            commands.append(
                CommandHour(
                    host, gpu, utc(hour), seat or None, None, n, low, first, high, first,
                    dated=level,
                )
            )  # fmt: skip
    return commands


def _named(seat: str) -> str | None:
    return None if seat in ("", m.FOREIGN) else seat


def _card_order(c: CardHour) -> tuple[datetime, str, int]:
    return (c.hour, c.host, c.card)


def _command_order(c: CommandHour) -> tuple[datetime, str, int, str, str]:
    return (c.hour, c.host, c.card, c.seat or "", c.cmdline or "")


def _daily(
    host: str,
    card: int,
    lows: Sequence[tuple[float, float]],
    counts: Mapping[float, float],
    windows: Mapping[str, tuple[datetime, datetime]],
) -> list[DailyRoom]:
    """One card's recorded hours (end, least free; in time order) as `DailyRoom`s of its host's
    window (`PrometheusHistory.daily_rooms`)."""
    start_s, stop_s = (unix_s(x) for x in windows[host])
    # bucket k → [least, the end of its first hour at that least, hours, samples]
    rows: dict[int, list[float]] = {}
    for t, low in lows:
        if t <= start_s or t > stop_s:
            continue
        k = int((stop_s - 1 - t) // DAY_S)
        row = rows.get(k)
        if row is None:
            rows[k] = [low, t, 1, counts.get(t, 0)]
            continue
        if low < row[0]:
            row[0], row[1] = low, t
        row[2] += 1
        row[3] += counts.get(t, 0)
    return [
        DailyRoom(host, card, k, round(r[0]), round(r[1]), int(r[2]), round(r[3]), 0, dated=False)
        for k, r in rows.items()
    ]


def _runs(hours: list[int]) -> Iterator[tuple[int, int]]:
    """[first, end) of each run of consecutive hours (unix seconds, sorted)."""
    i = 0
    while i < len(hours):
        j = i
        while j + 1 < len(hours) and hours[j + 1] == hours[j] + HOUR_S:
            j += 1
        yield hours[i], hours[j] + HOUR_S
        i = j + 1


def _bytes(found: tuple[dict[str, str], float] | None) -> int | None:
    return None if found is None else round(found[1])
