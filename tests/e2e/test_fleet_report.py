"""End to end: a week of one-minute series for 16 hosts × 8 cards, backfilled into a real
Prometheus with promtool, reported by `report --prometheus` and compared with the SQLite report
of the same readings (same flags, drifts within the percentile difference, the same broken reserve).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from inventory.ledger.store import open_ledger
from placement.cli.main import main
from tests.e2e.fleetweek import GIB, SPILL, WEEK, FleetWeek, backfill
from tests.e2e.harness import Processes, install_prometheus, start_prometheus_on

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, Path]]:
    """(Prometheus URL, catalogue, SQLite ledger) of the same week."""
    binary = install_prometheus()
    promtool = shutil.which("promtool")
    if binary is None or promtool is None:
        pytest.skip("Debian's prometheus (with promtool) is not installed; .ci/run installs it")
    work = tmp_path_factory.mktemp("fleetweek")
    week = FleetWeek(hosts=16)
    catalogue = work / "fleet.yaml"
    catalogue.write_text(yaml.safe_dump(week.catalogue()))
    data = backfill(week, work, promtool)
    ledger = work / "ledger.sqlite"
    with open_ledger(ledger) as store:
        store.append_rows(week.readings())
    processes = Processes()
    try:
        url = start_prometheus_on(processes, binary, data, work / "prometheus")
        yield url, catalogue, ledger
    finally:
        processes.stop_all()


def report(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code = main(["report", "--week", WEEK, "--json", *args])
    out = capsys.readouterr().out
    assert code == 0
    data: dict[str, Any] = json.loads(out)
    return data


def test_prometheus_report_matches_the_ledger_report(
    fleet: tuple[str, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    url, catalogue, ledger = fleet
    prom = report(capsys, "--prometheus", url, "--catalogue", str(catalogue))
    sql = report(capsys, "--ledger", str(ledger), "--catalogue", str(catalogue))
    assert prom["source"] == "prometheus" and "quantile_over_time" in prom["percentile"]
    assert "nearest-rank" in sql["percentile"]

    # Seats: the same rows, the same flags, drifts within the two percentiles' difference.
    prom_seats = {(s["seat"], s["card"]): s for s in prom["seats"]}
    sql_seats = {(s["seat"], s["card"]): s for s in sql["seats"]}
    assert set(prom_seats) == set(sql_seats)
    for key, row in sql_seats.items():
        other = prom_seats[key]
        assert other["samples"] == row["samples"], key
        assert other["max_bytes"] == row["max_bytes"], key
        # Samples step by 8 MiB: interpolation moves a percentile by less than one step.
        assert abs(other["drift_bytes"] - row["drift_bytes"]) <= 8 * 2**20, key
        assert other["flagged"] == row["flagged"], key
        assert other["grew"] == row["grew"], key
    leak = prom_seats[("fl-00-g1-a", 1)]
    assert leak["grew"] and leak["growth_bytes"] > 2 * GIB

    # The reserve broken one afternoon, by the seat that spilled onto its card.
    (prom_reserve,) = prom["reserves"]
    (sql_reserve,) = sql["reserves"]
    assert prom_reserve["violations"] == sql_reserve["violations"] == SPILL[1] - SPILL[0]
    for key in ("first_at", "last_at", "worst_bytes"):
        assert prom_reserve[key] == sql_reserve[key], key
    assert prom_reserve["holders"][0].startswith("`fl-00-g6-b`")

    # Cards: the same used maximum and lowest free, when first reached too.
    sql_cards = {(c["host"], c["card"]): c for c in sql["cards"]}
    for card in prom["cards"]:
        twin = sql_cards[(card["host"], card["card"])]
        for key in ("samples", "used_max_bytes", "min_free_bytes", "min_free_at"):
            assert card[key] == twin[key], (card["host"], card["card"], key)

    # The foreign notebook, and the host whose series stop mid-week.
    assert [(f["host"], f["card"]) for f in prom["foreign"]] == [("fl-03", 2)]
    assert any(
        "fl-05: its gpuplan_snapshot_timestamp_seconds series stop at 2026-09-11T11:59:00Z" in n
        for n in prom["notes"]
    )
