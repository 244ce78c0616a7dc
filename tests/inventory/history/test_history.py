"""One history, two sources: a host's moments and hourly rollups from a real SQLite ledger and from
Prometheus's answers (a stub opener here; tests/e2e/test_fleet_report.py asks a real Prometheus)."""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from inventory.history import CardHour, CardReading, CommandHour, History, Moment, ProcessReading
from inventory.history.ledger import LedgerHistory
from inventory.history.prometheus import PromClient, PrometheusHistory
from inventory.history.rollup import hour_of, hourly
from inventory.ledger.store import open_ledger
from inventory.snapshot import Card, Process, Snapshot

GIB = 2**30
MIB = 2**20
TOTAL = 100 * GIB
RESERVED = GIB
T0 = datetime(2026, 9, 16, 13, 58, tzinfo=UTC)  # two moments before 14:00, two after
SERVE = "vllm serve m --port 8000"
NOTEBOOK = "python notebook.py"
# (seat a's two processes, the notebook or None) per minute from T0; card 1 is in error at minute 2.
MINUTES = ((10 * GIB, 2 * GIB, None), (11 * GIB, 2 * GIB, 3 * GIB), (9 * GIB, 2 * GIB, 5 * GIB),
           (11 * GIB, 2 * GIB, None))  # fmt: skip


def snapshot(minute: int) -> Snapshot:
    first, second, notebook = MINUTES[minute]
    processes = [
        Process(pid=100, used_bytes=first, cmdline=SERVE, seat="a"),
        Process(pid=101, used_bytes=second, cmdline=SERVE, seat="a"),
    ]
    if notebook is not None:
        processes.append(Process(pid=900, used_bytes=notebook, cmdline=NOTEBOOK))
    used = sum(p.used_bytes or 0 for p in processes)
    card0 = Card(
        index=0,
        total_bytes=TOTAL,
        reserved_bytes=RESERVED,
        used_bytes=used,
        free_bytes=TOTAL - RESERVED - used,
        processes=tuple(processes),
    )
    if minute == 2:
        card1 = Card(index=1, error="GpuIsLost")
    else:  # NVML v1 only: no reserve, used counts it
        card1 = Card(index=1, total_bytes=TOTAL, used_bytes=RESERVED, free_bytes=TOTAL - RESERVED)
    return Snapshot(host="h1", taken_at=T0 + timedelta(minutes=minute), cards=(card0, card1))


def at(minute: int) -> datetime:
    return T0 + timedelta(minutes=minute)


def expected_moment(minute: int, cmdlines: bool) -> Moment:
    first, second, notebook = MINUTES[minute]
    serve, book = (SERVE, NOTEBOOK) if cmdlines else (None, None)
    processes = [ProcessReading(100, first, serve, "a"), ProcessReading(101, second, serve, "a")]
    if notebook is not None:
        processes.append(ProcessReading(900, notebook, book, None))
    used = first + second + (notebook or 0)
    card0 = CardReading(0, TOTAL, RESERVED, used, TOTAL - RESERVED - used, None, tuple(processes))
    if minute == 2:
        card1 = CardReading(1, None, None, None, None, "GpuIsLost")
    else:
        card1 = CardReading(1, TOTAL, None, RESERVED, TOTAL - RESERVED, None)
    return Moment("h1", at(minute), (card0, card1))


@pytest.fixture
def ledger_history(tmp_path: Path) -> Iterator[LedgerHistory]:
    with open_ledger(tmp_path / "l.sqlite") as ledger:
        for minute in range(len(MINUTES)):
            ledger.append(snapshot(minute))
        # Another host, and h1 outside the window: neither is read.
        ledger.append(snapshot(0).model_copy(update={"host": "h2"}))
        ledger.append(snapshot(0).model_copy(update={"taken_at": at(-60)}))
        yield LedgerHistory(ledger.connection)


def test_the_ledger_yields_each_stored_snapshot_of_the_host_as_a_moment(
    ledger_history: LedgerHistory,
) -> None:
    history: History = ledger_history
    moments = list(history.moments("h1", T0, at(4)))
    assert moments == [expected_moment(minute, cmdlines=True) for minute in range(4)]
    # Half-open: the window's end is left out.
    assert [m.taken_at for m in history.moments("h1", at(1), at(3))] == [at(1), at(2)]
    assert list(history.moments("nobody", T0, at(4))) == []


def test_rollups_bound_each_card_and_each_command_line_per_hour(
    ledger_history: LedgerHistory,
) -> None:
    rollups = ledger_history.rollups("h1", T0, at(4))
    thirteen, fourteen = hour_of(T0), hour_of(at(2))
    assert fourteen - thirteen == timedelta(hours=1)
    used = [sum(g or 0 for g in minute) for minute in MINUTES]  # 12, 16, 16, 13 GiB
    assert rollups.cards == (
        CardHour("h1", 0, thirteen, 2, 0, TOTAL - RESERVED - 16 * GIB, at(1), 16 * GIB),
        CardHour("h1", 1, thirteen, 2, 0, TOTAL - RESERVED, at(0), RESERVED),
        # At 14:00 card 0's lowest free is 16 GiB used (minute 2), and card 1 read once.
        CardHour("h1", 0, fourteen, 2, 0, TOTAL - RESERVED - used[2], at(2), used[2]),
        CardHour("h1", 1, fourteen, 1, 1, TOTAL - RESERVED, at(3), RESERVED),
    )
    assert rollups.commands == (
        # Seat a's two processes are summed at each moment: 12 GiB, then 13 GiB.
        CommandHour("h1", 0, thirteen, None, NOTEBOOK, 1, 3 * GIB, at(1), 3 * GIB, at(1)),
        CommandHour("h1", 0, thirteen, "a", SERVE, 2, 12 * GIB, at(0), 13 * GIB, at(1)),
        CommandHour("h1", 0, fourteen, None, NOTEBOOK, 1, 5 * GIB, at(2), 5 * GIB, at(2)),
        CommandHour("h1", 0, fourteen, "a", SERVE, 2, 11 * GIB, at(2), 13 * GIB, at(3)),
    )


def test_a_tie_keeps_the_earliest_moment() -> None:
    flat = [expected_moment(0, cmdlines=True), expected_moment(0, cmdlines=True)]
    later = Moment("h1", at(1), flat[1].cards)
    rollups = hourly([flat[0], later])
    assert rollups.cards[0].min_free_at == at(0)
    (serve,) = rollups.commands
    assert serve.min_at == serve.max_at == at(0) and serve.samples == 2


# --- Prometheus ------------------------------------------------------------------------------

STEP = 60


class Stub:
    """Prometheus holding the exporter's series of MINUTES, each snapshot scraped twice (a 30 s
    scrape of a one-minute poll): the second scrape of each is the same snapshot. A process
    that ends has no sample in the next scrape (as a real scrape leaves none)."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def series(self, metric: str) -> list[tuple[dict[str, str], list[tuple[float, float]]]]:
        found: dict[tuple[tuple[str, str], ...], list[tuple[float, float]]] = {}
        for minute in range(len(MINUTES)):
            shot = snapshot(minute)
            for step in (0, 30):
                t = shot.taken_at.timestamp() + step
                for labels, value in self.values(shot, metric):
                    found.setdefault(tuple(sorted(labels.items())), []).append((t, value))
        return [(dict(key), points) for key, points in found.items()]

    @staticmethod
    def values(shot: Snapshot, metric: str) -> list[tuple[dict[str, str], float]]:
        host = {"__name__": metric, "host": shot.host}
        if metric == "gpuplan_snapshot_timestamp_seconds":
            return [(host, shot.taken_at.timestamp())]
        out: list[tuple[dict[str, str], float]] = []
        for card in shot.cards:
            labels = {**host, "gpu": str(card.index), "uuid": ""}
            if metric == "gpuplan_card_error":
                out.append(({**labels, "error": card.error or ""}, 0.0 if card.ok else 1.0))
            elif metric == "gpuplan_process_used_bytes" and card.ok:
                for p in card.processes:
                    seat = {"pid": str(p.pid), "seat": p.seat or "foreign"}
                    out.append(({**labels, **seat}, float(p.used_bytes or 0)))
            elif card.ok:
                value = {
                    "gpuplan_card_total_bytes": card.total_bytes,
                    "gpuplan_card_reserved_bytes": card.reserved_bytes,
                    "gpuplan_card_used_bytes": card.used_bytes,
                    "gpuplan_card_free_bytes": card.free_bytes,
                }[metric]
                if value is not None:
                    out.append((labels, float(value)))
        return out

    def __call__(self, url: str, timeout: float) -> bytes:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
        promql = query["query"][0]
        self.asked.append(promql)
        if "start" in query:
            return answer("matrix", self.hourly(promql, query))
        if not promql.startswith(("gpuplan_", "{")):
            return answer("vector", self.instant(promql))
        # A range selector asked at the window's last millisecond: every sample in the window,
        # of one metric or of those its `__name__=~` names, of the cards its `gpu=~` names.
        metric, rest = promql.split("{", 1)
        names = re.search(r'__name__=~"([^"]*)"', rest)
        gpus = re.search(r'gpu=~"([^"]*)"', rest)
        width_ms = int(rest.rsplit("[", 1)[1].removesuffix("ms]"))
        end = float(query["time"][0])
        result = [
            {
                "metric": labels,
                "values": [[t, repr(v)] for t, v in points if end - width_ms / 1000 < t <= end],
            }
            for one in (names.group(1).split("|") if names else [metric])
            for labels, points in self.series(one)
            if gpus is None or re.fullmatch(gpus.group(1), labels.get("gpu", ""))
        ]
        return answer("matrix", [r for r in result if r["values"]])

    def hourly(self, promql: str, query: dict[str, list[str]]) -> list[dict[str, Any]]:
        """`count_over_time`, `min_over_time`, `max_over_time` or `changes` of one selector over
        a range, at each step: what the hourly rollups ask."""
        fn, rest = promql.split("(", 1)
        metric, rest = rest.split("{", 1)
        width = int(rest.rsplit("[", 1)[1].removesuffix("ms])")) / 1000
        start, end, step = (float(query[k][0]) for k in ("start", "end", "step"))
        reduce = {
            "count_over_time": len,
            "min_over_time": min,
            "max_over_time": max,
            "changes": lambda vs: sum(a != b for a, b in pairwise(vs)),
        }[fn]
        result = []
        for labels, points in self.series(metric):
            values = []
            at = start
            while at <= end:
                inside = [v for t, v in points if at - width <= t <= at]
                if inside:
                    values.append([at, repr(float(reduce(inside)))])
                at += step
            if values:
                result.append({"metric": labels, "values": values})
        return result

    def instant(self, promql: str) -> list[dict[str, Any]]:
        """The host's span: gpuplan's snapshot time is there, DCGM's figures are not."""
        if "gpuplan_snapshot_timestamp_seconds" not in promql:
            return []
        first, last = T0.timestamp(), at(len(MINUTES) - 1).timestamp()
        value = len(MINUTES) * 2 if "count_over_time" in promql else (
            first if promql.startswith("min") else last
        )  # fmt: skip
        return [{"metric": {"host": "h1"}, "value": [last, str(value)]}]


def answer(kind: str, result: list[dict[str, Any]]) -> bytes:
    return json.dumps(
        {"status": "success", "data": {"resultType": kind, "result": result}}
    ).encode()


def test_prometheus_yields_the_same_moments_less_the_command_lines() -> None:
    stub = Stub()
    history: History = PrometheusHistory(PromClient("http://prom:9090", opener=stub), step_s=STEP)
    moments = list(history.moments("h1", T0, at(4)))
    # Each arrived when Prometheus first scraped it (the stub scrapes at the snapshot's time).
    assert moments == [
        replace(expected_moment(minute, cmdlines=False), arrived_at=at(minute))
        for minute in range(4)
    ]
    # The host's span (6 instant queries), then two reads of the series' samples: those read
    # at each scrape exactly, and the cards' figures.
    assert len(stub.asked) == 6 + 2
    assert all("query_range" not in q for q in stub.asked)
    assert list(history.moments("nobody", T0, at(4))) == []


def test_prometheus_rollups_group_a_seat_and_the_unclaimed_processes() -> None:
    stub = Stub()
    history = PrometheusHistory(PromClient("http://prom:9090", opener=stub), step_s=STEP)
    rollups = history.rollups("h1", T0, at(4))
    # Each snapshot scraped twice, and both hours cut by the window: the hourly aggregates
    # decide neither, and both are read raw (once, as one run of hours).
    bounds = history.hour_bounds("h1", T0, at(4))
    assert bounds.raw_hours == (hour_of(T0), hour_of(at(2)))
    assert (bounds.cards, bounds.commands) == ((), ())
    ledger = hourly(expected_moment(minute, cmdlines=True) for minute in range(4))
    assert rollups.cards == ledger.cards
    assert rollups.commands == tuple(replace(c, cmdline=None) for c in ledger.commands)
