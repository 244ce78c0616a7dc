"""Reading the hourly rollups `gpuplan rules` records: a window cut into recorded hours and raw
edges, and each figure of the window as the sum (or extreme) of its parts.

A rule evaluated at t (every hour, the group's own offset past it) records the hour of scrapes
[t − RULE_DELAY − 1 h + 1 ms, t − RULE_DELAY]: consecutive evaluations tile time exactly. A window
[start, end) is read as

    head  [start, e₁ − 1 h]              raw samples
    hours (e_k − 1 h, e_k], k = 1 … n   recorded, e_k = e₁ + (k − 1) h
    tail  (e_n, end)                     raw samples

so a series' count over the window is count(head) + Σ_k count_k + count(tail), its most and
least the extremes of the same parts: equal to the raw figure whenever the rule ran at every e_k
and recorded nothing else there (`check`); otherwise the caller reads raw.
All times here are integer milliseconds, as Prometheus stores them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from inventory.prometheus import metrics as m

HOUR_MS = 3_600_000
HOUR_S = 3600
# Each rule reads the hour that ended this long before its evaluation: every scrape of it is
# stored by then (a scrape is stamped when it starts, stored when it ends).
RULE_DELAY_S = 300
RULE_RANGE = f"[{HOUR_MS - 1}ms] offset {RULE_DELAY_S // 60}m"
# Raw edges at least this long, so each is a range Prometheus accepts.
_EDGE_MS = 1000

Labels = Mapping[str, str]
Vector = list[tuple[Labels, float]]
Matrix = list[tuple[Labels, list[tuple[float, float]]]]
# How a function's recorded hours combine into the window's figure.
_COMBINED = {"count": "sum", "sum": "sum", "max": "max", "min": "min"}
# The label telling a window's parts apart while Prometheus combines them.
_PART = "gpuplan_window_part"


class Client(Protocol):
    def instant(self, promql: str, at_s: float) -> Vector: ...

    def range(self, promql: str, start_s: float, end_s: float, step_s: float) -> Matrix: ...


def recorded_name(metric: str, fn: str) -> str:
    """The series a rule records `fn`_over_time of `metric` over an hour in:
    `gpuplan:<metric without gpuplan_>:<fn>_1h` (Prometheus's level:metric:operations)."""
    return f"gpuplan:{metric.removeprefix('gpuplan_')}:{fn}_1h"


# The rule whose hours tell whether `gpuplan rules` runs, and on which offset: one series a host.
HEARTBEAT = recorded_name(m.SNAPSHOT_TIMESTAMP, "count")


def newest_evaluation_ms(client: Client, name: str, until_s: float) -> int | None:
    """The newest evaluation of the rule recording `name` in the two hours up to `until_s`
    (its sample's own time), None where it recorded nothing then (`gpuplan rules` not loaded)."""
    found = client.range(f"max(timestamp({name}))", until_s - 2 * HOUR_S, until_s, 60)
    newest = max((v for _, points in found for _, v in points), default=None)
    return None if newest is None else round(newest * 1000)


@dataclass(frozen=True)
class Tiling:
    """A window [start_ms, end_ms) as a raw head, recorded hours ending first_ms … last_ms (one
    hour apart, n ≥ 1) and a raw tail; each edge lasts at least a second."""

    start_ms: int
    end_ms: int
    first_ms: int
    last_ms: int

    @property
    def hours(self) -> int:
        return (self.last_ms - self.first_ms) // HOUR_MS + 1

    @property
    def head(self) -> tuple[int, int]:
        """[a, b] of the raw head, both ends included."""
        return self.start_ms, self.first_ms - HOUR_MS

    @property
    def tail(self) -> tuple[int, int]:
        """[a, b] of the raw tail, both ends included."""
        return self.last_ms + 1, self.end_ms - 1

    def evaluated_s(self, end_ms: int) -> float:
        """When the rule recorded the hour ending `end_ms`."""
        return (end_ms + RULE_DELAY_S * 1000) / 1000

    def within(self, start_s: int, end_s: int) -> Tiling | None:
        """The recorded hours of these (checked) inside [start_s, end_s), with their raw edges."""
        found = tiling(start_s, end_s, self.last_ms + RULE_DELAY_S * 1000)
        return found if found is not None and found.first_ms >= self.first_ms else None

    @property
    def recorded_width(self) -> str:
        """A range from the first hour's evaluation to the last's (a millisecond at least)."""
        return f"[{max(self.last_ms - self.first_ms, 1)}ms]"


def tiling(start_s: int, end_s: int, newest_ms: int) -> Tiling | None:
    """The recorded hours inside [start_s, end_s) of a rule whose newest evaluation is
    `newest_ms` (every evaluation is a whole number of hours from it), leaving raw edges of a
    second or more; None where no whole hour fits."""
    start_ms, end_ms = start_s * 1000, end_s * 1000
    offset_ms = (newest_ms - RULE_DELAY_S * 1000) % HOUR_MS  # each hour's end, past the hour
    first = start_ms - start_ms % HOUR_MS + offset_ms
    while first - HOUR_MS - start_ms < _EDGE_MS:
        first += HOUR_MS
    last = min(end_ms - _EDGE_MS, newest_ms - RULE_DELAY_S * 1000)
    last -= (last - first) % HOUR_MS
    if last < first:
        return None
    return Tiling(start_ms, end_ms, first, last)


def check(client: Client, t: Tiling, heartbeat: str, names: Sequence[str]) -> bool:
    """Whether the rules recorded each hour of `t`, and only then: the group's `heartbeat` rule
    (one series a host) has a sample at every hour's evaluation, every one of its samples in the
    hours' span is at one (none a millisecond to 5 minutes before: an offset moved by a renamed
    rule file would count some scrapes twice), and each rule of `names` recorded every hour on
    the host the heartbeat saw most (a rule fails alone when its query does)."""
    first_s, last_s = t.evaluated_s(t.first_ms), t.evaluated_s(t.last_ms)
    width = t.recorded_width
    with ThreadPoolExecutor(max_workers=4) as pool:
        # Pinned with `@` as `window_figure` is: a Prometheus without it (before 2.33) refuses
        # here, and the caller reads raw.
        total = pool.submit(
            client.instant, f"sum(count_over_time({heartbeat}{width} @ {last_s:.3f}))", last_s
        )
        most = pool.submit(client.instant, f"topk(1, count_over_time({heartbeat}{width}))", last_s)
        on = pool.submit(client.range, f"count({heartbeat})", first_s, last_s, HOUR_S)
        off = pool.submit(
            client.range, f"count({heartbeat})", first_s - 0.001, last_s - 0.001, HOUR_S
        )
        points = [v for _, found in on.result() for _, v in found]
        whole = (
            len(points) == t.hours
            and round(sum(points)) == round(sum(v for _, v in total.result()))
            and not any(found for _, found in off.result())
        )
        if not whole or not most.result():
            return False
    labels = most.result()[0][0]
    matchers = ",".join(
        f"{k}={json.dumps(v)}" for k, v in sorted(labels.items()) if k != "__name__"
    )
    pattern = "|".join(re.escape(n) for n in names)
    per_rule = client.range(
        f'count by (__name__) ({{__name__=~"{pattern}",{matchers}}})', first_s, last_s, HOUR_S
    )
    hours = {series.get("__name__"): len(found) for series, found in per_rule}
    return all(hours.get(n) == t.hours for n in names)


def window_figure(client: Client, t: Tiling, raw: str, recorded: str, fn: str) -> Vector:
    """`fn` (count, sum, max or min) of each series of `raw` (a selector) over the window: its
    head, its recorded hours (`recorded`: the rule's series of the same matchers) and its tail,
    each pinned to its own time with `@`, tagged apart and combined by Prometheus (a sum for
    counts and sums, else the extreme) in one query."""
    (h0, h1), (t0, t1) = t.head, t.tail
    last = t.evaluated_s(t.last_ms)
    parts = [
        f"{fn}_over_time({raw}[{h1 - h0}ms] @ {h1 / 1000:.3f})",
        f"{_COMBINED[fn]}_over_time({recorded}{t.recorded_width} @ {last:.3f})",
        f"{fn}_over_time({raw}[{t1 - t0}ms] @ {t1 / 1000:.3f})",
    ]
    tagged = " or ".join(
        f'label_replace({part}, "{_PART}", "{i}", "", "")' for i, part in enumerate(parts)
    )
    return client.instant(f"{_COMBINED[fn]} without ({_PART}) ({tagged})", last)


def recorded_hours(client: Client, t: Tiling, recorded: str) -> Matrix:
    """Each recorded hour of the series of `recorded` (a selector): (the hour's end, a whole
    number of ms, and the value), read at the very millisecond the rule recorded it."""
    answer = client.range(recorded, t.evaluated_s(t.first_ms), t.evaluated_s(t.last_ms), HOUR_S)
    delay_ms = RULE_DELAY_S * 1000
    return [
        (labels, [(round(s * 1000) - delay_ms, v) for s, v in points]) for labels, points in answer
    ]
