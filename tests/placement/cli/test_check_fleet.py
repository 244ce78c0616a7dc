"""`check` in a fleet: a seat on a catalogue host nothing can be read from is `unknown` (exit 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from placement.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
SNAPSHOT = ROOT / "seats/catalogue/fv-ml1.snapshot.json"


@pytest.fixture
def catalogue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data = yaml.safe_load((ROOT / "seats/catalogue/fv-ml1.yaml").read_text())
    data["hosts"]["fv-ml2"] = dict(data["hosts"]["fv-ml1"])
    data["seats"].append(
        {"name": "stt-2", "host": "fv-ml2", "gpus": [0], "resident": "2 GiB", "state": "planned"}
    )
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data))
    monkeypatch.delenv("GPUPLAN_CATALOGUE", raising=False)
    return path


def test_a_seat_on_an_absent_host_is_unknown(
    catalogue: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["check", "stt-2", "--catalogue", str(catalogue), "--snapshot", str(SNAPSHOT), "--json"]
    assert main(argv) == 3
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] == "unknown" and data["seat"] == "stt-2"
    assert [u["host"] for u in data["unusable_hosts"]] == ["fv-ml2"]
    assert "fv-ml2, which is unusable" in data["reasons"][0]["text"]


def test_a_seat_on_the_read_host_is_still_judged(
    catalogue: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "check",
        "vllm-voices",
        "--gpu",
        "0",
        "--catalogue",
        str(catalogue),
        "--snapshot",
        str(SNAPSHOT),
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("unusable host fv-ml2 (absent)")
    assert "PASS" in out
