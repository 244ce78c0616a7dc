"""A redeploy's hold replaces its seat's running bytes, never adds to them (issue 32 item 4).

One H100 80GB (NVML total 81,559 MiB as `nvidia-smi` prints it; the 530 MiB driver reserve is a
stand-in) runs llama8b, a vLLM seat at util 0.5 holding 41,460 MiB. `check llama8b --gpu 0
--ledger L` passes as a redeploy and holds its need: ceil(0.5 × 81,029 MiB) + 1,183 MiB of
context = 43,722,997,760 B. The card has 39,569 MiB free, so a 30 GiB seat fits beside
llama8b; before the fix the hold was added on top of llama8b's own 41,460 MiB and every later
check and plan of that card was refused for the hold's 30 minutes.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from placement.cli import check as cli_check
from placement.cli import ledger as cli_ledger
from placement.cli import main as cli_main
from placement.cli import plan as cli_plan
from placement.cli import sources

MIB = 2**20
GIB = 2**30
TOTAL = 81_559 * MIB
RESERVED = 530 * MIB
CUDA_TOTAL = TOTAL - RESERVED  # 81,029 MiB
LLAMA = 41_460 * MIB  # what llama8b's process holds now
FREE = CUDA_TOTAL - LLAMA  # 39,569 MiB
NEED = 43_722_997_760  # ceil(0.5 × CUDA_TOTAL) + 1,183 MiB
TAKEN = datetime.fromisoformat("2026-12-05T08:00:00+00:00")

CATALOGUE = """\
hosts:
  gpu-a:
    cards: 1
    cuda_context: 1183 MiB
    margin: 256 MiB
seats:
  - name: llama8b
    host: gpu-a
    gpus: [0]
    resident: 40 GiB
    state: running
    match: 'vllm serve .*Llama-3.1-8B'
    engine: {kind: vllm, version: "0.11.0", gpu_memory_utilization: 0.5}
  - name: embed
    host: gpu-a
    gpus: [0]
    resident: 30 GiB
    state: planned
    match: 'embed-server'
"""


def snapshot(llama_running: bool = True) -> dict[str, Any]:
    used = LLAMA if llama_running else 0
    processes = [
        {
            "pid": 100,
            "used_bytes": LLAMA,
            "cmdline": "python3 -m vllm serve meta-llama/Llama-3.1-8B-Instruct "
            "--gpu-memory-utilization 0.5",
        }
    ]
    return {
        "schema": 1,
        "host": "gpu-a",
        "taken_at": "2026-12-05T08:00:00Z",
        "driver": "580.159.04",
        "cards": [
            {
                "index": 0,
                "uuid": "GPU-5e1f0c2a-0000-4000-8000-000000000001",
                "name": "NVIDIA H100 80GB HBM3",
                "total_bytes": TOTAL,
                "reserved_bytes": RESERVED,
                "used_bytes": used,
                "free_bytes": CUDA_TOTAL - used,
                "processes": processes if llama_running else [],
            }
        ],
    }


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    catalogue = tmp_path / "catalogue.yaml"
    catalogue.write_text(CATALOGUE)
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps(snapshot()))
    monkeypatch.delenv("GPUPLAN_CATALOGUE", raising=False)
    monkeypatch.setenv("USER", "ci-deploy")
    for module in (sources, cli_check, cli_ledger, cli_plan):
        monkeypatch.setattr(module, "utc_now", lambda: TAKEN + timedelta(minutes=1))
    return catalogue, snap, tmp_path / "l.sqlite"


def source(files: tuple[Path, Path, Path]) -> list[str]:
    catalogue, snap, db = files
    return ["--catalogue", str(catalogue), "--snapshot", str(snap), "--ledger", str(db)]


def test_a_redeploy_hold_leaves_the_next_seat_its_room_in_check_and_plan(
    files: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["check", "llama8b", "--gpu", "0", *source(files), "--json"]
    assert cli_main.main(argv) == 0
    capsys.readouterr()
    assert cli_main.main(["holds", "--ledger", str(files[2]), "--json"]) == 0
    holds = json.loads(capsys.readouterr().out)["holds"]
    assert [(h["seat"], h["need_bytes"]) for h in holds] == [("llama8b", NEED)]

    # The next seat meets only what llama8b's approved need adds to what it holds now.
    argv = ["check", "embed", "--gpu", "0", *source(files), "--json", "--no-hold"]
    assert cli_main.main(argv) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["verdict"] == "pass" and verdict["reasons"] == []
    [card] = verdict["card_figures"]
    assert (card["held_bytes"], card["room_bytes"]) == (
        NEED - LLAMA,
        FREE - (NEED - LLAMA) - 256 * MIB,
    )

    assert cli_main.main(["plan", *source(files), "--json"]) == 0
    planned = {s["seat"]: s for s in json.loads(capsys.readouterr().out)["seats"]}
    assert planned["embed"]["verdict"] == "pass" and planned["embed"]["cards"] == [0]

    assert cli_main.main(["ledger", *source(files), "--json"]) == 0
    held = json.loads(capsys.readouterr().out)["hosts"][0]["cards"][0]["held_bytes"]
    assert held == NEED - LLAMA == 249_036_800  # 237.50 MiB, not 40.72 GiB


def test_a_redeploy_hold_still_refuses_a_seat_its_extra_bytes_squeeze(
    files: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main.main(["check", "llama8b", "--gpu", "0", *source(files)]) == 0
    capsys.readouterr()
    # 39,200 MiB: it fits beside llama8b as it runs (room 39,313 MiB), not beside its approved
    # need (room 39,075.5 MiB).
    seat = files[2].parent / "big.yaml"
    seat.write_text("name: big\nhost: gpu-a\ngpus: [0]\nresident: 39200 MiB\n")
    argv = ["check", "--add", str(seat), "big", "--gpu", "0", *source(files), "--json"]
    assert cli_main.main(argv) == 1
    reasons = json.loads(capsys.readouterr().out)["reasons"]
    assert [(r["rule"], r["short_bytes"]) for r in reasons] == [
        ("hold", 39_200 * MIB - (FREE - (NEED - LLAMA) - 256 * MIB))
    ]
    text = reasons[0]["text"]
    assert "(a redeploy: 40.72 GiB in place of the 40.49 GiB it holds here now)" in text


def test_a_down_seats_hold_keeps_its_place_once(
    files: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # llama8b is down (no process): it keeps its place at its 40 GiB resident, and its approved
    # restart at 40.72 GiB is that place, not a second one beside it.
    files[1].write_text(json.dumps(snapshot(llama_running=False)))
    assert cli_main.main(["check", "llama8b", "--gpu", "0", *source(files)]) == 0
    capsys.readouterr()
    assert cli_main.main(["ledger", *source(files), "--json"]) == 0
    held = json.loads(capsys.readouterr().out)["hosts"][0]["cards"][0]["held_bytes"]
    assert held == NEED  # max(40 GiB resident, 40.72 GiB need), not their sum
