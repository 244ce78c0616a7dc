"""The PromQL of the history: a host's moments from its raw samples, and the report's answers over
a window from range and `*_over_time` queries (`inventory.history.prometheus` reads both).

Rows are `inventory.ledger.report_queries`' types, so the report is built and rendered by the same
code from either source. Percentiles are nearest-rank, as the ledger's (`kth_samples`).
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, NoReturn, TypeVar

from inventory.ledger.report_queries import (
    CardPart,
    CardUsage,
    ChartSums,
    ForeignProcess,
    ReserveReading,
    SeatUsage,
)
from inventory.prometheus import metrics as m
from inventory.prometheus.reader import (
    DCGM_FREE,
    DCGM_USED,
    HOST_LABELS,
    MIB,
    Opener,
    api_url,
    check_url,
    fetch,
    host_of,
    public_url,
    successful_answer,
    urlopen_json,
)
from inventory.prometheus.tiles import (
    HEARTBEAT,
    HOUR_MS,
    RULE_DELAY_S,
    Tiling,
    check,
    newest_evaluation_ms,
    recorded_hours,
    recorded_name,
    tiling,
    window_figure,
)
from seats.errors import CannotDecideError

__all__ = [
    "PERCENTILE_DEFINITION",
    "HostSpan",
    "PromClient",
    "QueryStats",
    "ReserveSpec",
    "WindowAnswers",
    "load_window",
]

PERCENTILE_DEFINITION = (
    "nearest-rank: the p-th percentile of N samples sorted ascending is the sample at rank "
    "ceil(p/100 × N), counting from 1 — always a value Prometheus really stored (for a seat "
    "with several processes on a card, their sum at a query step)"
)
# Threads waiting on answers at once (the client bounds the queries in flight).
_JOBS = 32
# Prometheus refuses a range query of more points than this per series; longer ones are split.
MAX_POINTS = 10_000
_SEATED = f'seat!="{m.FOREIGN}"'  # processes some seat's `match` claims
# What Prometheus says when --query.max-samples is too low for a query.
_TOO_MANY = "too many samples"

Labels = Mapping[str, str]
Vector = list[tuple[Labels, float]]
Matrix = list[tuple[Labels, list[tuple[float, float]]]]
# A part of the window, [start, end) in unix seconds; None: the whole window.
Part = tuple[int, int] | None
# (host, card, seat), and a process series of one: (host, card, seat, pid).
# One series of a range answer as read: its labels and its [time, "value"] points.
RawSeries = tuple[Labels, Sequence[Sequence[Any]]]


@dataclass
class QueryStats:
    """How many queries were sent and the seconds spent waiting for their answers."""

    queries: int = 0
    wait_s: float = 0.0  # summed over queries (they may run in parallel)
    points: int = 0
    slowest: list[tuple[float, str]] = field(default_factory=list)

    def add(self, seconds: float, points: int, promql: str = "") -> None:
        self.queries += 1
        self.wait_s += seconds
        self.points += points
        self.slowest = sorted([*self.slowest, (seconds, promql)], reverse=True)[:5]


@dataclass
class PromClient:
    """Instant and range queries against one Prometheus, with messages that name the query."""

    base: str
    window_text: str = "the window"
    timeout: float = 60.0
    opener: Opener = urlopen_json
    stats: QueryStats = field(default_factory=QueryStats)
    # Queries in flight at once: Prometheus spreads one query over one core, and more at once
    # than it has cores only share them.
    in_flight: int = 8
    _slots: threading.BoundedSemaphore = field(init=False, repr=False, compare=False)
    shown: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._slots = threading.BoundedSemaphore(self.in_flight)
        # What messages and the report name: never the URL's credentials or query string.
        self.shown = public_url(self.base)

    def instants(self, exprs: Sequence[str], at_s: float) -> list[Vector]:
        """`instant` of each of `exprs`, asked at once (`in_flight` bounds them), in order."""
        if len(exprs) < 2:
            return [self.instant(expr, at_s) for expr in exprs]
        with ThreadPoolExecutor(max_workers=len(exprs)) as pool:
            return list(pool.map(lambda expr: self.instant(expr, at_s), exprs))

    def instant(self, promql: str, at_s: float) -> Vector:
        """The instant vector of `promql` evaluated at `at_s` (unix seconds)."""
        data = self._get("query", {"query": promql, "time": f"{at_s:.3f}"}, promql)
        if data.get("resultType") != "vector":
            raise CannotDecideError(
                f"Prometheus at {self.shown}: query {promql} did not return an instant vector"
            )
        out: Vector = []
        for series in data.get("result", []):
            labels, value = self._point(series, "value", promql)
            if not math.isnan(value):
                out.append((labels, value))
        return out

    def range(self, promql: str, start_s: float, end_s: float, step_s: float) -> Matrix:
        """The range answer of `promql` from `start_s` to `end_s`, split into MAX_POINTS pieces."""
        merged: dict[tuple[tuple[str, str], ...], list[tuple[float, float]]] = defaultdict(list)
        names: dict[tuple[tuple[str, str], ...], Labels] = {}
        # Series share their times, and many their values: each text is converted once.
        floats = _Floats()
        piece = step_s * (MAX_POINTS - 1)
        begin = start_s
        while begin <= end_s:
            stop = min(end_s, begin + piece)
            params = {
                "query": promql,
                "start": f"{begin:.3f}",
                "end": f"{stop:.3f}",
                "step": f"{step_s:g}",
            }
            for labels, values in self._series(params, promql):
                key = tuple(sorted(labels.items()))
                names[key] = labels
                merged[key] += self._points(values, floats, promql)
            begin = stop + step_s
        return [(names[key], points) for key, points in merged.items()]

    def raw(self, promql: str, at_s: float) -> Matrix:
        """The samples a range selector (`metric{…}[range]`) holds, asked at `at_s`, each at the
        time it was scraped (no step, no lookback)."""
        floats = _Floats()
        params = {"query": promql, "time": f"{at_s:.3f}"}
        found = self._series(params, promql, "query")
        return [(labels, self._points(values, floats, promql)) for labels, values in found]

    def _series(
        self, params: dict[str, str], promql: str, path: str = "query_range"
    ) -> list[RawSeries]:
        """The series of one matrix answer (read by `json`), each with its [time, "value"] points."""
        url = api_url(self.base, path, params)
        with self._slots:
            started = time.perf_counter()
            body = fetch(self.base, url, promql, timeout=self.timeout, opener=self.opener)
        data = self._answer(body, promql)
        result = data.get("result", [])
        if data.get("resultType") != "matrix" or not isinstance(result, list):
            raise CannotDecideError(
                f"Prometheus at {self.shown}: query {promql} did not return a range matrix"
            )
        found: list[RawSeries] = []
        for series in result:
            if not isinstance(series, dict) or not isinstance(series.get("metric"), dict):
                self._malformed(promql, series)
            values = series.get("values", [])
            if not isinstance(values, list):
                self._malformed(promql, series)
            found.append((series["metric"], values))
        self.stats.add(time.perf_counter() - started, len(found), promql)
        return found

    def _points(
        self, values: Sequence[Sequence[Any]], floats: _Floats, promql: str
    ) -> list[tuple[float, float]]:
        """One series' [time, "value"] pairs as floats, NaN left out (no reading then)."""
        try:
            return [(floats[t], floats[v]) for t, v in values if v != "NaN"]
        except (TypeError, ValueError) as exc:
            self._malformed(promql, values, exc)

    def _malformed(self, promql: str, part: Any, cause: Exception | None = None) -> NoReturn:
        raise CannotDecideError(
            f"Prometheus at {self.shown}: query {promql} returned a malformed series: {part!r:.200}"
        ) from cause

    def _point(self, series: Any, key: str, promql: str) -> tuple[Labels, float]:
        try:
            _, value = series[key]
            return series["metric"], float(value)
        except (KeyError, TypeError, ValueError) as exc:
            self._malformed(promql, series, exc)

    def _get(self, path: str, params: dict[str, str], promql: str) -> dict[str, Any]:
        url = api_url(self.base, path, params)
        with self._slots:
            started = time.perf_counter()
            body = fetch(self.base, url, promql, timeout=self.timeout, opener=self.opener)
        data = self._answer(body, promql)
        self.stats.add(time.perf_counter() - started, len(data.get("result", [])), promql)
        return data

    def _answer(self, body: bytes, promql: str) -> dict[str, Any]:
        def refused(error: str) -> None:
            if _TOO_MANY in error:
                raise CannotDecideError(
                    f"Prometheus at {self.shown} refused {promql}: {error}. Its --query.max-samples "
                    f"is too low for {self.window_text}: pass a shorter window (e.g. --since 2d) "
                    "or a larger --step (e.g. --step 5m), or raise --query.max-samples"
                )

        result = successful_answer(body, self.base, promql, refused).get("data")
        if not isinstance(result, dict):
            raise CannotDecideError(f"Prometheus at {self.shown}: query {promql} has no data")
        return result


class _Floats(dict[Any, float]):
    """float() of each text (or number) asked, converted on first sight."""

    def __missing__(self, text: Any) -> float:
        value = self[text] = float(text)
        return value


# --- what the window is asked -----------------------------------------------------------


@dataclass(frozen=True)
class ReserveSpec:
    """A reserve to check: its card, its own seats, and its fixed bytes (None: the whole card)."""

    host: str
    card: int
    own: tuple[str, ...]
    fixed_bytes: int | None


@dataclass(frozen=True)
class HostSpan:
    """One host's first and last sample in the window, how many, and which metric says so."""

    host: str
    first_s: int
    last_s: int
    samples: int
    metric: str


def _regex(values: Sequence[str]) -> str:
    """A PromQL regex matching exactly these values (the label matcher's string, quoted)."""
    text = "|".join(re.escape(v) for v in values)
    return json.dumps(text)


def _host(labels: Labels) -> str:
    return labels.get("host", "")


def _card(labels: Labels) -> tuple[str, int] | None:
    gpu = labels.get("gpu", "")
    return (_host(labels), int(gpu)) if gpu.isdigit() else None


# Which label names a host, in DESIGN.md's order ("Fleets"): the reader's `host_of` reads the same.
IDENTITY_LABELS = (*HOST_LABELS, "instance")
# `instance` without its port ("[::1]:9400" → "::1"), as a PromQL regex for label_replace.
_INSTANCE_HOST = r"\[?([^\]]*?)\]?(?::[0-9]+)?"


@dataclass
class _Queries:
    """The PromQL of one window: selectors bound to the catalogue's hosts, ranges to the window.

    `label` names the hosts in these series (DESIGN.md's order, or --host-label); `shadow` are
    the labels before it in that order, which must then be absent. Answers are relabelled to
    `host` by `_Relabelled`.
    """

    hosts: tuple[str, ...]
    start_s: int
    end_s: int
    step_s: int
    label: str = "host"
    shadow: tuple[str, ...] = ()

    @property
    def at(self) -> float:
        """Evaluation time: the last millisecond of the half-open window."""
        return self.end_s - 0.001

    @property
    def rng(self) -> str:
        """The window as a range: [start, end) to the millisecond."""
        return f"[{(self.end_s - self.start_s) * 1000 - 1}ms]"

    @property
    def sub(self) -> str:
        """The window as a subquery range at --step."""
        return f"[{(self.end_s - self.start_s) * 1000 - 1}ms:{self.step_s}s]"

    def named(self, hosts: Sequence[str]) -> str:
        """Matchers of the series of these hosts."""
        absent = "".join(f'{name}="",' for name in self.shadow)
        if self.label == "instance":
            values = json.dumps(f"({'|'.join(re.escape(h) for h in hosts)})(:[0-9]+)?")
            return f"{absent}instance=~{values}"
        return f"{absent}{self.label}=~{_regex(hosts)}"

    def sel(self, metric: str, extra: str = "") -> str:
        matchers = self.named(self.hosts) + (f",{extra}" if extra else "")
        return f"{metric}{{{matchers}}}"

    def by(self, rest: str = "") -> str:
        """The labels to aggregate by: the host's, then `rest`."""
        return f"{self.label}, {rest}" if rest else self.label

    def dcgm(self, template: str, metric: str) -> str:
        """`template` with SEL as a DCGM series of these hosts."""
        return template.replace("SEL", self.sel(metric))

    def seat_sum(self, extra: str = "") -> str:
        """Bytes per seat and card at each moment: its processes summed."""
        seat = _SEATED + (f",{extra}" if extra else "")
        return f"sum by ({self.by('gpu, seat')}) ({self.sel(m.PROCESS_USED, seat)})"

    def unexplained(self, cards: str = "", hosts: Sequence[str] | None = None) -> str:
        """used − bytes of processes matched to seats, per card (0 matched when none ran)."""
        q = self if hosts is None else replace(self, hosts=tuple(hosts))
        by = self.by("gpu")
        used = f"sum by ({by}) ({q.sel(m.CARD_USED, cards)})"
        seated = ",".join(filter(None, (_SEATED, cards)))
        seats = f"sum by ({by}) ({q.sel(m.PROCESS_USED, seated)})"
        return f"({used} - ({seats} or 0 * {used}))"


@dataclass
class _Relabelled:
    """A client whose answers name hosts in `host`, whatever label named them in the series."""

    client: PromClient
    label: str

    def _wrap(self, promql: str) -> str:
        pattern = _INSTANCE_HOST if self.label == "instance" else "(.*)"
        return f'label_replace({promql}, "host", "$1", "{self.label}", {json.dumps(pattern)})'

    def instant(self, promql: str, at_s: float) -> Vector:
        return self.client.instant(self._wrap(promql), at_s)

    def instants(self, exprs: Sequence[str], at_s: float) -> list[Vector]:
        return self.client.instants([self._wrap(expr) for expr in exprs], at_s)

    def range(self, promql: str, start_s: float, end_s: float, step_s: float) -> Matrix:
        return self.client.range(self._wrap(promql), start_s, end_s, step_s)


def _client_for(client: PromClient, label: str) -> PromClient:
    """`client` itself when series name hosts in `host`, else one relabelling its answers."""
    return client if label == "host" else _Relabelled(client, label)  # type: ignore[return-value]


# --- one host's moments ---------------------------------------------------------------------

# The series a host's moments are read from: its snapshot time, then each card's and process's.
MOMENT_METRICS = (
    m.SNAPSHOT_TIMESTAMP,
    m.CARD_TOTAL,
    m.CARD_RESERVED,
    m.CARD_USED,
    m.CARD_FREE,
    m.CARD_ERROR,
    m.PROCESS_USED,
)
# The series read at each scrape exactly; the rest as an instant query reads them.
_EXACT = (m.SNAPSHOT_TIMESTAMP, m.PROCESS_USED)
# Prometheus's default lookback (--query.lookback-delta).
LOOKBACK_S = 300


def host_queries(
    client: PromClient, host: str, start_s: int, end_s: int, host_label: str | None = None
) -> _Queries | None:
    """The queries of `host`'s gpuplan series over [start_s, end_s), under the label naming it
    there; None where it has no gpuplan series in that window."""
    check_url(client.base)
    base = _Queries((), start_s, end_s, 60)  # no step: every sample is read
    with ThreadPoolExecutor(max_workers=6) as pool:
        found = _host_spans(client, base, pool, host_label).get(host)
    if found is None or found[0].metric != m.SNAPSHOT_TIMESTAMP:
        return None
    return _group_queries(base, [host], found[1], host_label)


# What the report reads from the recorded hours of `gpuplan rules` where they cover its window.
_TILED = (
    (m.CARD_USED, "count"),
    (m.CARD_USED, "max"),
    (m.CARD_FREE, "min"),
    (m.PROCESS_USED, "count"),
    (m.PROCESS_USED, "max"),
    (m.CARD_ERROR, "sum"),
    (m.CARD_MEMORY_VERSION, "min"),
)


def recorded_tiling(client: PromClient, start_s: int, end_s: int) -> Tiling | None:
    """The recorded hours of [start_s, end_s) (`inventory.prometheus.tiles`) when every rollup the
    report reads (`_TILED`) was recorded at each of them and nowhere between, and Prometheus
    takes the `@` modifier; else None, and the window is read raw."""
    newest = newest_evaluation_ms(client, HEARTBEAT, end_s + RULE_DELAY_S)
    found = None if newest is None else tiling(start_s, end_s, newest)
    if found is None:
        return None
    names = [recorded_name(metric, fn) for metric, fn in _TILED]
    try:
        whole = check(client, found, HEARTBEAT, names)
    except CannotDecideError:  # a query the raw reading does not need was refused
        return None
    return found if whole else None


# --- loading ----------------------------------------------------------------------------


@dataclass
class WindowAnswers:
    """Prometheus's answers for the report over one window, by what they describe (built by
    `load_window`; `inventory.history.prometheus` turns them into the report's figures)."""

    base: str
    hosts: dict[str, HostSpan]
    cards: list[CardUsage]
    seats: list[SeatUsage]
    foreign: list[ForeignProcess]
    # A reserved card at each step, by (host, card, the reserve's own seats).
    readings: dict[tuple[str, int, tuple[str, ...]], list[ReserveReading]]
    # ((host, card), seat or pid, most bytes) of every process on a reserved card.
    holders: list[tuple[tuple[str, int], str, int]]
    buckets: list[ChartSums]
    chart_step_s: int
    sightings: dict[tuple[str, str], int]
    dcgm_hosts: tuple[str, ...]
    stats: QueryStats
    wall_s: float
    # Hosts with series in the window that are not the catalogue's (DESIGN.md "Fleets").
    ignored: tuple[str, ...] = ()
    # The recorded hours (`gpuplan rules`) the counts and extremes were read from, if any.
    tiles: Tiling | None = None


def _int(value: float) -> int:
    return round(value)


def load_window(
    client: PromClient,
    hosts: Sequence[str],
    start_s: int,
    end_s: int,
    *,
    step_s: int,
    chart_step_s: Callable[[int], int],
    segment_s: Callable[[int, int], int],
    reserves: Sequence[ReserveSpec],
    running_seats: Sequence[tuple[str, str]],
    lookback_s: int,
    card_figures: Callable[[PromCards], list[CardUsage]],
    seat_figures: SeatFigures,
    host_label: str | None = None,
    on_spans: Callable[[dict[str, HostSpan]], None] | None = None,
    charts: bool = True,
) -> WindowAnswers:
    """Ask Prometheus for every aggregate of the window [start_s, end_s) over `hosts`.

    First which hosts have series, when, and which label names each (one round; hosts outside
    `hosts` are listed in `ignored`), then everything else at once, in parallel (the client's
    `in_flight` queries at a time), once per label that names hosts. `card_figures` and
    `seat_figures` reduce each group's answers (`PromCards`, `PromSeats`) to rows. Without
    `charts`, no chart bucket is asked (`buckets` is empty).
    `chart_step_s(span)` and `segment_s(first, last)` are the report's own choices, so both
    sources bucket and split the window alike. `on_spans` gets the hosts' spans as soon as they are known, before the rest
    is asked: the caller may work beside the queries.
    """
    check_url(client.base)
    started = time.perf_counter()
    base = _Queries((), start_s, end_s, step_s)
    with ThreadPoolExecutor(max_workers=_JOBS) as pool:
        recorded = pool.submit(recorded_tiling, client, start_s, end_s)
        found = _host_spans(client, base, pool, host_label)
        spans = {h: f for h, (f, _) in found.items() if h in hosts}
        ignored = tuple(sorted(set(found) - set(hosts)))
        if not spans:
            return _empty(client, started, ignored)
        if on_spans is not None:
            on_spans(spans)
        first = min(s.first_s for s in spans.values())
        last = max(s.last_s for s in spans.values())
        window = _Plan(first, last, chart_step_s(last - first), segment_s(first, last))
        groups: dict[tuple[bool, str], list[str]] = defaultdict(list)
        for host in sorted(spans):
            groups[(spans[host].metric == DCGM_FREE, found[host][1])].append(host)
        jobs = [
            _submit_group(pool, client, _group_queries(base, hosts_of, label, host_label), dcgm,
                          window, reserves, card_figures, seat_figures, charts, recorded.result)
            for (dcgm, label), hosts_of in sorted(groups.items())
        ]  # fmt: skip
        parts = [_collect_group(job) for job in jobs]
        seats = sorted(
            [row for part in parts for row in part.seats], key=lambda r: (r.host, r.seat, r.card)
        )
        seen = {(row.host, row.seat) for row in seats}
        sightings: dict[tuple[str, str], int] = {}
        for (dcgm, label), hosts_of in groups.items():
            if not dcgm:
                q = _group_queries(base, hosts_of, label, host_label)
                mine = [(h, st) for h, st in running_seats if h in hosts_of]
                c = _client_for(client, label)
                sightings |= _sightings(c, q, mine, seen, set(spans), lookback_s)
        return WindowAnswers(
            base=client.base,
            hosts=spans,
            cards=sorted([c for part in parts for c in part.cards], key=lambda c: (c.host, c.card)),
            seats=seats,
            foreign=[f for part in parts for f in part.foreign],
            readings={k: v for part in parts for k, v in part.readings.items()},
            holders=[h for part in parts for h in part.holders],
            buckets=[b for part in parts for b in part.buckets],
            chart_step_s=window.chart_s,
            sightings=sightings,
            dcgm_hosts=tuple(sorted(h for h, s in spans.items() if s.metric == DCGM_FREE)),
            stats=client.stats,
            wall_s=time.perf_counter() - started,
            ignored=ignored,
            tiles=recorded.result(),
        )


@dataclass(frozen=True)
class _Plan:
    """The window's first and last sample, chart bucket and first/last segment, in seconds."""

    first_s: int
    last_s: int
    chart_s: int
    segment_s: int


@dataclass
class _Part:
    """The aggregates of one group of hosts (those one label names, from one exporter)."""

    cards: list[CardUsage]
    seats: list[SeatUsage]
    foreign: list[ForeignProcess]
    readings: dict[tuple[str, int, tuple[str, ...]], list[ReserveReading]]
    holders: list[tuple[tuple[str, int], str, int]]
    buckets: list[ChartSums]


def _group_queries(
    base: _Queries, hosts: Sequence[str], label: str, host_label: str | None
) -> _Queries:
    order = (host_label,) if host_label else IDENTITY_LABELS
    shadow = order[: order.index(label)] if label in order else ()
    return replace(base, hosts=tuple(hosts), label=label, shadow=shadow)


def _submit_group(
    pool: ThreadPoolExecutor,
    client: PromClient,
    q: _Queries,
    dcgm: bool,
    window: _Plan,
    reserves: Sequence[ReserveSpec],
    card_figures: Callable[[PromCards], list[CardUsage]],
    seat_figures: SeatFigures,
    charts: bool,
    tiles: Callable[[], Tiling | None] = lambda: None,
) -> tuple[bool, dict[str, Any]]:
    """Every query of one group, submitted to `pool`; `_collect_group` waits for them. The
    cards to read the most unexplained of go first: the cards' figures wait for them."""
    c = _client_for(client, q.label)
    first, last = window.first_s, window.last_s
    bucketed = _dcgm_buckets if dcgm else _buckets
    drawn = pool.submit(bucketed, c, q, window.chart_s, first, last) if charts else None
    if dcgm:
        return True, {
            "charts": drawn,
            "cards": pool.submit(card_figures, PromCards(c, q, dcgm=True)),
        }  # fmt: skip
    unexplained = pool.submit(_unexplained_cards, c, q, window.chart_s, first, last)
    cards = PromCards(c, q, unexplained_in=unexplained.result, span=(first, last), tiles=tiles)
    mine = [r for r in reserves if r.host in q.hosts]
    return False, {
        "charts": drawn,
        "cards": pool.submit(card_figures, cards),
        "seats": pool.submit(seat_figures, PromSeats(c, q, tiles), first, last, window.segment_s),
        "foreign": pool.submit(_foreign, c, q),
        "holders": pool.submit(_holders, c, q, mine),
        "readings": {
            (r.host, r.card, r.own): pool.submit(_reserve_readings, c, q, r, first, last)
            for r in mine
        },
    }  # fmt: skip


def _collect_group(job: tuple[bool, dict[str, Any]]) -> _Part:
    dcgm, futures = job
    charts = [] if futures["charts"] is None else futures["charts"].result()
    if dcgm:
        return _Part(futures["cards"].result(), [], [], {}, [], charts)
    return _Part(
        cards=futures["cards"].result(),
        seats=futures["seats"].result(),
        foreign=futures["foreign"].result(),
        readings={key: job.result() for key, job in futures["readings"].items()},
        holders=futures["holders"].result(),
        buckets=charts,
    )


def _empty(client: PromClient, started: float, ignored: tuple[str, ...] = ()) -> WindowAnswers:
    return WindowAnswers(
        client.base, {}, [], [], [], {}, [], [], 60, {}, (), client.stats,
        time.perf_counter() - started, ignored,
    )  # fmt: skip


def _host_spans(
    client: PromClient, q: _Queries, pool: ThreadPoolExecutor, host_label: str | None
) -> dict[str, tuple[HostSpan, str]]:
    """Per host of any series: first and last sample time and count, and the label naming it.

    From gpuplan's snapshot time, else DCGM's free memory. Hosts are named as `host_of` names
    them (DESIGN.md's order of labels, or `host_label`), so no host is read under two names.
    """
    labels = (host_label,) if host_label else IDENTITY_LABELS
    by = ", ".join(labels)
    # gpuplan's snapshot time is the gauge's value; DCGM's is the step that saw a sample.
    # (timestamp() inside a subquery is far slower on Prometheus 2.42 than either.)
    ts, free = m.SNAPSHOT_TIMESTAMP, DCGM_FREE
    queries = {
        ts: (
            f"max by ({by}) (count_over_time({ts}{q.rng}))",
            f"min by ({by}) (min_over_time({ts}{q.rng}))",
            f"max by ({by}) (max_over_time({ts}{q.rng}))",
        ),
        # DCGM has one series per card: a host's samples are its card seen most often.
        free: (
            f"max by ({by}) (count_over_time({free}{q.rng}))",
            f"min by ({by}) (min_over_time((0 * {free} + time()){q.sub}))",
            f"max by ({by}) (max_over_time((0 * {free} + time()){q.sub}))",
        ),
    }
    answers = {
        metric: [pool.submit(client.instant, expr, q.at) for expr in exprs]
        for metric, exprs in queries.items()
    }
    spans: dict[str, tuple[HostSpan, str]] = {}
    for metric, futures in answers.items():
        counts, lows, highs = (
            _by_identity(a.result(), host_label, pick)
            for a, pick in zip(futures, (max, min, max), strict=True)
        )
        for host, (n, label) in counts.items():
            if host in spans or host not in lows or host not in highs:
                continue
            span = HostSpan(host, _int(lows[host][0]), _int(highs[host][0]), _int(n), metric)
            spans[host] = (span, label)
    return spans


def _by_identity(
    vector: Vector, host_label: str | None, pick: Callable[[float, float], float]
) -> dict[str, tuple[float, str]]:
    """Values by the host `host_of` names (several series `pick`ed into one), with the label
    that named it (the first in DESIGN.md's order, where series of one host differ)."""
    out: dict[str, tuple[float, str]] = {}
    order = (host_label,) if host_label else IDENTITY_LABELS
    for labels, value in vector:
        host = host_of(labels, host_label)
        if host is None:
            continue
        label = next((name for name in order if labels.get(name)), order[-1])
        if host in out:
            value = pick(value, out[host][0])
            label = min(label, out[host][1], key=order.index)
        out[host] = (value, label)
    return out


def _summed_by_card(vector: Vector) -> dict[tuple[str, int], float]:
    """An instant answer summed by card (`sum by (host, gpu)`)."""
    out: dict[tuple[str, int], float] = defaultdict(float)
    for labels, value in vector:
        key = _card(labels)
        if key is not None:
            out[key] += value
    return dict(out)


def _by_card(vector: Vector) -> dict[tuple[str, int], float]:
    """An instant answer by card (of several series of one card, the last)."""
    out: dict[tuple[str, int], float] = {}
    for labels, value in vector:
        key = _card(labels)
        if key is not None:
            out[key] = value
    return out


def _cut(q: _Queries, selector: str, hosts: Iterable[str], gpus: Iterable[object]) -> str:
    """`selector` cut to these hosts and cards (their cross product)."""
    name, _, matchers = selector.partition("{")
    cut = f"{q.named(sorted(set(hosts)))},gpu=~{_regex(sorted({str(g) for g in gpus}))}"
    return f"{name}{{{cut},{matchers}" if matchers else f"{name}{{{cut}}}"


K = TypeVar("K", bound=Hashable)


def _known(found: Mapping[K | None, float]) -> dict[K, float]:
    return {key: value for key, value in found.items() if key is not None}


def kth_samples(
    client: PromClient,
    at_s: float,
    wanted: Mapping[K, tuple[int, Sequence[int]]],
    ranged: Callable[[Collection[K] | None], str],
    key_of: Callable[[Labels], K | None],
) -> dict[K, tuple[float, ...]]:
    """Per series of `wanted` (its n samples in `ranged(None)`, by `key_of` its labels; the ranks
    asked), its samples at those ranks, counted from 1 in ascending order: never interpolated.

    Prometheus selects them: `quantile_over_time(φ, …)` reads the sample at rank φ·(n − 1) + 1,
    interpolating only between two ranks, so φ = (rank − 1)/(n − 1) lands on the sample itself
    (to a float's rounding, which rounding to whole bytes removes). φ depends on n: series are
    asked in groups of one n and ranks, the most common over `ranged(None)`, the others over
    `ranged(keys)`, cut to theirs.
    """
    groups: dict[tuple[int, tuple[int, ...]], list[K]] = defaultdict(list)
    for key, (n, ranks) in wanted.items():
        if n > 0:
            groups[(n, tuple(ranks))].append(key)
    if not groups:
        return {}
    common = max(groups, key=lambda g: (len(groups[g]), g))
    asked: list[tuple[tuple[int, tuple[int, ...]], int]] = []
    exprs: list[str] = []
    for group, keys in sorted(groups.items()):
        n, ranks = group
        for i, rank in enumerate(ranks):
            phi = (rank - 1) / (n - 1) if n > 1 else 0.0
            exprs.append(
                f"quantile_over_time({phi!r}, {ranged(None if group == common else keys)})"
            )
            asked.append((group, i))
    found: dict[K, list[float | None]] = {}
    for (group, i), answer in zip(asked, client.instants(exprs, at_s), strict=True):
        for labels, value in answer:
            named = key_of(labels)
            if (
                named is not None
                and named in wanted
                and (wanted[named][0], tuple(wanted[named][1])) == group
            ):
                found.setdefault(named, [None] * len(group[1]))[i] = value
    return {
        key: tuple(v for v in values if v is not None)
        for key, values in found.items()
        if all(v is not None for v in values)
    }


# --- the cards' answers to `inventory.history.figures.card_usage` --------------------------------

_HOUR_S = 3600


@dataclass
class PromCards:
    """Prometheus's answers to the card figures' questions (`figures.CardSource`) for one group
    of hosts: hourly bounds, the first step at a lowest free, and used at ranks, in PromQL.

    Its parts: the window for the counts and the most used, its hours for the least free.
    """

    client: PromClient
    q: _Queries
    dcgm: bool = False
    # The cards whose most unexplained is read at every step (the others read 0), and the
    # window's first and last sample.
    unexplained_in: Callable[[], Collection[tuple[str, int]]] = frozenset
    span: tuple[int, int] = (0, 0)
    seen: set[tuple[str, int]] = field(default_factory=set)
    # The window's recorded hours, where its counts and extremes are read from them.
    tiles: Callable[[], Tiling | None] = lambda: None

    @property
    def scale(self) -> float:
        """Bytes per unit of the series read (DCGM's are MiB)."""
        return MIB if self.dcgm else 1.0

    def _metric(self, gpuplan: str, dcgm: str) -> str:
        return self.q.sel(dcgm if self.dcgm else gpuplan)

    def card_parts(self) -> list[CardPart]:
        """Per card, its samples, errors and most used over the window (one part), and its least
        free with the hour that first held it (a part counting no sample): a week's counts as
        hourly points would cost the CLI seconds of parsing, and only the least free needs its
        hour."""
        q = self.q
        used = self._metric(m.CARD_USED, DCGM_USED)
        tiles = None if self.dcgm else self.tiles()
        with ThreadPoolExecutor(max_workers=4) as side:
            hourly = side.submit(self._least_free_hour, tiles)
            if tiles is None:
                exprs = [f"count_over_time({used}{q.rng})", f"max_over_time({used}{q.rng})"]
                if not self.dcgm:
                    in_error = f"sum_over_time({q.sel(m.CARD_ERROR)}{q.rng})"
                    exprs.append(f"sum by ({q.by('gpu')}) ({in_error})")
                answers = [_by_card(answer) for answer in self.client.instants(exprs, q.at)]
            else:
                asked = [(m.CARD_USED, "count"), (m.CARD_USED, "max"), (m.CARD_ERROR, "sum")]
                figures = [side.submit(_tiled, self.client, q, tiles, *a) for a in asked]
                answers = [_by_card(f.result()) for f in figures[:2]]
                answers.append(_summed_by_card(figures[2].result()))
            lows = hourly.result()
        counts, tops, errors = (*answers[:2], answers[2] if len(answers) > 2 else {})
        scale = self.scale
        parts: list[CardPart] = []
        for key in sorted(set(counts) | set(errors)):
            n, failed, top = round(counts.get(key, 0)), round(errors.get(key, 0)), tops.get(key)
            if not n and not failed:
                continue
            self.seen.add(key)
            most = None if top is None else round(top * scale)
            parts.append(CardPart(*key, q.start_s, q.end_s, n, failed, most, None))
        for key, (low, end_s, start_s) in sorted(lows.items()):
            if key in self.seen:
                parts.append(CardPart(*key, start_s, end_s, 0, 0, None, low))
        return parts

    def _least_free_hour(self, tiles: Tiling | None) -> dict[tuple[str, int], tuple[int, int, int]]:
        """Each card's least free bytes, and the end and start of the first hour holding it (unix
        seconds, the end exclusive); of several series of a card, the least (the earliest hour of
        equals). The hours are the window's counted back from its end (a shorter first where the
        window is not whole hours), `min_over_time` of each at step=1h and one instant query for
        the first; with `tiles`, the recorded hours and the raw edges, each to the second
        around it."""
        out: dict[tuple[str, int], tuple[int, int, int]] = {}
        scale = self.scale

        def put(answer: Matrix, part: Callable[[float], tuple[int, int]]) -> None:
            for labels, points in answer:
                key = _card(labels)
                low = min(((round(v * scale), *part(t)) for t, v in points), default=None)
                if key is not None and low is not None:
                    out[key] = min(low, out.get(key, low))

        for answer, part in self._free_hours(tiles):
            put(answer, part)
        return out

    def _free_hours(
        self, tiles: Tiling | None
    ) -> list[tuple[Matrix, Callable[[float], tuple[int, int]]]]:
        """The least free of each hour (range answers), and how a point's time gives its hour's
        (end, start) in seconds."""
        q = self.q
        free = self._metric(m.CARD_FREE, DCGM_FREE)
        Ask = tuple[Callable[[], Matrix], Callable[[float], tuple[int, int]]]
        asks: list[Ask] = []

        def raw(expr: str, first_s: float, last_s: float) -> Callable[[], Matrix]:
            return lambda: self.client.range(expr, first_s, last_s, _HOUR_S)

        if tiles is not None:
            recorded = q.sel(recorded_name(m.CARD_FREE, "min"))
            # A recorded hour (e − 1 h, e], its points at e (ms), is (e + 1 ms up, e − 1 h down).
            asks.append((
                lambda: recorded_hours(self.client, tiles, recorded),
                lambda e: (-(-(round(e) + 1) // 1000), (round(e) - HOUR_MS) // 1000),
            ))  # fmt: skip
            for a, b in (tiles.head, tiles.tail):
                at = b / 1000
                asks.append((raw(f"min_over_time({free}[{b - a}ms])", at, at),
                             _fixed((-(-(b + 1) // 1000), a // 1000))))  # fmt: skip
        else:
            full, first = divmod(q.end_s - q.start_s, _HOUR_S)
            if full:
                asks.append((
                    raw(f"min_over_time({free}[{_HOUR_S * 1000 - 1}ms])",
                        q.start_s + first + _HOUR_S - 0.001, q.end_s - 0.001),
                    lambda t: (round(t + 0.001), max(q.start_s, round(t + 0.001) - _HOUR_S)),
                ))  # fmt: skip
            if first:
                at = q.start_s + first - 0.001
                asks.append((raw(f"min_over_time({free}[{first * 1000 - 1}ms])", at, at),
                             _fixed((q.start_s + first, q.start_s))))  # fmt: skip
        with ThreadPoolExecutor(max_workers=len(asks) or 1) as pool:
            answers = [pool.submit(read) for read, _ in asks]
            return [(f.result(), part) for f, (_, part) in zip(answers, asks, strict=True)]

    def first_lowest_free(
        self, wanted: Mapping[tuple[str, int], tuple[int, int, int]]
    ) -> dict[tuple[str, int], int]:
        """The first --step from each card's part whose free reads that lowest: one range query
        per part over it and the hour after (where the lookback carries its last samples), cut
        to its cards; then, for a lowest no step of those saw (a step longer than the samples'
        spacing skips samples), one over the rest of the window. A step before the part sees no
        sample holding it: every earlier part's lowest is higher."""
        free = self._metric(m.CARD_FREE, DCGM_FREE)

        def search(
            keys: list[tuple[str, int]], first_s: int, last_s: int
        ) -> dict[tuple[str, int], int]:
            selector = _cut(self.q, free, [k[0] for k in keys], [k[1] for k in keys])
            chosen = set(keys)
            found: dict[tuple[str, int], int] = {}
            for labels, points in self.client.range(selector, *_steps(self.q, first_s, last_s)):
                key = _card(labels)
                if key is None or key not in chosen:
                    continue
                low = wanted[key][2]
                at = next((t for t, v in points if round(v * self.scale) == low), None)
                if at is not None:
                    found[key] = min(round(at), found.get(key, round(at)))
            return found

        by_part: dict[int, list[tuple[str, int]]] = defaultdict(list)
        for key, (start_s, *_) in wanted.items():
            by_part[start_s].append(key)
        # The window's first steps may see, through the lookback, a sample from before it that
        # holds the lowest already.
        found = search(sorted(wanted), self.q.start_s, self.q.start_s + LOOKBACK_S)
        with ThreadPoolExecutor(max_workers=min(_JOBS, len(by_part) or 1)) as pool:
            asked = [
                pool.submit(search, keys, start_s, wanted[keys[0]][1] + _HOUR_S - 1)
                for start_s, keys in sorted(by_part.items())
                if any(k not in found for k in keys)
            ]
            for answer in asked:
                found = answer.result() | found
            unseen = sorted({wanted[k][0] for k in wanted if k not in found})
            rest = [
                pool.submit(search, [k for k in by_part[s] if k not in found], s, self.q.end_s)
                for s in unseen
            ]
            for answer in rest:
                found |= answer.result()
        return found

    def used_at_ranks(
        self, wanted: Mapping[tuple[str, int], tuple[int, Sequence[int]]]
    ) -> dict[tuple[str, int], tuple[int, ...]]:
        used = self._metric(m.CARD_USED, DCGM_USED)

        def ranged(keys: Collection[tuple[str, int]] | None) -> str:
            if keys is None:
                return f"{used}{self.q.rng}"
            return f"{_cut(self.q, used, [k[0] for k in keys], [k[1] for k in keys])}{self.q.rng}"

        found = kth_samples(self.client, self.q.at, wanted, ranged, _card)
        return {k: tuple(round(v * self.scale) for v in vs) for k, vs in found.items()}

    def nvml_v1_cards(self) -> set[tuple[str, int]]:
        if self.dcgm:
            return set()
        version = self.q.sel(m.CARD_MEMORY_VERSION)
        tiles = self.tiles()
        if tiles is None:
            found = self.client.instant(f"min_over_time({version}{self.q.rng})", self.q.at)
        else:
            found = _tiled(self.client, self.q, tiles, m.CARD_MEMORY_VERSION, "min")
        return {key for labels, v in found if v == 1 and (key := _card(labels)) is not None}

    def unexplained_max(self) -> dict[tuple[str, int], tuple[int | None, int | None]]:
        """None for DCGM's cards (no processes); of gpuplan's, those of `unexplained_in`: used −
        the seats' process bytes at every --step, its most and the first step holding it (a
        step-wise comparison over every card of a fleet costs Prometheus far more than the rest
        of the report)."""
        if self.dcgm:
            return dict.fromkeys(self.seen, (None, None))
        wanted = self.unexplained_in()
        out: dict[tuple[str, int], tuple[int | None, int | None]] = {}
        for host in sorted({h for h, _ in wanted}):
            gpus = sorted(str(c) for h, c in wanted if h == host)
            expr = f"{self.q.unexplained(f'gpu=~{_regex(gpus)}', hosts=[host])} > 0"
            for labels, points in self.client.range(expr, *_steps(self.q, *self.span)):
                key = _card(labels)
                if key is not None and points:
                    at, top = max(points, key=lambda p: (p[1], -p[0]))
                    out[key] = (_int(top), _int(at))
        return out


def _tiled(
    client: PromClient, q: _Queries, tiles: Tiling, metric: str, fn: str, extra: str = ""
) -> Vector:
    """`fn` of each series of `metric` (and `extra` matchers) over the window, from its recorded
    hours and raw edges (`tiles.window_figure`)."""
    recorded = q.sel(recorded_name(metric, fn), extra)
    return window_figure(client, tiles, q.sel(metric, extra), recorded, fn)


def _fixed(hour: tuple[int, int]) -> Callable[[float], tuple[int, int]]:
    """The (end, start) of a one-point answer's hour, whatever its time."""
    return lambda _: hour


def _steps(q: _Queries, first_s: float, last_s: float) -> tuple[float, float, float]:
    """(start, end, step) of a range query at --step over [first_s, last_s], inside the window."""
    step = q.step_s
    start = max(q.start_s, math.ceil(first_s / step) * step)
    end = min(q.at, math.floor(last_s / step) * step)
    return float(start), float(max(start, end)), float(step)


SeatKey = tuple[str, int, str]


def _seat_key(labels: Labels) -> SeatKey | None:
    card = _card(labels)
    seat = labels.get("seat", "")
    return (*card, seat) if card is not None and seat else None


ProcKey = tuple[str, int, str, str]


def _proc_cut(
    q: _Queries, selector: str, width: str
) -> Callable[[Collection[ProcKey] | None], str]:
    """`selector` (of process series) over `width`, cut to the hosts and cards of some keys."""

    def ranged(keys: Collection[ProcKey] | None) -> str:
        if keys is None:
            return f"{selector}{width}"
        return f"{_cut(q, selector, [k[0] for k in keys], [k[1] for k in keys])}{width}"

    return ranged


def _summed(
    q: _Queries, width: str, seats: Collection[str]
) -> Callable[[Collection[ProcKey] | None], str]:
    """The per-step sum of each of `seats`' processes over `width` (a subquery range), cut to
    the seats of some keys."""

    def ranged(keys: Collection[ProcKey] | None) -> str:
        names = sorted(seats if keys is None else {k[2] for k in keys})
        return f"{q.seat_sum(f'seat=~{_regex(names)}')}{width}"

    return ranged


def _top(tops: Mapping[ProcKey, float] | None, key: ProcKey) -> int | None:
    """A process key's most bytes, None where not asked (or not answered)."""
    found = None if tops is None else tops.get(key)
    return None if found is None else round(found)


def _proc_key(labels: Labels) -> tuple[str, int, str, str] | None:
    key = _seat_key(labels)
    return (*key, labels.get("pid", "")) if key is not None else None


@dataclass
class PromSeats:
    """Prometheus's answers to the seat figures' questions (`figures.SeatSource`) for one group
    of hosts, in PromQL.

    A seat with one process series on a card in a part (the usual case) is read from its raw
    samples; one with several there (restarted, or several processes) from the per-step sum of
    them at --step: the sum over every seat (a subquery) cost Prometheus ten times the raw read
    on a 128-host fleet. `seat_counts` remembers which is which, for `seat_at_ranks`.
    """

    client: PromClient
    q: _Queries
    # The window's recorded hours, where its counts and most are read from them.
    tiles: Callable[[], Tiling | None] = lambda: None
    single: dict[Part, dict[SeatKey, ProcKey]] = field(default_factory=dict)
    several: dict[Part, set[SeatKey]] = field(default_factory=dict)

    def _range(self, part: Part) -> tuple[float, str, str]:
        """Evaluation time, raw range and subquery range of a part ([start, end) or the window)."""
        if part is None:
            return self.q.at, self.q.rng, self.q.sub
        width = (part[1] - part[0]) * 1000 - 1
        return part[1] - 0.001, f"[{width}ms]", f"[{width}ms:{self.q.step_s}s]"

    def seat_counts(self, parts: Sequence[Part]) -> list[dict[SeatKey, tuple[int, int | None]]]:
        with ThreadPoolExecutor(max_workers=len(parts) or 1) as pool:
            return list(pool.map(self._counts, parts))

    def _counts(self, part: Part) -> dict[SeatKey, tuple[int, int | None]]:
        """Each seat's samples in `part`, and its most bytes where `part` is the window (a
        part's most is not read: `seat_usage` reads none)."""
        at, width, sub = self._range(part)
        raw = self.q.sel(m.PROCESS_USED, _SEATED)
        tiles = self.tiles()
        if tiles is not None and part is not None:
            tiles = tiles.within(*part)
        if tiles is None:
            counts, tops = self._two(f"{raw}{width}", at, part is None)
        else:
            counts, tops = self._recorded_counts(tiles, most=part is None)
        by_seat: dict[SeatKey, list[ProcKey]] = defaultdict(list)
        for key in counts:
            by_seat[key[:3]].append(key)
        single = {seat: keys[0] for seat, keys in by_seat.items() if len(keys) == 1}
        out = {seat: (round(counts[key]), _top(tops, key)) for seat, key in single.items()}
        several = {seat for seat, keys in by_seat.items() if len(keys) > 1}
        if several:
            summed = _summed(self.q, sub, {seat[2] for seat in several})(None)
            counts, tops = self._two(summed, at, part is None)
            for key, n in counts.items():
                if key[:3] in several:
                    out[key[:3]] = (round(n), _top(tops, key))
        self.single[part] = single
        self.several[part] = several
        return out

    def _two(
        self, ranged: str, at: float, most: bool
    ) -> tuple[dict[ProcKey, float], dict[ProcKey, float] | None]:
        """`count_over_time` of `ranged` by process key, and with `most` its `max_over_time`."""
        exprs = [f"count_over_time({ranged})", *([f"max_over_time({ranged})"] if most else [])]
        answers = [
            _known({_proc_key(labels): v for labels, v in answer})
            for answer in self.client.instants(exprs, at)
        ]
        return answers[0], answers[1] if most else None

    def _recorded_counts(
        self, tiles: Tiling, most: bool
    ) -> tuple[dict[ProcKey, float], dict[ProcKey, float] | None]:
        """The count (and with `most` the most) of each seated process over `tiles`' span, from
        its recorded hours."""

        def figure(fn: str) -> dict[ProcKey, float]:
            found = _tiled(self.client, self.q, tiles, m.PROCESS_USED, fn, _SEATED)
            return _known({_proc_key(labels): v for labels, v in found})

        with ThreadPoolExecutor(max_workers=2) as pool:
            counts = pool.submit(figure, "count")
            tops = pool.submit(figure, "max") if most else None
            return counts.result(), None if tops is None else tops.result()

    def seat_at_ranks(
        self, asks: Sequence[tuple[Part, Mapping[SeatKey, tuple[int, Sequence[int]]]]]
    ) -> list[dict[SeatKey, tuple[int, ...]]]:
        with ThreadPoolExecutor(max_workers=len(asks) or 1) as pool:
            return list(pool.map(lambda ask: self._ranks(*ask), asks))

    def _ranks(
        self, part: Part, wanted: Mapping[SeatKey, tuple[int, Sequence[int]]]
    ) -> dict[SeatKey, tuple[int, ...]]:
        at, width, sub = self._range(part)
        single, several = self.single[part], self.several[part]
        raw = _proc_cut(self.q, self.q.sel(m.PROCESS_USED, _SEATED), width)
        one = {single[k]: v for k, v in wanted.items() if k in single}
        found = kth_samples(self.client, at, one, raw, _proc_key)
        many = {(*k, ""): v for k, v in wanted.items() if k in several}
        if many:
            summed = _summed(self.q, sub, {k[2] for k in several})
            found |= kth_samples(self.client, at, many, summed, _proc_key)
        return {key[:3]: tuple(round(v) for v in values) for key, values in found.items()}


# `inventory.history.figures.seat_usage`: the seats' rows from their answers and the window's
# first sample, last sample and part length.
SeatFigures = Callable[[PromSeats, int, int, int], list[SeatUsage]]


def _foreign(client: PromClient, q: _Queries) -> list[ForeignProcess]:
    """Each process no seat claims (a pid on a card): samples, first and last sight, most bytes.
    The exporter labels a process by pid and seat, not command line. First and last sight are
    asked of the hosts some such process was seen on only: the join with the snapshot time at
    every step costs Prometheus as many series as it has hosts."""
    selector = q.sel(m.PROCESS_USED, f'seat="{m.FOREIGN}"')
    counts, tops = client.instants(
        [f"count_over_time({selector}{q.rng})", f"max_over_time({selector}{q.rng})"], q.at
    )
    hosts = sorted({_host(labels) for labels, _ in counts})
    if not hosts:
        return []
    on = replace(q, hosts=tuple(hosts))
    # The host's snapshot time at each step the process was seen.
    seen = on.sel(m.PROCESS_USED, f'seat="{m.FOREIGN}"')
    seen_at = (
        f"({on.sel(m.SNAPSHOT_TIMESTAMP)} * on({q.label}) group_right() ({seen} > bool -1)){q.sub}"
    )
    sights = client.instants([f"min_over_time({seen_at})", f"max_over_time({seen_at})"], q.at)
    by_pid = [{_pid_key(labels): value for labels, value in a} for a in (counts, tops, *sights)]
    return [
        ForeignProcess(
            key[0],
            key[1],
            key[2],
            None,
            (),
            _int(n),
            _int(by_pid[2][key]),
            _int(by_pid[3][key]),
            _int(by_pid[1][key]),
        )
        for key, n in by_pid[0].items()
        if key is not None and all(key in part for part in by_pid[1:])
    ]


def _pid_key(labels: Labels) -> tuple[str, int, str] | None:
    card = _card(labels)
    return (*card, labels.get("pid", "")) if card is not None else None


def reserve_queries(q: _Queries, reserve: ReserveSpec) -> dict[str, str]:
    """PromQL of what `figures.breach_points` reads of a reserved card at each step: its used
    bytes, its own seats' process bytes, and (for a fixed reserve) its total and driver reserve,
    by field of `ReserveReading`."""
    card = f'{q.named([reserve.host])},gpu="{reserve.card}"'
    by = q.by("gpu")
    exprs = {"used_bytes": f"sum by ({by}) ({m.CARD_USED}{{{card}}})"}
    if reserve.own:
        own = f"{m.PROCESS_USED}{{{card},seat=~{_regex(reserve.own)}}}"
        exprs["own_bytes"] = f"sum by ({by}) ({own})"
    if reserve.fixed_bytes is not None:
        exprs["total_bytes"] = f"sum by ({by}) ({m.CARD_TOTAL}{{{card}}})"
        exprs["reserved_bytes"] = f"sum by ({by}) ({m.CARD_RESERVED}{{{card}}})"
    return exprs


def _reserve_readings(
    client: PromClient, q: _Queries, reserve: ReserveSpec, first_s: int, last_s: int
) -> list[ReserveReading]:
    """The reserved card at each --step of [first_s, last_s] where its used was read."""
    steps = _steps(q, first_s, last_s)
    exprs = reserve_queries(q, reserve)
    found: dict[str, dict[int, int]] = {}
    with ThreadPoolExecutor(max_workers=len(exprs)) as pool:
        answers = pool.map(lambda expr: client.range(expr, *steps), exprs.values())
        for name, answer in zip(exprs, answers, strict=True):
            found[name] = {_int(t): _int(v) for _, series in answer for t, v in series}
    own, total, held = (found.get(k, {}) for k in ("own_bytes", "total_bytes", "reserved_bytes"))
    return [
        ReserveReading(t, used, own.get(t, 0), total.get(t), held.get(t))
        for t, used in sorted(found["used_bytes"].items())
    ]


def _holders(
    client: PromClient, q: _Queries, reserves: Sequence[ReserveSpec]
) -> list[tuple[tuple[str, int], str, int]]:
    """((host, card), name, most bytes) of every process on a reserved card over the window."""
    if not reserves:
        return []
    hosts = sorted({r.host for r in reserves})
    cards = sorted({str(r.card) for r in reserves})
    selector = f"{m.PROCESS_USED}{{{q.named(hosts)},gpu=~{_regex(cards)}}}"
    out: list[tuple[tuple[str, int], str, int]] = []
    for labels, value in client.instant(f"max_over_time({selector}{q.rng})", q.at):
        key = _card(labels)
        seat = labels.get("seat", m.FOREIGN)
        if key is None:
            continue
        name = f"pid {labels.get('pid', '?')}" if seat in ("", m.FOREIGN) else seat
        out.append((key, name, _int(value)))
    return out


def _buckets(
    client: PromClient, q: _Queries, step_s: int, first_s: int, last_s: int
) -> list[ChartSums]:
    """Per card and chart bucket: the mean used, each seat's mean bytes, the lowest free.

    Bucket b covers [b·step, (b+1)·step); it is evaluated at its last millisecond. Each bucket
    counts as one sample holding the means, so sums ÷ samples read the means.
    """
    width = f"[{step_s * 1000 - 1}ms]"
    start, end = _bucket_span(step_s, first_s, last_s)
    used = f"avg_over_time({q.sel(m.CARD_USED)}{width})"
    seats = f"sum by ({q.by('gpu, seat')}) (avg_over_time({q.sel(m.PROCESS_USED, _SEATED)}{width}))"
    free = f"min_over_time({q.sel(m.CARD_FREE)}{width})"
    exprs = {"used": used, "seats": seats, "free": free}
    with ThreadPoolExecutor(max_workers=len(exprs)) as pool:
        asked = {
            key: pool.submit(_bucketed, client, e, start, end, step_s) for key, e in exprs.items()
        }
        answers = {key: future.result() for key, future in asked.items()}
    return _bucket_sums(answers)


def _unexplained_cards(
    client: PromClient, q: _Queries, step_s: int, first_s: int, last_s: int
) -> set[tuple[str, int]]:
    """The cards whose chart buckets (`_buckets`) hold unexplained memory: some bucket's mean used
    less its seats' mean bytes is half a byte or more (means of whole bytes differ by float
    rounding where nothing is unexplained). Prometheus compares the buckets itself, in one range
    query at the chart's step that answers only the buckets holding some: each card's used means
    summed with its seats' processes' means negated (one aggregation, each series read once)."""
    width = f"[{step_s * 1000 - 1}ms]"
    used = f"avg_over_time({q.sel(m.CARD_USED)}{width})"
    seats = f"avg_over_time({q.sel(m.PROCESS_USED, _SEATED)}{width})"
    expr = f"sum by ({q.by('gpu')}) ({used} or -{seats}) >= 0.5"
    start, end = _bucket_span(step_s, first_s, last_s)
    found = client.range(expr, start, end, step_s)
    return {key for labels, points in found if points and (key := _card(labels))}


def _dcgm_buckets(
    client: PromClient, q: _Queries, step_s: int, first_s: int, last_s: int
) -> list[ChartSums]:
    """The same buckets from DCGM's used and free memory (whole MiB; no seats)."""
    width = f"[{step_s * 1000 - 1}ms]"
    start, end = _bucket_span(step_s, first_s, last_s)
    answers: dict[str, Bucketed] = {"seats": []}
    for key, metric in (("used", DCGM_USED), ("free", DCGM_FREE)):
        expr = q.dcgm(f"{'avg' if key == 'used' else 'min'}_over_time(SEL{width})", metric)
        answers[key] = _bucketed(client, expr, start, end, step_s, scale=MIB)
    return _bucket_sums(answers)


def _bucket_span(step_s: int, first_s: int, last_s: int) -> tuple[float, float]:
    """The first and last bucket's evaluation times (each bucket's last millisecond)."""
    return (first_s // step_s + 1) * step_s - 0.001, (last_s // step_s + 1) * step_s - 0.001


# A range answer at the chart step: each series' values by bucket.
Bucketed = list[tuple[Labels, dict[int, float]]]


def _bucketed(
    client: PromClient, expr: str, start: float, end: float, step_s: int, scale: float = 1
) -> Bucketed:
    """The range answer of `expr` by bucket (its points dropped as soon as they are read:
    a fleet's answers at once would hold hundreds of MB of points)."""
    out: Bucketed = []
    for labels, points in client.range(expr, start, end, step_s):
        if scale == 1:
            out.append((labels, {round(t + 0.001) // step_s - 1: v for t, v in points}))
        else:
            out.append((labels, {round(t + 0.001) // step_s - 1: v * scale for t, v in points}))
        points.clear()
    return out


def _bucket_sums(answers: dict[str, Bucketed]) -> list[ChartSums]:
    """The answers by card (a card's series of used merged, its seats by name)."""
    used: dict[tuple[str, int], dict[int, float]] = defaultdict(dict)
    for labels, values in answers["used"]:
        key = _card(labels)
        if key is not None:
            used[key].update(values)
    seats: dict[tuple[str, int], dict[str, dict[int, float]]] = defaultdict(dict)
    for labels, values in answers["seats"]:
        seat = _seat_key(labels)
        if seat is not None:
            seats[seat[:2]][seat[2]] = values
    free: dict[tuple[str, int], dict[int, float]] = defaultdict(dict)
    for labels, values in answers["free"]:
        key = _card(labels)
        if key is not None:
            free[key] = values
    return [
        ChartSums(*key, dict.fromkeys(means, 1), means, seats.get(key, {}), free.get(key, {}))
        for key, means in used.items()
    ]


def _sightings(
    client: PromClient,
    q: _Queries,
    running: Sequence[tuple[str, str]],
    seen: set[tuple[str, str]],
    hosts: set[str],
    lookback_s: int,
) -> dict[tuple[str, str], int]:
    """When each running seat no series of the window shows was last seen before the window."""
    missing = [(h, s) for h, s in running if (h, s) not in seen and h in hosts]
    if not missing:
        return {}
    seat_names = sorted({s for _, s in missing})
    selector = q.sel(m.PROCESS_USED, f"seat=~{_regex(seat_names)}")
    step = max(q.step_s, 300)
    expr = f"max by ({q.by('seat')}) (max_over_time(timestamp({selector})[{lookback_s}s:{step}s]))"
    found = client.instant(expr, q.start_s - 0.001)
    return {
        (labels.get("host", ""), labels.get("seat", "")): _int(value)
        for labels, value in found
        if (labels.get("host", ""), labels.get("seat", "")) in set(missing)
    }
