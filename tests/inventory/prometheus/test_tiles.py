"""The cut of a window into a raw head, recorded hours and a raw tail (`tiles.tiling`): every
millisecond of the window in exactly one part, the hours on the rules' own offset, the edges a
second or more, and no hour the rules have not yet recorded."""

from __future__ import annotations

import itertools
import random

import pytest

from inventory.prometheus.range import recorded_tiling
from inventory.prometheus.tiles import HOUR_MS, RULE_DELAY_S, Tiling, tiling
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
