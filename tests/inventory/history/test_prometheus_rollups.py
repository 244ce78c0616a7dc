"""Hourly rollups from a real Prometheus: `count_over_time`/`min_over_time`/`max_over_time` at
step=1h decide the level hours, and only the others are read raw; the result equals `hourly` of
the host's moments either way.

Eight hours of one-minute scrapes of host rh-1 (2 cards), backfilled with promtool. Hour 0 is cut
by the window; seat b grows in hour 2; a notebook comes and goes in hour 3; seat a runs two
processes in hour 4; card 1 is in error for five minutes of hour 5. Hours 1, 6 and 7 stay level.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from inventory.history.model import CardHour, CommandHour
from inventory.history.prometheus import PromClient, PrometheusHistory
from inventory.history.rollup import hourly
from tests.e2e.harness import (
    Processes,
    openmetrics_blocks,
    prometheus_and_promtool,
    start_prometheus_on,
)

pytestmark = pytest.mark.slow

GIB = 2**30
TOTAL = 100 * GIB
RESERVED = GIB
T0 = datetime(2026, 9, 16, 10, tzinfo=UTC)
HOURS = 8
HOST = 'host="rh-1"'


def processes(minute: int, card: int) -> list[tuple[int, str, int]]:
    """(pid, seat label, bytes) on a card at a minute from T0."""
    if card == 1:
        return [(300, "c", 20 * GIB)]
    found = [(100, "a", 10 * GIB), (200, "b", 4 * GIB + (GIB if 150 <= minute < 180 else 0))]
    if 200 <= minute < 220:
        found.append((900, "foreign", 3 * GIB))
    if 240 <= minute < 300:
        found.append((101, "a", 2 * GIB))
    return found


def in_error(minute: int, card: int) -> bool:
    return card == 1 and 310 <= minute < 315


def openmetrics() -> str:
    """The exporter's series of the eight hours, family by family, each in time order."""
    series: dict[tuple[str, str], list[str]] = {}

    def add(family: str, labels: str, value: float, minute: int) -> None:
        stamp = int(T0.timestamp()) + minute * 60
        series.setdefault((family, labels), []).append(f"{value:.0f} {stamp}")

    for minute in range(HOURS * 60):
        add("gpuplan_snapshot_timestamp_seconds", HOST, T0.timestamp() + minute * 60, minute)
        for card in (0, 1):
            labels = f'{HOST},gpu="{card}",uuid="GPU-{card}"'
            if in_error(minute, card):
                add("gpuplan_card_error", f'{labels},error="GpuIsLost"', 1, minute)
                continue
            add("gpuplan_card_error", f'{labels},error=""', 0, minute)
            used = sum(b for _, _, b in processes(minute, card))
            add("gpuplan_card_total_bytes", labels, TOTAL, minute)
            add("gpuplan_card_reserved_bytes", labels, RESERVED, minute)
            add("gpuplan_card_used_bytes", labels, used, minute)
            add("gpuplan_card_free_bytes", labels, TOTAL - RESERVED - used, minute)
            for pid, seat, held in processes(minute, card):
                add(
                    "gpuplan_process_used_bytes",
                    f'{labels},pid="{pid}",seat="{seat}"',
                    held,
                    minute,
                )
    lines: list[str] = []
    families = sorted({family for family, _ in series})
    for family in families:
        lines.append(f"# TYPE {family} gauge")
        for (name, labels), samples in series.items():
            if name == family:
                lines.extend(f"{family}{{{labels}}} {sample}" for sample in samples)
    return "\n".join([*lines, "# EOF", ""])


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary, promtool = prometheus_and_promtool()
    work = tmp_path_factory.mktemp("rollups")
    text = work / "hours.om"
    text.write_text(openmetrics())
    data = work / "data"
    openmetrics_blocks(promtool, text, data)
    processes = Processes()
    try:
        yield start_prometheus_on(processes, binary, data, work / "prometheus")
    finally:
        processes.stop_all()


def hour(k: int) -> datetime:
    return T0 + timedelta(hours=k)


START, END = T0 + timedelta(minutes=30), hour(HOURS)


def test_level_hours_are_decided_by_the_hourly_aggregates(prometheus: str) -> None:
    history = PrometheusHistory(PromClient(prometheus))
    bounds = history.hour_bounds("rh-1", START, END)
    assert bounds.raw_hours == (hour(0), hour(2), hour(3), hour(4), hour(5))
    assert sorted({c.hour for c in bounds.cards}) == [hour(1), hour(6), hour(7)]
    used0 = 14 * GIB
    assert bounds.cards[:2] == (
        CardHour("rh-1", 0, hour(1), 60, 0, TOTAL - RESERVED - used0, hour(1), used0),
        CardHour("rh-1", 1, hour(1), 60, 0, TOTAL - RESERVED - 20 * GIB, hour(1), 20 * GIB),
    )
    assert bounds.commands[:3] == (
        CommandHour("rh-1", 0, hour(1), "a", None, 60, 10 * GIB, hour(1), 10 * GIB, hour(1)),
        CommandHour("rh-1", 0, hour(1), "b", None, 60, 4 * GIB, hour(1), 4 * GIB, hour(1)),
        CommandHour("rh-1", 1, hour(1), "c", None, 60, 20 * GIB, hour(1), 20 * GIB, hour(1)),
    )


def test_rollups_equal_the_hourly_rollups_of_the_moments(prometheus: str) -> None:
    history = PrometheusHistory(PromClient(prometheus))
    moments = list(history.moments("rh-1", START, END))
    assert len(moments) == HOURS * 60 - 30
    expected = hourly(moments)
    rollups = history.rollups("rh-1", START, END)
    assert rollups == expected
    # Seat b's growth at 12:30 (hour 2), read raw: its highest and when first reached.
    (grown,) = [c for c in rollups.commands if c.hour == hour(2) and c.seat == "b"]
    assert (grown.max_bytes, grown.max_at) == (5 * GIB, T0 + timedelta(minutes=150))
    # Card 1's five minutes in error (hour 5).
    (lost,) = [c for c in rollups.cards if c.hour == hour(5) and c.card == 1]
    assert (lost.samples, lost.error_samples) == (55, 5)


def test_raw_moments_of_chosen_hours(prometheus: str) -> None:
    history = PrometheusHistory(PromClient(prometheus))
    found = list(history.moments_in_hours("rh-1", [hour(3), hour(2), hour(6)]))
    assert [m.taken_at for m in found] == [
        *(hour(2) + timedelta(minutes=k) for k in range(120)),
        *(hour(6) + timedelta(minutes=k) for k in range(60)),
    ]
    notebook = [m for m in found if any(p.pid == 900 for c in m.cards for p in c.processes)]
    assert len(notebook) == 20
    assert list(history.moments_in_hours("nobody", [hour(1)])) == []


def test_bounds_give_hours_whose_bytes_moved_undated_and_read_nothing_raw(
    prometheus: str,
) -> None:
    history = PrometheusHistory(PromClient(prometheus))
    history.moments = None  # type: ignore[assignment,method-assign]  # no raw read may happen
    bounds = history.bounds("rh-1", START, END)
    # Hour 2 (seat b grew) joins the level hours; a notebook's 20 minutes (hour 3), seat a's
    # second process (hour 4) and an error (hour 5) are not bounds of every moment.
    assert sorted({c.hour for c in bounds.cards}) == [hour(1), hour(2), hour(6), hour(7)]
    free0 = TOTAL - RESERVED - 14 * GIB
    grown = [c for c in bounds.cards if c.hour == hour(2)]
    assert grown == [
        CardHour("rh-1", 0, hour(2), 60, 0, free0 - GIB, None, 15 * GIB, dated=False),
        CardHour("rh-1", 1, hour(2), 60, 0, TOTAL - RESERVED - 20 * GIB, hour(2), 20 * GIB),
    ]
    (b,) = [c for c in bounds.commands if c.hour == hour(2) and c.seat == "b"]
    assert b == CommandHour(
        "rh-1", 0, hour(2), "b", None, 60, 4 * GIB, hour(2), 5 * GIB, hour(2), dated=False
    )
    # The level hours are the dated rollups `hour_bounds` gives.
    level = history.hour_bounds("rh-1", START, END)
    assert [c for c in bounds.cards if c.hour != hour(2)] == list(level.cards)
