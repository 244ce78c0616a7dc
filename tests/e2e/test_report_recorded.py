"""End to end: `report --prometheus` reads its counts and extremes from the hourly rollups that
`gpuplan rules` records, where they cover the window, with the figures of the raw samples.

tests/e2e/test_fleet_report.py's three days of 6 hosts × 8 cards (a leak, a spill breaking a
reserve, unexplained memory, a foreign notebook, a host stopping on day 3, one host named by
`exported_host`) are backfilled with promtool; promtool then evaluates the rules of `gpuplan rules`
every hour over those scrapes (`tsdb create-blocks-from rules`, as a running Prometheus would have
recorded them). Three servers: `raw` the scrapes alone, `recorded` the scrapes and every rule
evaluation, `late` the scrapes and the rules from day 2 on (rules loaded late: some hours of the
window have none).
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from inventory.prometheus.hours import render_recording_rules
from placement.cli.main import main
from tests.e2e.fleetweek import DAY, backfill
from tests.e2e.harness import (
    Processes,
    merged_tsdb,
    openmetrics_blocks,
    prometheus_and_promtool,
    rule_blocks,
    start_prometheus_on,
)
from tests.e2e.test_fleet_report import WEEK, WINDOW, write_catalogue

pytestmark = pytest.mark.slow

RECORDED_NOTE = "read from"


@dataclass(frozen=True)
class Servers:
    catalogue: Path
    raw: str
    recorded: str
    late: str


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    binary, promtool = prometheus_and_promtool()
    work = tmp_path_factory.mktemp("recorded")
    catalogue = write_catalogue(work)
    raw = backfill(WEEK, work, promtool)
    openmetrics_blocks(promtool, _faults(work / "faults.om"), raw)
    rules = work / "rules.yml"
    rules.write_text(render_recording_rules())
    processes = Processes()
    try:
        raw_url = start_prometheus_on(processes, binary, raw, work / "raw-server")
        start_s, end_s = WEEK.start_s, WEEK.start_s + WEEK.minutes * 60
        whole = rule_blocks(promtool, raw_url, rules, work / "whole", start_s, end_s + 7200)
        late = rule_blocks(
            promtool, raw_url, rules, work / "late", start_s + DAY * 60, end_s + 7200
        )
        recorded_url = start_prometheus_on(
            processes, binary, merged_tsdb(work / "recorded", raw, whole), work / "recorded-server"
        )
        late_url = start_prometheus_on(
            processes, binary, merged_tsdb(work / "late-data", raw, late), work / "late-server"
        )
        yield Servers(catalogue, raw_url, recorded_url, late_url)
    finally:
        processes.stop_all()


# Day 2 on fl-01: card 5 in error for three hours (a second error series, one a minute), card 6
# read once an hour by an old driver (NVML v1) for a day.
ERROR_MINUTES = range(DAY + 600, DAY + 780)
V1_MINUTES = range(DAY, 2 * DAY, 60)


def _faults(text: Path) -> Path:
    """OpenMetrics of the faults above, beside the week's own series (30 s after its minutes)."""
    lines = ["# TYPE gpuplan_card_error gauge"]
    error = 'host="fl-01",gpu="5",uuid="GPU-1-5",error="ecc"'
    lines += [
        f"gpuplan_card_error{{{error}}} 1 {WEEK.start_s + t * 60 + 30}" for t in ERROR_MINUTES
    ]
    lines.append("# TYPE gpuplan_card_nvml_memory_version gauge")
    old = 'host="fl-01",gpu="6",uuid="GPU-1-6",driver="old"'
    lines += [
        f"gpuplan_card_nvml_memory_version{{{old}}} 1 {WEEK.start_s + t * 60 + 30}"
        for t in V1_MINUTES
    ]
    text.write_text("\n".join([*lines, "# EOF", ""]))
    return text


def _report(servers: Servers, url: str) -> tuple[dict[str, Any], list[str]]:
    """The report's JSON from `url` without its notes, and the notes naming the rules' hours."""
    argv = ["report", *WINDOW, "--json", "--prometheus", url, "--catalogue", str(servers.catalogue)]
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert main(argv) == 0
    # The three servers differ in their address, which the report names.
    data: dict[str, Any] = json.loads(out.getvalue().replace(url, "PROMETHEUS"))
    notes = data.pop("notes")
    return data, [n for n in notes if "recorded by `gpuplan rules`" in n]


@pytest.fixture(scope="module")
def from_raw(servers: Servers) -> dict[str, Any]:
    data, notes = _report(servers, servers.raw)
    assert notes == []
    return data


def test_the_report_from_recorded_hours_is_the_report_from_raw_samples(
    servers: Servers, from_raw: dict[str, Any]
) -> None:
    recorded, notes = _report(servers, servers.recorded)
    # 72 hours less the two cut by the raw edges: the rules' hours end off the clock hour.
    (note,) = notes
    assert "from 71 hours recorded by `gpuplan rules`" in note or (
        "from 70 hours recorded by `gpuplan rules`" in note
    ), note
    assert recorded == from_raw
    # The figures the rules answered are there, not empty.
    assert {c["host"] for c in recorded["cards"]} >= {"fl-00", "fl-01", "fl-05"}
    assert all(s["samples"] > 0 and s["max_bytes"] > 0 for s in recorded["seats"])
    cards = {(c["host"], c["card"]): c for c in recorded["cards"]}
    assert cards[("fl-01", 5)]["error_samples"] == len(ERROR_MINUTES)
    assert [k for k, c in cards.items() if c["nvml_v1"]] == [("fl-01", 6)]


def test_hours_the_rules_did_not_record_are_read_raw(
    servers: Servers, from_raw: dict[str, Any]
) -> None:
    late, notes = _report(servers, servers.late)
    assert notes == []
    assert late == from_raw
