"""The weekly report's aggregates over a window, from Prometheus range and `*_over_time` queries.

It answers with the same row types as `inventory.ledger.report_queries`, so the report is built and
rendered by the same code from either source. Percentiles are Prometheus's `quantile_over_time`.
"""

from __future__ import annotations

import json
import math
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from inventory.ledger.report_queries import (
    CardBuckets,
    CardUsage,
    ForeignUsage,
    Holder,
    ReserveBreaches,
    SeatUsage,
    Span,
)
from inventory.prometheus import metrics as m
from inventory.prometheus.reader import DCGM_FREE, DCGM_USED, MIB, check_url
from seats.errors import CannotDecideError

__all__ = [
    "PERCENTILE_DEFINITION",
    "HostSpan",
    "PromClient",
    "PrometheusWindow",
    "QueryStats",
    "ReserveSpec",
    "load_window",
]

PERCENTILE_DEFINITION = (
    "Prometheus's quantile_over_time over the raw samples (per seat, over the per-step sum of its "
    "processes): linear interpolation between the two nearest samples, so a percentile may lie "
    "between two values really recorded (the SQLite ledger's report uses nearest-rank instead)"
)
# Prometheus refuses a range query of more points than this per series; longer ones are split.
MAX_POINTS = 10_000
_SEATED = f'seat!="{m.FOREIGN}"'  # processes some seat's `match` claims
# What Prometheus says when --query.max-samples is too low for a query.
_TOO_MANY = "too many samples"

Labels = Mapping[str, str]
Opener = Callable[[str, float], bytes]
Vector = list[tuple[Labels, float]]
Matrix = list[tuple[Labels, list[tuple[float, float]]]]


def _urlopen(url: str, timeout: float) -> bytes:
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        body: bytes = response.read()
        return body


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
    opener: Opener = _urlopen
    stats: QueryStats = field(default_factory=QueryStats)

    def instant(self, promql: str, at_s: float) -> Vector:
        """The instant vector of `promql` evaluated at `at_s` (unix seconds)."""
        data = self._get("query", {"query": promql, "time": f"{at_s:.3f}"}, promql)
        if data.get("resultType") != "vector":
            raise CannotDecideError(
                f"Prometheus at {self.base}: query {promql} did not return an instant vector"
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
            data = self._get("query_range", params, promql)
            for series in data.get("result", []):
                labels = series.get("metric", {})
                key = tuple(sorted(labels.items()))
                names[key] = labels
                merged[key] += [
                    (float(t), float(v)) for t, v in series.get("values", []) if v != "NaN"
                ]
            begin = stop + step_s
        return [(names[key], points) for key, points in merged.items()]

    def _point(self, series: Any, key: str, promql: str) -> tuple[Labels, float]:
        try:
            _, value = series[key]
            return series["metric"], float(value)
        except (KeyError, TypeError, ValueError) as exc:
            raise CannotDecideError(
                f"Prometheus at {self.base}: query {promql} returned a malformed series: {series!r:.200}"
            ) from exc

    def _get(self, path: str, params: dict[str, str], promql: str) -> dict[str, Any]:
        url = f"{self.base.rstrip('/')}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        started = time.perf_counter()
        try:
            body = self.opener(url, self.timeout)
        except urllib.error.HTTPError as exc:
            # Prometheus answers a bad or refused query with 4xx/5xx and a JSON error body.
            body = exc.read()
            if not body:
                raise CannotDecideError(
                    f"Prometheus at {self.base}: query {promql} failed with HTTP {exc.code} {exc.reason}"
                ) from exc
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise CannotDecideError(
                f"Prometheus at {self.base} is unreachable ({reason}) while querying {promql}"
            ) from exc
        data = self._answer(body, promql)
        self.stats.add(time.perf_counter() - started, len(data.get("result", [])), promql)
        return data

    def _answer(self, body: bytes, promql: str) -> dict[str, Any]:
        try:
            data = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise CannotDecideError(
                f"Prometheus at {self.base}: the answer to {promql} is not JSON (is this a Prometheus URL?)"
            ) from exc
        if not isinstance(data, dict) or data.get("status") != "success":
            error = str(data.get("error", "no error text")) if isinstance(data, dict) else "?"
            kind = data.get("errorType", "error") if isinstance(data, dict) else "error"
            if _TOO_MANY in error:
                raise CannotDecideError(
                    f"Prometheus at {self.base} refused {promql}: {error}. Its --query.max-samples "
                    f"is too low for {self.window_text}: pass a shorter window (e.g. --since 2d) "
                    "or a larger --step (e.g. --step 5m), or raise --query.max-samples"
                )
            raise CannotDecideError(
                f"Prometheus at {self.base}: query {promql} failed: {kind}: {error}"
            )
        result = data.get("data")
        if not isinstance(result, dict):
            raise CannotDecideError(f"Prometheus at {self.base}: query {promql} has no data")
        return result


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


@dataclass
class _Queries:
    """The PromQL of one window: selectors bound to the catalogue's hosts, ranges to the window."""

    hosts: tuple[str, ...]
    start_s: int
    end_s: int
    step_s: int

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

    def sel(self, metric: str, extra: str = "") -> str:
        matchers = f"host=~{_regex(self.hosts)}" + (f",{extra}" if extra else "")
        return f"{metric}{{{matchers}}}"

    def dcgm(self, template: str, metric: str) -> str:
        """`template` with SEL as a DCGM series of these hosts: host from `host`, else `Hostname`.

        dcgm-exporter names the node in `Hostname`; a scrape job may relabel it to `host`.
        """
        hosts = _regex(self.hosts)
        named = template.replace("SEL", f'{metric}{{host="",Hostname=~{hosts}}}')
        relabelled = template.replace("SEL", f"{metric}{{host=~{hosts}}}")
        return f'(label_replace({named}, "host", "$1", "Hostname", "(.*)") or {relabelled})'

    def seat_sum(self, extra: str = "") -> str:
        """Bytes per seat and card at each moment: its processes summed."""
        seat = _SEATED + (f",{extra}" if extra else "")
        return f"sum by (host, gpu, seat) ({self.sel(m.PROCESS_USED, seat)})"

    def unexplained(self, cards: str = "") -> str:
        """used − bytes of processes matched to seats, per card (0 matched when none ran)."""
        used = f"sum by (host, gpu) ({self.sel(m.CARD_USED, cards)})"
        seats = f"sum by (host, gpu) ({self.sel(m.PROCESS_USED, ','.join(filter(None, (_SEATED, cards))))})"
        return f"({used} - ({seats} or 0 * {used}))"


# --- loading ----------------------------------------------------------------------------


@dataclass
class PrometheusWindow:
    """Every aggregate of the report over one window, answered from Prometheus's answers.

    Build it with `load_window`; its methods mirror `inventory.ledger.report_queries`.
    """

    base: str
    hosts: dict[str, HostSpan]
    cards: list[CardUsage]
    seats_all: dict[tuple[str, int, str], tuple[int, int, int, int]]
    seats_first: dict[tuple[str, int, str], int]
    seats_last: dict[tuple[str, int, str], int]
    foreign: list[ForeignUsage]
    breaches: dict[tuple[str, int, tuple[str, ...]], ReserveBreaches]
    buckets: list[CardBuckets]
    chart_step_s: int
    sightings: dict[tuple[str, str], int]
    dcgm_hosts: tuple[str, ...]
    stats: QueryStats
    wall_s: float

    def span(self) -> Span | None:
        if not self.hosts:
            return None
        spans = list(self.hosts.values())
        return Span(
            min(h.first_s for h in spans),
            max(h.last_s for h in spans),
            sum(h.samples for h in spans),
        )

    def card_usage(self) -> list[CardUsage]:
        return self.cards

    def seat_usage(self, first_s: int, last_s: int, segment_s: int) -> list[SeatUsage]:
        rows = [
            SeatUsage(
                host=host,
                card=card,
                seat=seat,
                samples=n,
                p50_bytes=p50,
                p95_bytes=p95,
                max_bytes=top,
                first_p50_bytes=self.seats_first.get((host, card, seat)),
                last_p50_bytes=self.seats_last.get((host, card, seat)),
            )
            for (host, card, seat), (n, p50, p95, top) in self.seats_all.items()
        ]
        return sorted(rows, key=lambda r: (r.host, r.seat, r.card))

    def foreign_usage(self) -> list[ForeignUsage]:
        return self.foreign

    def reserve_breaches(
        self, host: str, card: int, own: Sequence[str], fixed_bytes: int | None
    ) -> ReserveBreaches:
        return self.breaches.get(
            (host, card, tuple(own)), ReserveBreaches(0, None, None, None, None, ())
        )

    def chart_buckets(self, step_s: int) -> list[CardBuckets]:
        return self.buckets

    def window_hosts(self) -> set[str]:
        return set(self.hosts)

    def last_sighting(self, host: str, seat: str, before_s: int, after_s: int) -> int | None:
        return self.sightings.get((host, seat))


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
    workers: int = 8,
) -> PrometheusWindow:
    """Ask Prometheus for every aggregate of the window [start_s, end_s) over `hosts`.

    First which hosts have series and when (one round), then everything else at once, in
    parallel (`workers` queries in flight). `chart_step_s(span)` and `segment_s(first, last)`
    are the report's own choices, so both sources bucket and split the window alike.
    """
    check_url(client.base)
    started = time.perf_counter()
    q = _Queries(tuple(sorted(hosts)), start_s, end_s, step_s)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        spans = _host_spans(client, q, pool)
        dcgm = tuple(sorted(h for h, s in spans.items() if s.metric == DCGM_FREE))
        if not spans:
            return _empty(client, started)
        first = min(s.first_s for s in spans.values())
        last = max(s.last_s for s in spans.values())
        chart = chart_step_s(last - first)
        segment = segment_s(first, last)
        cards = pool.submit(_card_usage, client, q)
        dcgm_cards = pool.submit(_dcgm_usage, client, q, dcgm)
        seats = pool.submit(_seat_stats, client, q)
        firsts = pool.submit(_seat_medians, client, q, first + segment, segment)
        lasts = pool.submit(_seat_medians, client, q, last + 0.001, segment)
        foreign = pool.submit(_foreign, client, q)
        charts = pool.submit(_buckets, client, q, chart, first, last, dcgm)
        holders = pool.submit(_holders, client, q, reserves)
        breach_jobs = {
            (r.host, r.card, r.own): pool.submit(_breaches, client, q, r, first, last)
            for r in reserves
        }
        unexplained = _unexplained(client, q, charts.result(), first, last)
        seen = {(h, s) for (h, _, s) in seats.result()}
        sightings = _sightings(client, q, running_seats, seen, set(spans), lookback_s)
        breaches = {
            key: _with_holders(job.result(), holders.result(), key)
            for key, job in breach_jobs.items()
        }
        return PrometheusWindow(
            base=client.base,
            hosts=spans,
            cards=sorted(
                [_with_unexplained(c, unexplained) for c in cards.result()] + dcgm_cards.result(),
                key=lambda c: (c.host, c.card),
            ),
            seats_all=seats.result(),
            seats_first=firsts.result(),
            seats_last=lasts.result(),
            foreign=foreign.result(),
            breaches=breaches,
            buckets=charts.result(),
            chart_step_s=chart,
            sightings=sightings,
            dcgm_hosts=dcgm,
            stats=client.stats,
            wall_s=time.perf_counter() - started,
        )


def _empty(client: PromClient, started: float) -> PrometheusWindow:
    return PrometheusWindow(
        client.base, {}, [], {}, {}, {}, [], {}, [], 60, {}, (), client.stats,
        time.perf_counter() - started,
    )  # fmt: skip


def _host_spans(client: PromClient, q: _Queries, pool: ThreadPoolExecutor) -> dict[str, HostSpan]:
    """Per host: first and last sample time and count, from gpuplan's snapshot time, else DCGM's."""
    spans: dict[str, HostSpan] = {}
    # gpuplan's snapshot time is the gauge's value; DCGM's is the step that saw a sample.
    # (timestamp() inside a subquery is far slower on Prometheus 2.42 than either.)
    ts = q.sel(m.SNAPSHOT_TIMESTAMP)
    dcgm_time = f"(0 * SEL + time()){q.sub}"
    queries = {
        m.SNAPSHOT_TIMESTAMP: (
            f"max by (host) (count_over_time({ts}{q.rng}))",
            f"min by (host) (min_over_time({ts}{q.rng}))",
            f"max by (host) (max_over_time({ts}{q.rng}))",
        ),
        # DCGM has one series per card: a host's samples are its card seen most often.
        DCGM_FREE: (
            f"max by (host) ({q.dcgm(f'count_over_time(SEL{q.rng})', DCGM_FREE)})",
            f"min by (host) ({q.dcgm(f'min_over_time({dcgm_time})', DCGM_FREE)})",
            f"max by (host) ({q.dcgm(f'max_over_time({dcgm_time})', DCGM_FREE)})",
        ),
    }
    answers = {
        metric: [pool.submit(client.instant, expr, q.at) for expr in exprs]
        for metric, exprs in queries.items()
    }
    for metric, futures in answers.items():
        counts, lows, highs = (
            {_host(labels): value for labels, value in a.result()} for a in futures
        )
        for host, n in counts.items():
            if host in spans or host not in lows or host not in highs:
                continue
            spans[host] = HostSpan(host, _int(lows[host]), _int(highs[host]), _int(n), metric)
    return spans


def _card_usage(client: PromClient, q: _Queries) -> list[CardUsage]:
    used, free = q.sel(m.CARD_USED), q.sel(m.CARD_FREE)
    exprs = {
        "n": f"count_over_time({used}{q.rng})",
        "p50": f"quantile_over_time(0.5, {used}{q.rng})",
        "p95": f"quantile_over_time(0.95, {used}{q.rng})",
        "max": f"max_over_time({used}{q.rng})",
        "low": f"min_over_time({free}{q.rng})",
        "errors": f"sum by (host, gpu) (sum_over_time({q.sel(m.CARD_ERROR)}{q.rng}))",
        "v1": f"min_over_time({q.sel(m.CARD_MEMORY_VERSION)}{q.rng})",
    }
    got = {key: _by_card(client.instant(expr, q.at)) for key, expr in exprs.items()}
    low_at = _first_at(client, q, f"{free} == min_over_time({free}{q.rng} @ {q.at:.3f})")
    rows: list[CardUsage] = []
    for key in sorted(set(got["n"]) | {k for k, v in got["errors"].items() if v > 0}):
        n = _int(got["n"].get(key, 0))
        rows.append(
            CardUsage(
                host=key[0],
                card=key[1],
                samples=n,
                error_samples=_int(got["errors"].get(key, 0)),
                used_p50_bytes=_opt(got["p50"].get(key)) if n else None,
                used_p95_bytes=_opt(got["p95"].get(key)) if n else None,
                used_max_bytes=_opt(got["max"].get(key)) if n else None,
                min_free_bytes=_opt(got["low"].get(key)),
                min_free_at_s=low_at.get(key),
                # Filled by `_unexplained` for the cards the charts show unexplained memory on.
                unexplained_max_bytes=0 if n else None,
                unexplained_max_at_s=None,
                nvml_v1=got["v1"].get(key) == 1,
            )
        )
    return rows


def _unexplained(
    client: PromClient, q: _Queries, buckets: Sequence[CardBuckets], first_s: int, last_s: int
) -> dict[tuple[str, int], tuple[int, int]]:
    """Per card, the most memory no seat explained and when first, where the charts show some.

    Read at every --step only on cards whose chart buckets hold unexplained memory: a step-wise
    comparison over every card of a fleet costs Prometheus far more than the rest of the report.
    """
    wanted = [(b.host, b.card) for b in buckets if any(v > 0 for v in b.unexplained_bytes.values())]
    out: dict[tuple[str, int], tuple[int, int]] = {}
    for host in sorted({h for h, _ in wanted}):
        gpus = sorted(str(c) for h, c in wanted if h == host)
        expr = f"{q.unexplained(f'host={json.dumps(host)},gpu=~{_regex(gpus)}')} > 0"
        for labels, points in client.range(expr, *_steps(q, first_s, last_s)):
            key = _card(labels)
            if key is not None and points:
                at, top = max(points, key=lambda p: (p[1], -p[0]))
                out[key] = (_int(top), _int(at))
    return out


def _with_unexplained(
    row: CardUsage, found: Mapping[tuple[str, int], tuple[int, int]]
) -> CardUsage:
    hit = found.get((row.host, row.card))
    if hit is None:
        return row
    return replace(row, unexplained_max_bytes=hit[0], unexplained_max_at_s=hit[1])


def _opt(value: float | None) -> int | None:
    return None if value is None else _int(value)


def _by_card(vector: Vector) -> dict[tuple[str, int], float]:
    out: dict[tuple[str, int], float] = {}
    for labels, value in vector:
        key = _card(labels)
        if key is not None:
            out[key] = value
    return out


def _first_at(client: PromClient, q: _Queries, expr: str) -> dict[tuple[str, int], int]:
    """Per card, the first step of the window where `expr` (a filtering comparison) holds."""
    out: dict[tuple[str, int], int] = {}
    for labels, points in client.range(expr, *_steps(q, q.start_s, q.end_s)):
        key = _card(labels)
        if key is not None and points:
            at = _int(min(t for t, _ in points))
            out[key] = min(at, out.get(key, at))
    return out


def _steps(q: _Queries, first_s: float, last_s: float) -> tuple[float, float, float]:
    """(start, end, step) of a range query at --step over [first_s, last_s], inside the window."""
    step = q.step_s
    start = max(q.start_s, math.ceil(first_s / step) * step)
    end = min(q.at, math.floor(last_s / step) * step)
    return float(start), float(max(start, end)), float(step)


def _dcgm_usage(client: PromClient, q: _Queries, hosts: Sequence[str]) -> list[CardUsage]:
    """Cards of hosts that only DCGM's exporter describes: used and free in MiB, no processes."""
    if not hosts:
        return []
    dq = _Queries(tuple(hosts), q.start_s, q.end_s, q.step_s)
    exprs = {
        "n": dq.dcgm(f"count_over_time(SEL{q.rng})", DCGM_USED),
        "p50": dq.dcgm(f"quantile_over_time(0.5, SEL{q.rng})", DCGM_USED),
        "p95": dq.dcgm(f"quantile_over_time(0.95, SEL{q.rng})", DCGM_USED),
        "max": dq.dcgm(f"max_over_time(SEL{q.rng})", DCGM_USED),
        "low": dq.dcgm(f"min_over_time(SEL{q.rng})", DCGM_FREE),
    }
    got = {key: _by_card(client.instant(expr, q.at)) for key, expr in exprs.items()}
    lowest = dq.dcgm(f"min_over_time(SEL{q.rng} @ {q.at:.3f})", DCGM_FREE)
    low_at = _first_at(client, dq, f"{dq.dcgm('SEL', DCGM_FREE)} == on(host, gpu) {lowest}")
    return [
        CardUsage(
            host=key[0],
            card=key[1],
            samples=_int(n),
            error_samples=0,
            used_p50_bytes=_mib(got["p50"].get(key)),
            used_p95_bytes=_mib(got["p95"].get(key)),
            used_max_bytes=_mib(got["max"].get(key)),
            min_free_bytes=_mib(got["low"].get(key)),
            min_free_at_s=low_at.get(key),
            unexplained_max_bytes=None,
            unexplained_max_at_s=None,
            nvml_v1=False,
        )
        for key, n in sorted(got["n"].items())
    ]


def _mib(value: float | None) -> int | None:
    return None if value is None else _int(value * MIB)


SeatKey = tuple[str, int, str]


def _seat_key(labels: Labels) -> SeatKey | None:
    card = _card(labels)
    seat = labels.get("seat", "")
    return (*card, seat) if card is not None and seat else None


def _seat_stats(client: PromClient, q: _Queries) -> dict[SeatKey, tuple[int, int, int, int]]:
    """(samples, p50, p95, max) of each seat's bytes per card.

    A seat with one process series in the window (the usual case) is read from its raw samples;
    one with several (restarted, or several processes on a card) from the per-step sum of them.
    """
    raw = q.sel(m.PROCESS_USED, _SEATED)
    answers = _four(client, q, f"{raw}{q.rng}")
    series: dict[SeatKey, int] = defaultdict(int)
    for key in answers[0]:
        if key is not None:
            series[key[:3]] += 1
    several = sorted({k for k, n in series.items() if n > 1})
    out = {
        key[:3]: (_int(n), _int(answers[1][key]), _int(answers[2][key]), _int(answers[3][key]))
        for key, n in answers[0].items()
        if key is not None and series[key[:3]] == 1 and all(key in a for a in answers[1:])
    }
    if several:
        extra = f"seat=~{_regex(sorted({k[2] for k in several}))}"
        summed = _four(client, q, f"{q.seat_sum(extra)}{q.sub}")
        for key, n in summed[0].items():
            if key is not None and key[:3] in several and all(key in a for a in summed[1:]):
                out[key[:3]] = (_int(n), *(_int(a[key]) for a in summed[1:]))  # type: ignore[assignment]
    return out


def _four(
    client: PromClient, q: _Queries, ranged: str
) -> list[dict[tuple[str, int, str, str] | None, float]]:
    """count, p50, p95 and max over `ranged`, keyed by (host, card, seat, pid)."""
    return [
        {_proc_key(labels): value for labels, value in client.instant(expr, q.at)}
        for expr in (
            f"count_over_time({ranged})",
            f"quantile_over_time(0.5, {ranged})",
            f"quantile_over_time(0.95, {ranged})",
            f"max_over_time({ranged})",
        )
    ]


def _proc_key(labels: Labels) -> tuple[str, int, str, str] | None:
    key = _seat_key(labels)
    return (*key, labels.get("pid", "")) if key is not None else None


def _seat_medians(
    client: PromClient, q: _Queries, at_s: float, segment_s: int
) -> dict[SeatKey, int]:
    """Each seat's median over the `segment_s` seconds before `at_s` (the first or last part)."""
    expr = f"quantile_over_time(0.5, {q.seat_sum()}[{segment_s * 1000 - 1}ms:{q.step_s}s])"
    out: dict[SeatKey, int] = {}
    for labels, value in client.instant(expr, at_s - 0.001):
        key = _seat_key(labels)
        if key is not None:
            out[key] = _int(value)
    return out


def _foreign(client: PromClient, q: _Queries) -> list[ForeignUsage]:
    """Processes no seat claims, per card: pids, samples, first and last sight, most bytes."""
    selector = q.sel(m.PROCESS_USED, f'seat="{m.FOREIGN}"')
    # The host's snapshot time at each step the process was seen.
    seen_at = (
        f"({q.sel(m.SNAPSHOT_TIMESTAMP)} * on(host) group_right() ({selector} > bool -1)){q.sub}"
    )
    answers = [
        client.instant(expr, q.at)
        for expr in (
            f"count_over_time({selector}{q.rng})",
            f"max_over_time({selector}{q.rng})",
            f"min_over_time({seen_at})",
            f"max_over_time({seen_at})",
        )
    ]
    per_card: dict[tuple[str, int], list[list[float]]] = defaultdict(list)
    by_pid = [{_pid_key(labels): value for labels, value in a} for a in answers]
    for key, n in by_pid[0].items():
        if key is None or any(key not in part for part in by_pid[1:]):
            continue
        per_card[key[:2]].append([n, *(part[key] for part in by_pid[1:])])
    rows = [
        ForeignUsage(
            host=host,
            card=card,
            cmdline=None,  # the exporter labels a process by pid and seat, not command line
            pids=len(found),
            samples=_int(sum(f[0] for f in found)),
            first_s=_int(min(f[2] for f in found)),
            last_s=_int(max(f[3] for f in found)),
            max_bytes=_int(max(f[1] for f in found)),
        )
        for (host, card), found in per_card.items()
    ]
    return sorted(rows, key=lambda f: (f.host, f.card, f.first_s))


def _pid_key(labels: Labels) -> tuple[str, int, str] | None:
    card = _card(labels)
    return (*card, labels.get("pid", "")) if card is not None else None


def _breaches(
    client: PromClient, q: _Queries, reserve: ReserveSpec, first_s: int, last_s: int
) -> ReserveBreaches:
    """The steps where others held more of the reserve's card than it leaves them."""
    card = f'host="{reserve.host}",gpu="{reserve.card}"'
    used = f"sum by (host, gpu) ({m.CARD_USED}{{{card}}})"
    own = (
        f"sum by (host, gpu) ({m.PROCESS_USED}{{{card},seat=~{_regex(reserve.own)}}})"
        if reserve.own
        else None
    )
    others = f"({used} - ({own} or 0 * {used}))" if own else used
    if reserve.fixed_bytes is None:
        allowed = "0"
    else:
        total = f"sum by (host, gpu) ({m.CARD_TOTAL}{{{card}}})"
        held = f"sum by (host, gpu) ({m.CARD_RESERVED}{{{card}}})"
        allowed = f"clamp_min({total} - ({held} or 0 * {total}) - {reserve.fixed_bytes}, 0)"
    points = [
        (t, v)
        for _, series in client.range(f"{others} > {allowed}", *_steps(q, first_s, last_s))
        for t, v in series
    ]
    if not points:
        return ReserveBreaches(0, None, None, None, None, ())
    worst_at, worst = max(points, key=lambda p: (p[1], -p[0]))
    return ReserveBreaches(
        snapshots=len(points),
        first_s=_int(min(t for t, _ in points)),
        last_s=_int(max(t for t, _ in points)),
        worst_bytes=_int(worst),
        worst_at_s=_int(worst_at),
        holders=(),
    )


def _holders(
    client: PromClient, q: _Queries, reserves: Sequence[ReserveSpec]
) -> list[tuple[tuple[str, int], str, int]]:
    """((host, card), name, most bytes) of every process on a reserved card over the window."""
    if not reserves:
        return []
    hosts = sorted({r.host for r in reserves})
    cards = sorted({str(r.card) for r in reserves})
    selector = f"{m.PROCESS_USED}{{host=~{_regex(hosts)},gpu=~{_regex(cards)}}}"
    out: list[tuple[tuple[str, int], str, int]] = []
    for labels, value in client.instant(f"max_over_time({selector}{q.rng})", q.at):
        key = _card(labels)
        seat = labels.get("seat", m.FOREIGN)
        if key is None:
            continue
        name = f"pid {labels.get('pid', '?')}" if seat in ("", m.FOREIGN) else seat
        out.append((key, name, _int(value)))
    return out


def _with_holders(
    breaches: ReserveBreaches,
    holders: Sequence[tuple[tuple[str, int], str, int]],
    key: tuple[str, int, tuple[str, ...]],
) -> ReserveBreaches:
    """The breaches with the five largest holders other than the reserve's own seats."""
    if not breaches.snapshots:
        return breaches
    host, card, own = key
    best: dict[str, int] = {}
    for where, name, top in holders:
        if where == (host, card) and name not in own:
            best[name] = max(top, best.get(name, 0))
    ranked = sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    return ReserveBreaches(
        breaches.snapshots,
        breaches.first_s,
        breaches.last_s,
        breaches.worst_bytes,
        breaches.worst_at_s,
        tuple(Holder(name, top) for name, top in ranked),
    )


def _buckets(
    client: PromClient,
    q: _Queries,
    step_s: int,
    first_s: int,
    last_s: int,
    dcgm: Sequence[str],
) -> list[CardBuckets]:
    """Per card and chart bucket: each seat's mean bytes, the unexplained mean, the lowest free.

    Bucket b covers [b·step, (b+1)·step); it is evaluated at its last millisecond. Each bucket
    counts as one sample holding the means, so the ledger's sums ÷ samples reads the same.
    """
    width = f"[{step_s * 1000 - 1}ms]"
    start = (first_s // step_s + 1) * step_s - 0.001
    end = (last_s // step_s + 1) * step_s - 0.001
    used = f"avg_over_time({q.sel(m.CARD_USED)}{width})"
    seats = f"sum by (host, gpu, seat) (avg_over_time({q.sel(m.PROCESS_USED, _SEATED)}{width}))"
    free = f"min_over_time({q.sel(m.CARD_FREE)}{width})"
    answers = {
        "used": client.range(used, start, end, step_s),
        "seats": client.range(seats, start, end, step_s),
        "free": client.range(free, start, end, step_s),
    }
    if dcgm:
        dq = _Queries(tuple(dcgm), q.start_s, q.end_s, q.step_s)
        for key, metric in (("used", DCGM_USED), ("free", DCGM_FREE)):
            answers[key] += [
                (labels, [(t, v * MIB) for t, v in points])
                for labels, points in client.range(
                    dq.dcgm(f"{'avg' if key == 'used' else 'min'}_over_time(SEL{width})", metric),
                    start,
                    end,
                    step_s,
                )
            ]
    return _bucket_rows(answers, step_s)


def _bucket_rows(answers: dict[str, Matrix], step_s: int) -> list[CardBuckets]:
    def bucket(t: float) -> int:
        return round(t + 0.001) // step_s - 1

    used: dict[tuple[str, int], dict[int, float]] = defaultdict(dict)
    for labels, points in answers["used"]:
        key = _card(labels)
        if key is not None:
            for t, v in points:
                used[key][bucket(t)] = v
    seats: dict[tuple[str, int], dict[str, dict[int, float]]] = defaultdict(dict)
    for labels, points in answers["seats"]:
        seat = _seat_key(labels)
        if seat is not None:
            seats[seat[:2]][seat[2]] = {bucket(t): v for t, v in points}
    free: dict[tuple[str, int], dict[int, float]] = defaultdict(dict)
    for labels, points in answers["free"]:
        key = _card(labels)
        if key is not None:
            free[key] = {bucket(t): v for t, v in points}
    rows: list[CardBuckets] = []
    for key in sorted(used):
        by_seat = seats.get(key, {})
        other = {
            b: max(0.0, v - sum(layer.get(b, 0.0) for layer in by_seat.values()))
            for b, v in used[key].items()
        }
        rows.append(
            CardBuckets(
                key[0],
                key[1],
                dict.fromkeys(used[key], 1),
                other,
                by_seat,
                free.get(key, {}),
            )
        )
    return rows


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
    expr = f"max by (host, seat) (max_over_time(timestamp({selector})[{lookback_s}s:{step}s]))"
    found = client.instant(expr, q.start_s - 0.001)
    return {
        (labels.get("host", ""), labels.get("seat", "")): _int(value)
        for labels, value in found
        if (labels.get("host", ""), labels.get("seat", "")) in set(missing)
    }
