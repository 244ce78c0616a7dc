"""The cut of a window into a raw head, recorded hours and a raw tail (`tiles.tiling`): every
millisecond of the window in exactly one part, the hours on the rules' own offset, the edges a
second or more, and no hour the rules have not yet recorded."""

from __future__ import annotations

import itertools
import random

import pytest

from inventory.prometheus.range import recorded_tiling
from inventory.prometheus.tiles import HOUR_MS, RULE_DELAY_S, Tiling, check, tiling
from seats.errors import CannotDecideError

DELAY_MS = RULE_DELAY_S * 1000
WEEK_S = 7 * 86400
START_S = 1_788_739_200  # Monday 2026-09-07 00:00 UTC


def _parts(t: Tiling) -> list[tuple[int, int]]:
    """Every part as [first ms, last ms], both included, in time order."""
    hours = [
        (t.first_ms + k * HOUR_MS - HOUR_MS + 1, t.first_ms + k * HOUR_MS) for k in range(t.hours)
    ]
    return [t.head, *hours, t.tail]


def test_a_week_is_cut_on_the_rules_offset_with_raw_edges() -> None:
    # The rules evaluate 33 min 36.334 s past each hour; the last before the week's end recorded
    # the hour ending 5 minutes before it.
    newest_ms = (START_S + WEEK_S) * 1000 - HOUR_MS + 2_016_334
    t = tiling(START_S, START_S + WEEK_S, newest_ms)
    assert t is not None
    assert t.first_ms == START_S * 1000 + HOUR_MS + 2_016_334 - DELAY_MS
    assert t.last_ms == newest_ms - DELAY_MS
    assert t.hours == 167
    assert t.head == (START_S * 1000, START_S * 1000 + 2_016_334 - DELAY_MS)
    assert t.tail == (newest_ms - DELAY_MS + 1, (START_S + WEEK_S) * 1000 - 1)
    assert t.evaluated_s(t.last_ms) == newest_ms / 1000
    assert t.recorded_width == f"[{166 * HOUR_MS}ms]"


@pytest.mark.parametrize("seed", range(200))
def test_every_millisecond_of_the_window_is_in_one_part(seed: int) -> None:
    rng = random.Random(seed)
    start_s = START_S + rng.randrange(0, 86400)
    end_s = start_s + rng.randrange(1, 3 * 86400)
    newest_ms = end_s * 1000 + rng.randrange(-5 * HOUR_MS, 2 * HOUR_MS)
    t = tiling(start_s, end_s, newest_ms)
    if t is None:
        # No hour fits whole between edges of a second, or none is recorded yet.
        assert end_s - start_s < 2 * 3600 + 2 or newest_ms - DELAY_MS < start_s * 1000 + HOUR_MS
        return
    parts = _parts(t)
    assert parts[0][0] == start_s * 1000 and parts[-1][1] == end_s * 1000 - 1
    for (_, last), (first, _) in itertools.pairwise(parts):
        assert first == last + 1
    assert t.head[1] - t.head[0] >= 1000 and t.tail[1] - t.tail[0] >= 998
    # On the rules' offset, and none after the newest evaluation.
    assert (t.first_ms - (newest_ms - DELAY_MS)) % HOUR_MS == 0
    assert t.last_ms <= newest_ms - DELAY_MS
    # The most: the next hour would not leave a second of tail, or is not recorded yet.
    assert t.last_ms + HOUR_MS > min(end_s * 1000 - 1000, newest_ms - DELAY_MS)


def test_a_window_shorter_than_an_hour_and_two_seconds_has_no_recorded_hour() -> None:
    assert tiling(START_S, START_S + 3600, START_S * 1000 + 10 * HOUR_MS) is None


class _NoAtModifier:
    """A Prometheus before 2.33: it has the rules' series but refuses the `@` modifier."""

    def __init__(self, newest_s: float) -> None:
        self.newest_s = newest_s
        self.asked: list[str] = []

    def instant(self, promql: str, at_s: float) -> list[tuple[dict[str, str], float]]:
        self.asked.append(promql)
        if " @ " in promql:
            raise CannotDecideError(f"Prometheus refused {promql}: parse error: unexpected <@>")
        return [({"host": "fv-ml1"}, 167.0)]

    def range(
        self, promql: str, start_s: float, end_s: float, step_s: float
    ) -> list[tuple[dict[str, str], list[tuple[float, float]]]]:
        self.asked.append(promql)
        return [({}, [(end_s, self.newest_s)])]


def test_a_prometheus_refusing_the_at_modifier_is_read_raw() -> None:
    newest_s = START_S + WEEK_S - 3600 + 2016.334
    client = _NoAtModifier(newest_s)
    assert recorded_tiling(client, START_S, START_S + WEEK_S) is None  # type: ignore[arg-type]
    assert any(" @ " in q for q in client.asked)


def test_a_part_of_the_window_is_cut_on_the_same_hours() -> None:
    newest_ms = (START_S + WEEK_S) * 1000 - HOUR_MS + 2_016_334
    week = tiling(START_S, START_S + WEEK_S, newest_ms)
    assert week is not None
    day = week.within(START_S + 86400, START_S + 2 * 86400)
    assert day is not None
    assert (day.first_ms - week.first_ms) % HOUR_MS == 0 and day.first_ms > week.first_ms
    assert day.last_ms <= week.last_ms and day.hours == 23
    # A part reaching past the hours recorded has none after the window's last.
    late = week.within(START_S + WEEK_S - 3 * 3600, START_S + WEEK_S)
    assert late is not None and late.last_ms == week.last_ms


class _Recorded:
    """Prometheus's answers to `check`'s queries about a week of hours: the heartbeat's samples
    at each hour's evaluation (`on`), any a millisecond to 5 minutes before one (`off`), and each
    rule's hours on the host seen most."""

    def __init__(self, t: Tiling, names: list[str]) -> None:
        self.first_s = t.evaluated_s(t.first_ms)
        self.on = dict.fromkeys(range(t.hours), 3.0)  # 3 hosts
        self.off: set[int] = set()
        self.unseen = 0  # samples no hour's evaluation sees
        self.hours = dict.fromkeys(names, t.hours)

    def instant(self, promql: str, at_s: float) -> list[tuple[dict[str, str], float]]:
        if promql.startswith("sum("):
            return [({}, sum(self.on.values()) + self.unseen)]
        return [({"host": "fv-ml1"}, float(len(self.on)))]  # topk(1, …)

    def range(
        self, promql: str, start_s: float, end_s: float, step_s: float
    ) -> list[tuple[dict[str, str], list[tuple[float, float]]]]:
        if promql.startswith("count by (__name__)"):
            return [({"__name__": n}, [(0.0, 1.0)] * k) for n, k in self.hours.items()]
        if start_s == self.first_s:
            return [({}, [(self.first_s + k * 3600, v) for k, v in sorted(self.on.items())])]
        return (
            [({}, [(self.first_s + k * 3600, 1.0) for k in sorted(self.off)])] if self.off else []
        )


@pytest.mark.parametrize(
    ("fault", "whole"),
    [
        ("none", True),
        ("an hour the rules did not run", False),
        ("an early sample in its hour's place", False),
        ("a sample beside its hour's", False),
        ("a rule that failed an hour", False),
    ],
)
def test_the_check_takes_only_hours_recorded_once_each(fault: str, whole: bool) -> None:
    newest_ms = (START_S + WEEK_S) * 1000 - HOUR_MS + 2_016_334
    t = tiling(START_S, START_S + WEEK_S, newest_ms)
    assert t is not None
    names = ["gpuplan:card_used_bytes:count_1h", "gpuplan:card_used_bytes:max_1h"]
    client = _Recorded(t, names)
    if fault == "an hour the rules did not run":
        del client.on[40]
    elif fault == "an early sample in its hour's place":  # a renamed rule file: 2 min earlier
        client.off.add(40)
    elif fault == "a sample beside its hour's":  # shadowed by the hour's own, or long before
        client.unseen += 1
    elif fault == "a rule that failed an hour":
        client.hours[names[1]] -= 1
    assert check(client, t, "gpuplan:snapshot_timestamp_seconds:count_1h", names) is whole
