"""The PromQL of hourly rollups: each clock hour's sample count, lowest and highest value of a
host's series, from `count_over_time`/`min_over_time`/`max_over_time` at `step=1h`
(`inventory.history.prometheus` turns them into the history's rollups).

An hour [h, h + 1 h) is read as a range of one hour less a millisecond evaluated at its last
millisecond, so every sample falls in exactly one hour.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from inventory.prometheus import metrics as m
from inventory.prometheus.range import PromClient, host_queries

HOUR_S = 3600
_RANGE = f"[{HOUR_S * 1000 - 1}ms]"

Labels = Mapping[str, str]


@dataclass
class SeriesHours:
    """One series' samples per clock hour (by the hour's start, unix seconds), and their extremes."""

    labels: dict[str, str]
    count: dict[int, int] = field(default_factory=dict)
    low: dict[int, float] = field(default_factory=dict)
    high: dict[int, float] = field(default_factory=dict)


@dataclass(frozen=True)
class HostHours:
    """A host's series per clock hour over [first_hour_s, end_hour_s), by metric name; the
    snapshot time's series also carries its `changes` per hour (in `changes`)."""

    host: str
    first_hour_s: int
    end_hour_s: int
    series: dict[str, list[SeriesHours]]
    changes: dict[int, int]


# What each metric is asked per hour: how many samples, the lowest, the highest.
_ASKED = {
    m.SNAPSHOT_TIMESTAMP: ("count", "min", "max"),
    m.CARD_USED: ("count", "max"),
    m.CARD_FREE: ("count", "min", "max"),
    m.CARD_ERROR: ("max",),
    m.PROCESS_USED: ("count", "min", "max"),
}


def hour_start(seconds: float) -> int:
    """The start of the UTC hour holding `seconds`."""
    whole = int(seconds // 1)
    return whole - whole % HOUR_S


def host_hours(
    client: PromClient, host: str, start_s: int, end_s: int, host_label: str | None = None
) -> HostHours | None:
    """`host`'s series per clock hour touching [start_s, end_s), and the hour before (whose cards
    an instant read at the first moment may still see); None when it has no gpuplan series."""
    first = hour_start(start_s) - HOUR_S
    end = hour_start(end_s - 1) + HOUR_S
    q = host_queries(client, host, first, end, host_label)
    if q is None:
        return None
    exprs = {
        (metric, fn): f"{fn}_over_time({q.sel(metric)}{_RANGE})"
        for metric, fns in _ASKED.items()
        for fn in fns
    }
    exprs[(m.SNAPSHOT_TIMESTAMP, "changes")] = f"changes({q.sel(m.SNAPSHOT_TIMESTAMP)}{_RANGE})"
    # Each hour's last millisecond, from the first hour's to the last's.
    at = (first + HOUR_S - 0.001, end - 0.001, float(HOUR_S))
    with ThreadPoolExecutor(max_workers=len(exprs)) as pool:
        asked = {key: pool.submit(client.range, expr, *at) for key, expr in exprs.items()}
        answers = {key: future.result() for key, future in asked.items()}
    series: dict[str, dict[tuple[tuple[str, str], ...], SeriesHours]] = defaultdict(dict)
    changes: dict[int, int] = {}
    for (metric, fn), answer in answers.items():
        for labels, points in answer:
            plain = {k: v for k, v in labels.items() if k != "__name__"}
            if fn == "changes":
                changes.update((_hour(t), round(v)) for t, v in points)
                continue
            key = tuple(sorted(plain.items()))
            found = series[metric].setdefault(key, SeriesHours(plain))
            if fn == "count":
                found.count.update((_hour(t), round(v)) for t, v in points)
            else:
                (found.low if fn == "min" else found.high).update((_hour(t), v) for t, v in points)
    return HostHours(
        host,
        first,
        end,
        {metric: list(found.values()) for metric, found in series.items()},
        changes,
    )


def _hour(evaluated_at: float) -> int:
    """The start of the hour an answer's point (evaluated at the hour's last millisecond) covers."""
    return round(evaluated_at + 0.001) - HOUR_S
