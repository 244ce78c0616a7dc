"""One definition of "others on a reserve's card" and of "unexplained", four languages, one table.

`placement.fit.reserves` (Python) is the definition. The report applies it once, in
`inventory.history.figures.breach_points`, to what either source reads of the card at each moment:
the ledger's SQL (`report_queries.reserve_readings`, and the window's `unexplained` column) and the
report's PromQL (`range.reserve_queries`); the alert's PromQL (`alerts._reserve_broken`) is its own.
The PromQL is evaluated by Prometheus itself (`promtool test rules`) on the series the exporter
writes for the same snapshot. Same inputs, same answers.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from inventory.history.figures import ReserveBreaches, ReserveReading, breach_points, breaches_of
from inventory.ledger import report_queries as q
from inventory.ledger.store import open_ledger
from inventory.prometheus.exporter import write_textfile
from inventory.prometheus.metrics import SnapshotCollector, registry_for
from inventory.prometheus.range import ReserveSpec, _Queries, reserve_queries
from inventory.snapshot import Card, Process, Snapshot
from placement.fit.capacity import unexplained_bytes
from placement.fit.reserves import reserve_breach_bytes
from placement.report.alerts import _reserve_broken
from seats.model import Reserve
from seats.units import GiB, MiB

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
TOTAL = 100 * GiB


def reserve_breaches(
    conn: q.Connection, host: str, card: int, own: list[str] | tuple[str, ...], fixed: int | None
) -> ReserveBreaches:
    """The ledger's breaches of a reserve, as the report's ledger source reduces them."""
    points = breach_points(q.reserve_readings(conn, host, card, own), fixed)
    return breaches_of(points, lambda: q.holders_on(conn, host, card), own)


@dataclass(frozen=True)
class Case:
    name: str
    used: int
    processes: tuple[tuple[str | None, int], ...]  # (seat or None, bytes)
    reserve: int | None  # None: the whole card
    driver: int | None = GiB  # NVML v2's driver reserve; None: a v1-only card

    def card(self) -> Card:
        driver = self.driver or 0
        return Card(
            index=0,
            uuid="GPU-0",
            total_bytes=TOTAL,
            reserved_bytes=self.driver,
            used_bytes=self.used,
            free_bytes=TOTAL - driver - self.used,
            processes=tuple(
                Process(pid=100 + i, used_bytes=n, cmdline=f"serve {seat or 'x'}", seat=seat)
                for i, (seat, n) in enumerate(self.processes)
            ),
        )


OWN = ("big",)
CASES = (
    Case("whole card, its own seat alone", 60 * GiB, (("big", 60 * GiB),), None),
    Case("whole card, anyone else breaks it", 61 * GiB, (("big", 60 * GiB), (None, GiB)), None),
    # Bytes no process explains (another container's, a leak in the driver) count against it.
    Case("whole card, used that no process explains", 60 * GiB + MiB, (("big", 60 * GiB),), None),
    Case("80 GiB reserve, others within the 19 GiB left", 19 * GiB, (("chat", 19 * GiB),), 80 * GiB),
    Case("80 GiB reserve, others one byte over", 19 * GiB + 1, (("chat", 19 * GiB + 1),), 80 * GiB),
    Case("80 GiB reserve, v1 card: used includes nothing more here", 20 * GiB, (("chat", 20 * GiB),), 80 * GiB, None),
    Case("a reserve larger than the card leaves nothing", GiB, (("chat", GiB),), 120 * GiB),
    Case("an idle card", 0, (), None),
)  # fmt: skip


def host_of(i: int) -> str:
    return f"c{i}"


def snapshot_of(i: int, case: Case) -> Snapshot:
    return Snapshot(host=host_of(i), taken_at=T0, cards=(case.card(),))


def python_answers() -> dict[str, tuple[int | None, int | None]]:
    return {
        case.name: (
            reserve_breach_bytes(case.card(), OWN, case.reserve),
            unexplained_bytes(case.card()),
        )
        for case in CASES
    }


def test_the_table_is_not_trivial() -> None:
    answers = python_answers()
    assert {breach is None for breach, _ in answers.values()} == {True, False}
    assert answers["whole card, used that no process explains"] == (MiB, MiB)
    assert answers["80 GiB reserve, others one byte over"][0] == 19 * GiB + 1


def test_the_ledger_sql_agrees(tmp_path: Path) -> None:
    with open_ledger(tmp_path / "l.sqlite") as ledger:
        for i, case in enumerate(CASES):
            ledger.append(snapshot_of(i, case))
        conn = ledger.connection
        start = int(T0.timestamp())
        q.prepare_window(conn, start, start + 60, lambda host, cmd, parents: None)
        unexplained = dict(
            conn.execute("SELECT host, unexplained FROM gp_card WHERE idx = 0").fetchall()
        )
        got = {
            case.name: (
                reserve_breaches(conn, host_of(i), 0, OWN, case.reserve).worst_bytes,
                unexplained[host_of(i)],
            )
            for i, case in enumerate(CASES)
        }
    assert got == python_answers()


PROMTOOL = shutil.which("promtool")


def exported_series(tmp_path: Path) -> list[dict[str, str]]:
    """The exporter's series for every case's snapshot, as promtool input (constant, 5 minutes)."""
    series = []
    for i, case in enumerate(CASES):
        snapshot = snapshot_of(i, case)
        folder = tmp_path / f"textfile-{i}"
        folder.mkdir()
        text = write_textfile(
            registry_for(SnapshotCollector(host_of(i), lambda s=snapshot: s)), folder
        ).read_text()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                labels = {**sample.labels, "job": "gpuplan", "instance": f"{host_of(i)}:9835"}
                inner = ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(labels.items()))
                series.append(
                    {"series": f"{sample.name}{{{inner}}}", "values": f"{sample.value!r}x5"}
                )
    return series


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (Debian: prometheus)")
def test_both_promql_forms_agree_as_prometheus_evaluates_them(tmp_path: Path) -> None:
    answers = python_answers()
    tests = []
    window = _Queries(
        hosts=tuple(host_of(i) for i in range(len(CASES))), start_s=0, end_s=300, step_s=60
    )
    for i, case in enumerate(CASES):
        breach, _ = answers[case.name]
        want = (
            []
            if breach is None
            else [{"labels": f'{{gpu="0", host="{host_of(i)}"}}', "value": breach}]
        )
        card = case.card()
        own = [p.used_bytes or 0 for p in card.processes if p.seat in OWN]
        # The report: the rule applied to what its PromQL reads of the card at that step.
        reading = ReserveReading(120, card.used_bytes or 0, sum(own), TOTAL, case.driver)
        points = breach_points([reading], case.reserve)
        assert (points[0][1] if points else None) == breach, case.name
        read = {
            "used_bytes": card.used_bytes,
            "own_bytes": sum(own) if own else None,  # no series: 0 where none ran
            "total_bytes": TOTAL,
            "reserved_bytes": case.driver,
        }
        spec = ReserveSpec(host_of(i), 0, OWN, case.reserve)
        for name, expr in reserve_queries(window, spec).items():
            value = read[name]
            got = (
                []
                if value is None
                else [{"labels": f'{{gpu="0", host="{host_of(i)}"}}', "value": value}]
            )
            tests.append({"expr": expr, "eval_time": "2m", "exp_samples": got})
        reserve = Reserve.model_validate(
            {
                "name": "r",
                "host": host_of(i),
                "gpu": 0,
                "bytes": "card" if case.reserve is None else case.reserve,
                "for": list(OWN),
            }
        )
        alert_expr, _ = _reserve_broken(reserve)
        tests.append({"expr": alert_expr, "eval_time": "2m", "exp_samples": want})
    unit = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [
            {"interval": "1m", "input_series": exported_series(tmp_path), "promql_expr_test": tests}
        ],
    }
    path = tmp_path / "definition-test.yml"
    path.write_text(yaml.safe_dump(unit, sort_keys=False))
    assert PROMTOOL is not None
    done = subprocess.run(
        [PROMTOOL, "test", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
