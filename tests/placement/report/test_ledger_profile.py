"""The ledger beside a profile: fv-ml1's vllm-voices with a Qwen3-4B profile shows weights +
non_kv + KV + cuda_context per card next to what it declares and what NVML saw."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from placement.cli.main import main
from seats.units import GiB, MiB
from tests.conftest import FV_ML1_CATALOGUE, FV_ML1_SNAPSHOT

PIN = "      kv_cache_memory: 1536 MiB\n"
KV = 1536 * MiB  # the example's pin
PROFILE = (
    "      profile: {weights: 7600 MiB, non_kv: 1.32 GiB, kv_bytes_per_token: 147456, "
    "max_model_len: 8192}\n"
)


def _ledger(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    *extra: str,
    profile: str = PROFILE,
) -> str:
    monkeypatch.delenv("GPUPLAN_CATALOGUE", raising=False)
    text = Path(FV_ML1_CATALOGUE).read_text(encoding="utf-8")
    assert text.count(PIN) == 1
    path = tmp_path / "fv-ml1.yaml"
    path.write_text(text.replace(PIN, PIN + profile), encoding="utf-8")
    argv = ["ledger", "--catalogue", str(path), "--snapshot", str(FV_ML1_SNAPSHOT), *extra]
    assert main(argv) == 0
    return capsys.readouterr().out


def test_the_json_gives_the_profile_parts_per_card(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = json.loads(_ledger(tmp_path, capsys, monkeypatch, "--json"))
    seats = {s["seat"]: s for s in data["hosts"][0]["seats"]}
    profile = seats["vllm-voices"]["profile"]
    assert profile["weights_bytes"] == 7600 * MiB
    assert profile["kv_bytes"] == KV  # the pin
    assert profile["cuda_graphs_bytes"] == 0
    assert profile["cuda_context_bytes"] == data["hosts"][0]["cuda_context_bytes"]
    assert profile["per_card_bytes"] == (
        7600 * MiB + int(1.32 * GiB) + KV + profile["cuda_context_bytes"]
    )
    assert seats["cyberprev"]["profile"] is None


def test_the_text_puts_the_breakdown_beside_declared_and_observed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _ledger(tmp_path, capsys, monkeypatch)
    line = next(x for x in out.splitlines() if x.startswith("profile vllm-voices:"))
    assert "weights 7.42 GiB + non_kv 1.32 GiB + KV 1.50 GiB + cuda_context" in line
    assert line.endswith("per card (declared 10,740 MiB, observed 10,740 MiB)")


def test_cuda_graphs_outside_the_request_show_in_the_breakdown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    graphs = PROFILE.replace("max_model_len: 8192}", "max_model_len: 8192, cuda_graphs: 600 MiB}")
    assert graphs != PROFILE
    data = json.loads(_ledger(tmp_path, capsys, monkeypatch, "--json", profile=graphs))
    profile = {s["seat"]: s for s in data["hosts"][0]["seats"]}["vllm-voices"]["profile"]
    assert profile["cuda_graphs_bytes"] == 600 * MiB
    assert profile["kv_bytes"] == KV  # the graphs are not taken from the KV cache
    assert profile["per_card_bytes"] == (
        7600 * MiB + int(1.32 * GiB) + KV + 600 * MiB + profile["cuda_context_bytes"]
    )
    out = _ledger(tmp_path, capsys, monkeypatch, profile=graphs)
    line = next(x for x in out.splitlines() if x.startswith("profile vllm-voices:"))
    assert "KV 1.50 GiB + cuda_graphs 600.00 MiB + cuda_context" in line
