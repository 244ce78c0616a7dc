"""`check --window` over synthetic ledgers: the seed's host, its exits and its JSON window."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from placement.cli import main as cli
from tests.placement.week.builders import (
    CUDA_TOTAL,
    GIB,
    MIB,
    Proc,
    between,
    moments,
    write_week,
)

# The seed's card 0 as it really is without the voices seat (docs/facts.md §3): cyberprev asked
# util 0.40 and holds 47,100 MiB, gen-small asked 0.48 with a pinned KV cache and holds 36,900.
SEED = """
hosts:
  fv-ml1: {cards: 2, card_total: 97871 MiB, cuda_context: 1183 MiB, margin: 256 MiB}
seats:
  - name: cyberprev
    host: fv-ml1
    gpus: [0]
    resident: 47100 MiB
    state: running
    match: 'vllm.*--port[ =]8021'
    engine: {kind: vllm, version: "0.11.0", gpu_memory_utilization: 0.40}
  - name: gen-small
    host: fv-ml1
    gpus: [0]
    resident: 36900 MiB
    state: running
    match: 'vllm.*--port[ =]8023'
    engine: {kind: vllm, version: "0.11.0", gpu_memory_utilization: 0.48, kv_cache_memory: 24 GiB}
  - name: voices-copy
    host: fv-ml1
    gpus: [0]
    resident: 10740 MiB
    state: planned
    engine: {kind: vllm, version: "0.11.0", gpu_memory_utilization: 0.11, kv_cache_memory: 1536 MiB}
  - {name: tts, host: fv-ml1, gpus: [1], resident: 80 GiB}
"""
CYBERPREV = Proc(
    4101,
    47_100 * MIB,
    "python3 -m vllm.entrypoints.openai.api_server --model cyberprev --port 8021",
)
GEN_SMALL = Proc(
    4117,
    36_900 * MIB,
    "python3 -m vllm.entrypoints.openai.api_server --model gen-small --port 8023",
)
OLLAMA = Proc(5301, 20 * GIB, "/usr/bin/ollama serve")


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("seed")
    catalogue = folder / "fv-ml1.yaml"
    catalogue.write_text(SEED)

    def card1(at: datetime) -> list[Proc]:
        return [OLLAMA] if between(at, 14, 15) else []

    ledger = write_week(
        folder / "ledger.sqlite", moments("fv-ml1", [lambda at: [CYBERPREV, GEN_SMALL], card1])
    )
    return catalogue, ledger


def run(capsys: pytest.CaptureFixture[str], seed: tuple[Path, Path], *argv: str) -> tuple[int, str]:
    catalogue, ledger = seed
    code = cli.main(
        [
            *argv,
            "--catalogue",
            str(catalogue),
            "--ledger",
            str(ledger),
            "--max-age",
            "1000d",
            "--no-hold",
        ]
    )
    return code, capsys.readouterr().out


@pytest.mark.slow
def test_a_copy_of_voices_fits_card_0_but_leaves_gen_small_unable_to_restart(
    capsys: pytest.CaptureFixture[str], seed: tuple[Path, Path]
) -> None:
    code, out = run(capsys, seed, "check", "voices-copy", "--window", "7d", "--json")
    data = json.loads(out)
    assert (code, data["verdict"]) == (0, "pass")  # a warning by default
    window = data["window"]
    assert (window["moments"], window["coverage"], window["short_moments"]) == (1008, 1.0, 0)
    (risk,) = window["restart_risks"]
    request = -(-48 * CUDA_TOTAL // 100)  # ceil(0.48 × CUDA total): gen-small's gate
    free = CUDA_TOTAL - (47_100 + 36_900) * MIB
    reads = free + 36_900 * MIB - 10_740 * MIB - 1_183 * MIB  # restarting beside the copy
    assert (risk["seat"], risk["card"], risk["new"]) == ("gen-small", 0, False)
    assert (risk["requested_bytes"], risk["short_bytes"]) == (request, request - reads)
    assert (risk["short_moments"], risk["already_short"], risk["days"]) == (1008, 0, 7)
    assert any(
        w.startswith("restart: card 0: gen-small could not restart") for w in data["warnings"]
    )

    code, out = run(capsys, seed, "check", "voices-copy", "--window", "7d", "--restart-safe")
    assert code == 1
    assert out.startswith(
        "window 2026-09-13T23:50Z → 2026-09-20T23:50Z (7d) · 1,008 moments · seen 100.0% · p100\nREFUSED"
    )
    assert "card 0  restart" in out and "gen-small could not restart" in out


def test_an_afternoon_ollama_on_card_1_refuses_by_peak_and_passes_at_p91_66(
    capsys: pytest.CaptureFixture[str], seed: tuple[Path, Path]
) -> None:
    code, out = run(capsys, seed, "check", "tts", "--window", "7d", "--json")
    data = json.loads(out)
    assert (code, data["verdict"]) == (1, "refuse")
    (peak,) = [r for r in data["reasons"] if r["rule"] == "peak"]
    assert (peak["card"], peak["short_moments"], peak["allowed_short"]) == (1, 84, 0)
    assert peak["at"] == "2026-09-14T14:00:00Z"
    assert peak["short_bytes"] == 80 * GIB - (CUDA_TOTAL - 256 * MIB - 20 * GIB)
    assert peak["pass_percentile"] == "91.66"
    assert "Ollama would put part of its model on the CPU" in peak["text"]
    (card,) = data["window"]["cards"]
    assert card["squeezed_by"][0]["name"] == "/usr/bin/ollama serve"
    code, _ = run(capsys, seed, "check", "tts", "--window", "7d", "--percentile", "91.66")
    assert code == 0


def test_too_little_history_is_unknown(
    capsys: pytest.CaptureFixture[str], seed: tuple[Path, Path]
) -> None:
    code, out = run(capsys, seed, "check", "voices-copy", "--window", "7d", "--min-history", "8d")
    assert code == 3
    assert "unknown: 7d of history, less than --min-history 8d" in out


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--window", "7d", "--snapshot", "x.json"], "--window needs --ledger or --prometheus"),
        (["--percentile", "99"], "--percentile need --window D"),
        (["--window", "32d"], "from 1s to 31d"),
    ],
)
def test_window_flags_are_checked(
    capsys: pytest.CaptureFixture[str], seed: tuple[Path, Path], argv: list[str], words: str
) -> None:
    catalogue, _ = seed
    code = cli.main(["check", "tts", "--catalogue", str(catalogue), *argv])
    captured = capsys.readouterr()
    assert code == 2
    assert words in captured.err + captured.out


COMPOSE = """
services:
  voices:
    image: vllm/vllm-openai:v0.11.0
    x-gpuplan-seat: voices-copy
    command: ["--model", "voices-base", "--port", "8029", "--gpu-memory-utilization", "0.11",
              "--kv-cache-memory-bytes", "1536M"]
    deploy:
      resources:
        reservations:
          devices: [{driver: nvidia, device_ids: ["0"], capabilities: [gpu]}]
"""


@pytest.mark.slow
def test_a_compose_deploy_is_judged_over_the_window_too(
    capsys: pytest.CaptureFixture[str], seed: tuple[Path, Path], tmp_path: Path
) -> None:
    compose = tmp_path / "compose.yaml"
    compose.write_text(COMPOSE)
    code, out = run(capsys, seed, "check", "--compose", str(compose), "--window", "7d", "--json")
    data = json.loads(out)
    assert (code, data["verdict"]) == (0, "pass")
    (voices,) = data["verdicts"]
    assert [r["seat"] for r in voices["window"]["restart_risks"]] == ["gen-small"]
    code, out = run(
        capsys,
        seed,
        "check",
        "--compose",
        str(compose),
        "--window",
        "7d",
        "--restart-safe",
        "--json",
    )
    data = json.loads(out)
    assert (code, data["verdict"]) == (1, "refuse")
    assert [r["rule"] for r in data["verdicts"][0]["reasons"]] == ["restart"]
