"""`gpuplan alerts` on the command line: the rule file, --out written atomically, every exit code."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from placement.cli.main import main
from placement.report.alerts import ALERTS, LABELS
from seats.loader import load_catalogue
from tests.conftest import FV_ML1_CATALOGUE, ROOT

FLEET = ROOT / "tests" / "placement" / "report" / "data" / "alerts" / "fleet-3.yaml"
EMPTY = ROOT / "docs" / "examples" / "triplets.yaml"  # planned seats only, no reserves, margin 0
PROMTOOL = shutil.which("promtool")


def gpuplan(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["alerts", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def rules_of(text: str) -> list[dict[str, object]]:
    document = yaml.safe_load(text)
    assert [g["name"] for g in document["groups"]] == ["gpuplan"]
    rules: list[dict[str, object]] = document["groups"][0]["rules"]
    return rules


def test_fv_ml1_gives_every_alert_with_its_labels(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = gpuplan(capsys, "--catalogue", str(FV_ML1_CATALOGUE))
    assert code == 0, err
    assert err == ""  # nothing left out
    rules = rules_of(out)
    # One rule per alert and host (a reserve's per reserve): fv-ml1 has one of each.
    assert [r["alert"] for r in rules] == list(ALERTS)
    drift = str(rules[2]["expr"])
    assert drift.count(" - ") == 2 * 8  # both bounds of the 8 running seats
    for rule in rules:
        labels = rule["labels"]
        assert isinstance(labels, dict)
        assert labels["severity"] in ("critical", "warning")
        assert set(labels) - {"severity"} <= set(LABELS[str(rule["alert"])])
        assert rule["for"] == "5m"
        annotations = rule["annotations"]
        assert isinstance(annotations, dict) and set(annotations) == {"summary", "description"}
    assert out.startswith("# Prometheus alerting rules from the gpuplan catalogue fv-ml1.yaml")


def test_hosts_and_seats_come_from_the_catalogue_only(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = gpuplan(capsys, "--catalogue", str(FLEET))
    assert code == 0
    catalogue = load_catalogue(FLEET)
    rules = rules_of(out)
    hosts = {str(r["labels"]["host"]) for r in rules}  # type: ignore[index]
    assert hosts == set(catalogue.hosts)
    named = {m for r in rules for m in re.findall(r'seat="([^"]+)"', str(r["expr"]))}
    watched = {s.name for s in catalogue.seats if s.state == "running" and s.match}
    assert named == watched | {"foreign"}  # embed has no match: no rule names it


def test_the_drift_threshold_moves_the_bounds(capsys: pytest.CaptureFixture[str]) -> None:
    _, default, _ = gpuplan(capsys, "--catalogue", str(FV_ML1_CATALOGUE))
    code, wide, _ = gpuplan(
        capsys, "--catalogue", str(FV_ML1_CATALOGUE), "--drift-threshold", "10%,4GiB"
    )
    assert code == 0
    # vllm-voices, 10,740 MiB: 5% (537 MiB) under 1 GiB; 10% (1,074 MiB) under 4 GiB.
    mib = 2**20
    assert f"- {10740 * mib} >= {537 * mib} or" in default
    assert f"- {10740 * mib} <= -{537 * mib}" in default
    assert f"- {10740 * mib} >= {1074 * mib} or" in wide
    assert "drift threshold 10% or 4.00 GiB" in wide


def test_out_writes_the_file_atomically(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "gpuplan-alerts.yml"
    target.write_text("old\n")
    code, out, err = gpuplan(capsys, "--catalogue", str(FV_ML1_CATALOGUE), "--out", str(target))
    assert code == 0
    assert out == ""
    assert f"wrote 9 rules to {target}" in err
    assert len(rules_of(target.read_text())) == 9
    assert os.listdir(tmp_path) == [target.name]  # no temporary file left beside it
    assert target.stat().st_mode & 0o777 == 0o644


def test_out_refuses_a_directory_or_a_missing_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = gpuplan(capsys, "--catalogue", str(FV_ML1_CATALOGUE), "--out", str(tmp_path))
    assert code == 2
    assert "is a directory" in err
    missing = tmp_path / "nope" / "rules.yml"
    code, _, err = gpuplan(capsys, "--catalogue", str(FV_ML1_CATALOGUE), "--out", str(missing))
    assert code == 2
    assert "no such directory" in err
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--for", "1.5m", "Prometheus duration"),
        ("--for", "5", "Prometheus duration"),
        ("--for", "-5m", "Prometheus duration"),
        ("--drift-threshold", "5%,1GB", "'1 GiB'"),
        ("--drift-threshold", "0%", "above 0%"),
        ("--drift-threshold", ",", "write e.g. 5%,1GiB"),
    ],
)
def test_bad_flags_exit_2_saying_why(
    capsys: pytest.CaptureFixture[str], flag: str, value: str, says: str
) -> None:
    code, out, err = gpuplan(capsys, "--catalogue", str(FV_ML1_CATALOGUE), f"{flag}={value}")
    assert code == 2
    assert out == ""
    assert err.startswith("error: ")
    assert says in err


def test_no_catalogue_is_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPUPLAN_CATALOGUE", raising=False)
    code, _, err = gpuplan(capsys)
    assert code == 2
    assert "no catalogue" in err


def test_for_0_is_said_and_written_as_0s(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = gpuplan(capsys, "--catalogue", str(FV_ML1_CATALOGUE), "--for", "0")
    assert code == 0
    assert {r["for"] for r in rules_of(out)} == {"0s"}
    assert "note: --for 0: every alert fires on the first evaluation that matches" in err


def test_a_catalogue_with_no_running_seats_says_what_is_left_out(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = gpuplan(capsys, "--catalogue", str(EMPTY))
    assert code == 0
    assert {r["alert"] for r in rules_of(out)} == {
        "GpuplanForeignMemory",
        "GpuplanExporterDown",
        "GpuplanCardError",
        "GpuplanCardFillingUp",
    }
    assert (
        "GpuplanSeatCannotRestart left out: no running seat with a `match` starts on a util request"
        in err
    )
    assert (
        "GpuplanSeatDrift and GpuplanSeatDown left out: the catalogue has no running seats" in err
    )
    assert "GpuplanReserveBroken left out: the catalogue has no reserves" in err
    assert "GpuplanBelowMargin left out for h: margin 0" in err
    assert "# note: GpuplanSeatDrift and GpuplanSeatDown left out" in out  # in the file too


@pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is not installed (apt-get install prometheus)"
)
@pytest.mark.parametrize("argv", [["--for", "0"], ["--drift-threshold", "7.5%"], []])
def test_promtool_accepts_every_variant(argv: list[str], tmp_path: Path) -> None:
    for catalogue in (FV_ML1_CATALOGUE, FLEET, EMPTY):
        target = tmp_path / f"{catalogue.stem}.yml"
        assert main(["alerts", "--catalogue", str(catalogue), "--out", str(target), *argv]) == 0
        assert PROMTOOL is not None
        checked = subprocess.run(
            [PROMTOOL, "check", "rules", str(target)], capture_output=True, text=True, check=False
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr
