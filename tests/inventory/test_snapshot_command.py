"""`gpuplan snapshot` and `gpuplan calibrate`: every exit code, the ledger, stdin, and Ctrl-C in a loop."""

from __future__ import annotations

import ctypes.util
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from inventory.calibrate import Calibration, CalibrationRun, render, torch_available
from inventory.ledger.store import LedgerError, open_ledger
from inventory.snapshot import load_snapshot
from placement.cli.main import main
from tests.conftest import FV_ML1_CATALOGUE, FV_ML1_SNAPSHOT

ROOT = Path(__file__).resolve().parents[2]
MIB = 2**20


def snapshot_data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FV_ML1_SNAPSHOT.read_text())
    return data


def write(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "in.json"
    path.write_text(json.dumps(data))
    return path


def test_from_file_into_ledger_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "l.sqlite"
    args = ["snapshot", "--from", str(FV_ML1_SNAPSHOT), "--ledger", str(db), "--json"]
    assert main(args) == 0
    first = capsys.readouterr()
    assert main(args) == 0
    second = capsys.readouterr()
    data = json.loads(first.out)
    assert data["schema"] == 1 and data["host"] == "fv-ml1"
    assert data["cards"][0]["free_bytes"] == 1_961_885_696
    assert "stored in ledger" in first.err and "already in ledger" in second.err
    with open_ledger(db, readonly=True) as ledger:
        assert ledger.count() == 1
        assert ledger.latest("fv-ml1") == load_snapshot(FV_ML1_SNAPSHOT)


def test_from_stdin_with_attribution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(FV_ML1_SNAPSHOT.read_bytes())))
    out = tmp_path / "out.json"
    code = main(
        ["snapshot", "--from", "-", "--catalogue", str(FV_ML1_CATALOGUE), "--out", str(out)]
    )
    assert code == 0
    table = capsys.readouterr().out
    assert "vllm-voices" in table and "94.97 GiB" in table
    saved = load_snapshot(out)
    assert {p.seat for p in saved.card(0).processes} == {
        "cyberprev",
        "gen-small",
        "parakeet-stt",
        "vllm-voices",
    }


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda d: d["cards"][1].pop("free_bytes"), r"cards\[1\].*lacks free_bytes"),
        (lambda d: d["cards"][0].update(used_bytes=-5), r"cards\[0\]\.used_bytes"),
        (lambda d: d["cards"][2].update(index=0), "card index 0 appears twice"),
        (
            lambda d: d["cards"][0]["processes"][0].update(used_bytes=1.5),
            r"processes\[0\]\.used_bytes",
        ),
        (lambda d: d.pop("taken_at"), "taken_at"),
    ],
    ids=["missing-figure", "negative-bytes", "duplicate-index", "float-bytes", "no-taken-at"],
)
def test_bad_snapshot_file_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: Any, says: str
) -> None:
    data = snapshot_data()
    change(data)
    path = write(tmp_path, data)
    db = tmp_path / "l.sqlite"
    assert main(["snapshot", "--from", str(path), "--ledger", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(path) in err
    assert pytest.importorskip("re").search(says, err), err
    assert not db.exists()  # nothing recorded from a bad file


def test_not_json_and_missing_file_are_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["snapshot", "--from", str(bad)]) == 2
    assert main(["snapshot", "--from", str(tmp_path / "none.json")]) == 2
    err = capsys.readouterr().err
    assert "not valid JSON" in err and "no such file" in err


def test_host_or_card_count_disagreeing_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["snapshot", "--from", str(FV_ML1_SNAPSHOT), "--host", "fv-ml2"]) == 2
    data = snapshot_data()
    data["cards"] = data["cards"][:3]
    path = write(tmp_path, data)
    assert main(["snapshot", "--from", str(path), "--catalogue", str(FV_ML1_CATALOGUE)]) == 2
    err = capsys.readouterr().err
    assert "not --host 'fv-ml2'" in err and "3 card(s), but the catalogue gives fv-ml1 4" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["--count", "3"],
        ["--interval", "0.5"],
        ["--interval", "5", "--count", "0"],
        ["--interval", "5", "--from", str(FV_ML1_SNAPSHOT)],
        ["--live", "--from", str(FV_ML1_SNAPSHOT)],
        ["--live", "--prometheus", "http://127.0.0.1:9"],
        ["--bogus"],
    ],
)
def test_bad_options_are_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["snapshot", *argv]) == 2
    assert "error" in capsys.readouterr().err


def test_foreign_ledger_is_exit_3_and_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "other.sqlite"
    with sqlite3.connect(db) as connection:
        connection.execute("CREATE TABLE t(x)")
    before = db.read_bytes()
    assert main(["snapshot", "--from", str(FV_ML1_SNAPSHOT), "--ledger", str(db)]) == 3
    assert str(db) in capsys.readouterr().err
    assert db.read_bytes() == before


@pytest.mark.skipif(
    ctypes.util.find_library("nvidia-ml") is not None, reason="this machine has NVML"
)
def test_no_nvml_is_exit_3(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("GPUPLAN_FAKE_NVML", raising=False)
    assert main(["snapshot"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("error: no NVML:") and "libnvidia-ml.so.1" in err


def test_live_reading_through_the_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPUPLAN_FAKE_NVML", str(FV_ML1_SNAPSHOT))
    db = tmp_path / "l.sqlite"
    assert (
        main(["snapshot", "--catalogue", str(FV_ML1_CATALOGUE), "--ledger", str(db), "--json"]) == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["host"] == "fv-ml1"  # the catalogue's only host
    assert data["taken_at"] != "2026-09-16T14:02:11Z"  # taken now, not the recording's time
    assert data["cards"][0]["processes"][3]["seat"] == "vllm-voices"


def test_live_is_the_default_reading_said_aloud(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 31: `snapshot --live` was "unrecognized" while every other command takes --live.
    monkeypatch.setenv("GPUPLAN_FAKE_NVML", str(FV_ML1_SNAPSHOT))
    argv = ["snapshot", "--catalogue", str(FV_ML1_CATALOGUE), "--json"]
    assert main([*argv, "--live"]) == 0
    live = json.loads(capsys.readouterr().out)
    assert main(argv) == 0
    default = json.loads(capsys.readouterr().out)
    for data in (live, default):
        data.pop("taken_at")
    assert live == default
    assert live["cards"][0]["free_bytes"] == 1_961_885_696


def test_live_with_from_names_both(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["snapshot", "--live", "--from", str(FV_ML1_SNAPSHOT)]) == 2
    assert capsys.readouterr().err == (
        "error: --live reads NVML now; it cannot be used with --from\n"
    )


@pytest.mark.slow
def test_ctrl_c_in_a_polling_loop_stores_only_whole_snapshots(tmp_path: Path) -> None:
    db = tmp_path / "l.sqlite"
    env = dict(os.environ, GPUPLAN_FAKE_NVML=str(FV_ML1_SNAPSHOT), PYTHONPATH=str(ROOT))
    argv = [sys.executable, "-m", "placement", "snapshot", "--interval", "1", "--ledger", str(db)]
    argv += ["--catalogue", str(FV_ML1_CATALOGUE)]
    child = subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 30
        stored = 0
        while time.monotonic() < deadline and stored < 2:
            time.sleep(0.1)
            try:
                with open_ledger(db, readonly=True) as ledger:
                    stored = ledger.count()
            except LedgerError:
                pass  # not created yet, or created a moment ago and still empty
        assert stored >= 2
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, err
    taken = int(err.split("stopped after ")[1].split()[0])
    assert out.count("stored in ledger") == taken
    with open_ledger(db, readonly=True) as ledger:
        assert ledger.count() == taken
        for snapshot in ledger.snapshots("fv-ml1"):
            assert len(snapshot.cards) == 4
            assert sum(len(c.processes) for c in snapshot.cards) == 8


# --- calibrate ------------------------------------------------------------------------------


@pytest.mark.skipif(torch_available(), reason="torch is installed here")
def test_calibrate_without_torch_is_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate"]) == 3
    assert "needs PyTorch" in capsys.readouterr().err


def test_calibrate_bad_runs_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--runs", "0"]) == 2
    assert "--runs" in capsys.readouterr().err


def test_cuda_context_is_the_worst_run_rounded_up_to_mib() -> None:
    # Figures measured on an NVIDIA H200 (docs/gpu-check-h200.md): 526.8 / 1,178.8 / 1,274.8 MiB.
    before = 150_109_880_320
    run = CalibrationRun(
        nvml_free_before_bytes=before,
        cuda_total_bytes=150_109_880_320,
        cuda_free_bytes={
            "context": before - 552_402_944,
            "nccl": before - 1_236_074_496,
            "cublas": before - 1_336_737_792,
        },
    )
    worse = CalibrationRun(
        before, 150_109_880_320, {**run.cuda_free_bytes, "cublas": before - 1_338_000_000}
    )
    one = Calibration(0, "GPU-x", "NVIDIA H200", 150_754_820_096, 644_939_776, (run,))
    two = Calibration(0, "GPU-x", "NVIDIA H200", 150_754_820_096, 644_939_776, (run, worse))
    assert one.cuda_context_bytes() == 1275 * MIB
    assert two.cuda_context_bytes() == 1277 * MIB
    text = render(one)
    assert "cuda_context: 1275 MiB" in text
    assert "526.8" in text and "1,178.8" in text
    assert "equal" in text


def test_calibration_on_a_busy_card_warns() -> None:
    run = CalibrationRun(
        100 * MIB, 200 * MIB, {"context": 50 * MIB, "nccl": 40 * MIB, "cublas": 30 * MIB}
    )
    busy = Calibration(1, "GPU-y", "NVIDIA H200", 300 * MIB, 100 * MIB, (run,), other_processes=2)
    text = render(busy)
    assert "warning: 2 other process(es) held card 1" in text
    assert "cuda_context: 70 MiB" in text
    assert "warning" not in render(
        Calibration(1, "GPU-y", "NVIDIA H200", 300 * MIB, 100 * MIB, (run,))
    )


def test_live_card_count_other_than_the_catalogue_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = snapshot_data()
    data["cards"] = data["cards"][:2]
    monkeypatch.setenv("GPUPLAN_FAKE_NVML", str(write(tmp_path, data)))
    assert main(["snapshot", "--catalogue", str(FV_ML1_CATALOGUE)]) == 0
    assert (
        "NVML sees 2 card(s) on this host, the catalogue gives fv-ml1 4" in capsys.readouterr().err
    )


def test_table_of_a_snapshot(capsys: pytest.CaptureFixture[str]) -> None:
    # Pinned as it printed before the CLI's tables went through placement/cli/render.py.
    argv = ["snapshot", "--from", str(FV_ML1_SNAPSHOT), "--catalogue", str(FV_ML1_CATALOGUE)]
    assert main(argv) == 0
    assert capsys.readouterr().out == SNAPSHOT_TABLE


SNAPSHOT_TABLE = """\
fv-ml1 · 2026-09-16T14:02:11Z · driver 580.159.04
  card  name                                          total    reserved       used       free    util  processes
------  ----------------------------------------  ---------  ----------  ---------  ---------  ------  -------------------------------------------------------------------------
     0  NVIDIA GPU (model not named in the seed)  95.58 GiB  622.00 MiB  93.14 GiB   1.83 GiB          4 proc: cyberprev (vLLM) gen-small (vLLM) parakeet-stt vllm-voices (vLLM)
     1  NVIDIA GPU (model not named in the seed)  95.58 GiB  622.00 MiB  89.40 GiB   5.57 GiB          2 proc: chat-large (vLLM) embed
     2  NVIDIA GPU (model not named in the seed)  95.58 GiB  622.00 MiB  92.63 GiB   2.34 GiB          2 proc: code-assist (vLLM) rerank
     3  NVIDIA GPU (model not named in the seed)  95.58 GiB  622.00 MiB        0 B  94.97 GiB          0 proc
"""


def test_table_shows_a_lost_card_and_says_when_nvml_v1_answered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = snapshot_data()
    data["cards"][1] = {"index": 1, "error": "GpuIsLost", "processes": []}
    # NVML v1 counts the driver's reserve in used (docs/facts.md §1).
    data["cards"][2]["used_bytes"] += data["cards"][2]["reserved_bytes"]
    data["cards"][2]["reserved_bytes"] = None
    assert main(["snapshot", "--from", str(write(tmp_path, data))]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[4].split() == ["1", "error:", "GpuIsLost"]
    assert "v1: in used" in lines[5]
    assert lines[-1] == "NVML v1 only: used includes the driver's reserve"
