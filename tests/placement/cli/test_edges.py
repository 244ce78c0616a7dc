"""Rough edges a new user hit: --version, JSON errors, options given twice or together, --out FILE."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from placement.cli.main import main
from tests.placement.report.test_figures import SMALL_CATALOGUE, small_snapshots, write_ledger

ROOT = Path(__file__).resolve().parents[3]
CATALOGUE = str(ROOT / "seats/catalogue/fv-ml1.yaml")
SNAPSHOT = str(ROOT / "seats/catalogue/fv-ml1.snapshot.json")


def error_object(out: str) -> dict[str, object]:
    data = json.loads(out)
    assert set(data) == {"schema", "error"} and data["schema"] == 1
    return dict(data["error"])


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("gpuplan ")


@pytest.mark.parametrize(
    ("argv", "code", "words"),
    [
        (["plan", "--json", "--catalogue", "missing.yaml", "--snapshot", SNAPSHOT], 2, "missing.yaml"),
        (["plan", "--json", "--no-such-flag"], 2, "unrecognized arguments"),
        (["ledger", "--json", "--catalogue", CATALOGUE, "--ledger", "/nonexistent/l.sqlite"], 3, "ledger"),
        (["pack", "--json", "--catalogue", CATALOGUE, "--card-bytes", "1GiB"], 1, "no number of cards holds"),
    ],
)  # fmt: skip
def test_json_errors_go_to_stdout_as_an_error_object(
    argv: list[str], code: int, words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == code
    captured = capsys.readouterr()
    error = error_object(captured.out)
    assert error["exit"] == code and words in str(error["message"])
    assert words in captured.err  # still said on stderr for people


def test_a_source_given_twice_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["check", "vllm-voices", "--gpu", "0", "--catalogue", CATALOGUE]
    assert main([*argv, "--snapshot", SNAPSHOT, "--snapshot", SNAPSHOT]) == 2
    assert "--snapshot given twice" in capsys.readouterr().err


def test_pack_refuses_two_card_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["pack", "--catalogue", CATALOGUE, "--card-bytes", "94GiB", "--snapshot", SNAPSHOT]
    assert main(argv) == 2
    assert "not both" in capsys.readouterr().err


@pytest.fixture
def report_args(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.delenv("GPUPLAN_CATALOGUE", raising=False)
    catalogue = tmp_path / "small.yaml"
    catalogue.write_text(yaml.safe_dump(SMALL_CATALOGUE), encoding="utf-8")
    ledger = write_ledger(tmp_path / "l.sqlite", small_snapshots())
    return ["report", "--ledger", str(ledger), "--catalogue", str(catalogue)]


def test_report_out_file_name_writes_that_file(report_args: list[str], tmp_path: Path) -> None:
    target = tmp_path / "weekly.html"
    assert main([*report_args, "--format", "html", "--out", str(target)]) == 0
    assert target.is_file() and target.read_text().startswith("<!DOCTYPE html>")


def test_report_out_suffix_must_agree_with_the_format(
    report_args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*report_args, "--out", str(tmp_path / "weekly.html")]) == 2
    assert "--format html" in capsys.readouterr().err
    assert not (tmp_path / "weekly.html").exists()


def test_report_takes_json_like_every_command(
    report_args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*report_args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["schema"] == 1
