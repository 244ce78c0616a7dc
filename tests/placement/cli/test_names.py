"""Names a command does not know get a "did you mean"; a large plan or pack says its time limit first."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement.cli import notice
from placement.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
CATALOGUE = str(ROOT / "seats/catalogue/fv-ml1.yaml")
SNAPSHOT = str(ROOT / "seats/catalogue/fv-ml1.snapshot.json")


def test_learn_of_a_misspelt_seat(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "vllm.log"
    log.write_text("")
    assert main(["learn", "vllm-voice", "--vllm-log", str(log), "--catalogue", CATALOGUE]) == 2
    assert "no seat 'vllm-voice' in" in (err := capsys.readouterr().err)
    assert "did you mean vllm-voices?" in err


def test_snapshot_under_a_host_the_catalogue_lacks_warns(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPUPLAN_FAKE_NVML", SNAPSHOT)
    assert main(["snapshot", "--catalogue", CATALOGUE, "--host", "fv-m1", "--json"]) == 0
    err = capsys.readouterr().err
    assert "warning: fv-m1 is not a host of the catalogue; did you mean fv-ml1?" in err
    assert main(["snapshot", "--catalogue", CATALOGUE, "--host", "fv-ml1", "--json"]) == 0
    assert "not a host of the catalogue" not in capsys.readouterr().err


def test_a_large_plan_says_its_time_limit_first(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["plan", "--catalogue", CATALOGUE, "--snapshot", SNAPSHOT, "--time-limit", "7"]
    main(argv)
    assert "(--time-limit)" not in capsys.readouterr().err  # small: nothing said
    monkeypatch.setattr(notice, "PLAN_PAIRS", 1)
    main(argv)
    lines = capsys.readouterr().err.splitlines()
    said = [line for line in lines if line.startswith("planning ")]
    assert len(said) == 1 and said[0].endswith(" cards: up to 7 s (--time-limit)"), lines
    assert " seats on 4 cards" in said[0]


def test_a_large_pack_says_its_time_limit_first(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["pack", "--catalogue", CATALOGUE, "--card-bytes", "94.97GiB", "--time-limit", "12"]
    assert main(argv) == 0
    assert "(--time-limit)" not in capsys.readouterr().err
    monkeypatch.setattr(notice, "PACK_SEATS", 1)
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert err.startswith("packing ") and "seats: up to 12 s (--time-limit)\n" in err


def test_a_time_limit_under_a_second_is_not_announced(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(notice, "PACK_SEATS", 1)
    argv = ["pack", "--catalogue", CATALOGUE, "--card-bytes", "94.97GiB", "--time-limit", "0.5"]
    assert main(argv) == 0
    assert "(--time-limit)" not in capsys.readouterr().err
