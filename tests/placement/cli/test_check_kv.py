"""Issue 15's done-when: fv-ml1's vllm-voices with a Qwen3-4B profile and its 1.5 GiB KV pin is
refused by `check` with rule kv_capacity at max_model_len 40,960, and passes at 8,192."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from placement.cli import main as cli
from seats.units import GiB

ROOT = Path(__file__).resolve().parents[3]
CATALOGUE = ROOT / "seats" / "catalogue" / "fv-ml1.yaml"
SNAPSHOT = "seats/catalogue/fv-ml1.snapshot.json"
PIN = "      kv_cache_memory: 1536 MiB\n"
# Qwen3-4B: 36 layers, 8 KV heads, head dim 128, bf16 → 2 × 36 × 8 × 128 × 2 = 147,456 B per token;
# its weights are its safetensors' total_size. 1.5 GiB of KV holds 1,610,612,736 // 147,456 =
# 10,922 tokens. non_kv 300 MiB keeps the profile (10,691 MiB with the context) under the seat's
# measured 10,740 MiB resident.
PROFILE = (
    "      profile: {{weights: 8044936192, non_kv: 300 MiB, kv_bytes_per_token: 147456, "
    "max_model_len: {length}}}\n"
)
KV_BYTES = 1536 * 2**20


def catalogue(tmp_path: Path, length: int) -> str:
    text = CATALOGUE.read_text(encoding="utf-8")
    assert text.count(PIN) == 1
    path = tmp_path / f"fv-ml1-{length}.yaml"
    path.write_text(text.replace(PIN, PIN + PROFILE.format(length=length)), encoding="utf-8")
    return str(path)


def check(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, length: int, *extra: str
) -> tuple[int, str]:
    code = cli.main(
        [
            "check",
            "vllm-voices",
            "--catalogue",
            catalogue(tmp_path, length),
            "--snapshot",
            SNAPSHOT,
            *extra,
        ]
    )
    return code, capsys.readouterr().out


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("GPUPLAN_CATALOGUE", raising=False)


def test_refused_at_40960_with_the_fixes_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out = check(capsys, tmp_path, 40_960, "--json")
    assert code == 1
    verdict = json.loads(out)
    assert verdict["verdict"] == "refuse"
    assert [(r["rule"], r["card"]) for r in verdict["reasons"]] == [("kv_capacity", 0)]
    reason = verdict["reasons"][0]
    assert reason["need_bytes"] == 40_960 * 147_456
    assert reason["room_bytes"] == KV_BYTES
    assert reason["short_bytes"] == 40_960 * 147_456 - KV_BYTES
    # vLLM's own words for this seat would be "(40960) is larger than ... KV cache (10922)".
    assert "holds 10,922 tokens" in reason["text"]
    assert verdict["nearest"] == [
        "card 0: kv_cache_memory ≥ 5.62 GiB (6,039,797,760 B), or --max-model-len ≤ 10,922"
    ]


def test_refusal_as_text(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out = check(capsys, tmp_path, 40_960)
    assert code == 1
    assert out.startswith("REFUSED  vllm-voices → fv-ml1:0")
    assert "kv_capacity" in out and "--max-model-len ≤ 10,922" in out


@pytest.mark.parametrize("length", [8_192, 10_922])
def test_passes_at_a_length_the_pin_holds(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, length: int
) -> None:
    code, out = check(capsys, tmp_path, length, "--json")
    assert code == 0
    assert json.loads(out)["verdict"] == "pass"


def test_one_token_past_the_pin_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out = check(capsys, tmp_path, 10_923, "--json")
    assert code == 1
    assert [r["rule"] for r in json.loads(out)["reasons"]] == ["kv_capacity"]


def test_the_named_pin_holds_40960(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # The named fix, applied: 6,039,797,760 B holds exactly 40,960 tokens. Card 0 has no room for
    # the bigger resident it makes (below): refused on room alone, kv_capacity met.
    code, out = check(capsys, tmp_path, 40_960, "--kv-cache-memory", "6039797760", "--json")
    assert code == 1 and [r["rule"] for r in json.loads(out)["reasons"]] == ["room"]
    code, out = check(capsys, tmp_path, 40_960, "--kv-cache-memory", "6039797759", "--json")
    assert code == 1
    # The bigger cache is bigger resident too (issue 26): 10,740 MiB − 1.5 GiB + 5.63 GiB no
    # longer fits card 0, so room binds beside kv_capacity.
    assert [r["rule"] for r in json.loads(out)["reasons"]] == ["room", "kv_capacity"]


def test_a_resident_below_its_pinned_parts_is_judged_at_them(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # The H200 proof's profile: 7,600 MiB + 1.32 GiB (1,417,339,207 B) + the 1.5 GiB pin +
    # fv-ml1's 1,183 MiB context = 12,237,594,951 B against the declared 10,740 MiB: the seat is
    # judged at its parts (issue 26), and the warning gives both figures.
    need = (7_600 + 1_536 + 1_183) * 2**20 + 1_417_339_207
    code, verdict = _check_profile(capsys, tmp_path, HEAVY)
    assert code == 0
    (warning,) = _floor_warnings(verdict)
    assert warning.startswith("vllm-voices judged with a resident of 11.40 GiB: declared resident")
    assert "declared resident 10.49 GiB is below what it holds" in warning
    assert warning.count("11.40 GiB") == 1  # each number once
    assert "weights 7.42 GiB + non_kv 1.32 GiB + KV 1.50 GiB + cuda_context 1.16 GiB" in warning
    assert warning.endswith(f"raise resident to {need:,} B")
    assert verdict["need_bytes"] == need


def test_a_resident_that_covers_the_parts_draws_no_warning(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, verdict = _check_profile(capsys, tmp_path, HEAVY, "--resident", "12 GiB")
    assert code == 0
    assert _floor_warnings(verdict) == []
    assert verdict["need_bytes"] == 12 * GiB


HEAVY = "{weights: 7600 MiB, non_kv: 1.32 GiB, kv_bytes_per_token: 147456, max_model_len: 8192}"


def _floor_warnings(verdict: dict[str, object]) -> list[str]:
    warnings = verdict["warnings"]
    assert isinstance(warnings, list)
    return [w for w in warnings if "with its KV cache pinned" in w]


def _check_profile(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, profile: str, *extra: str
) -> tuple[int, dict[str, object]]:
    text = CATALOGUE.read_text(encoding="utf-8").replace(PIN, PIN + f"      profile: {profile}\n")
    path = tmp_path / "fv-ml1-graphs.yaml"
    path.write_text(text, encoding="utf-8")
    code = cli.main(
        ["check", "vllm-voices", "--catalogue", str(path), "--snapshot", SNAPSHOT, "--json", *extra]
    )
    return code, json.loads(capsys.readouterr().out)


def test_cuda_graphs_outside_the_request_count_in_the_pinned_parts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # vLLM before 0.21 captures its graphs after sizing the KV cache. Without them the profile
    # says 5 GiB + 1 GiB + the 1.5 GiB pin + 1,183 MiB = 8,863 MiB, under the declared 10,740 MiB;
    # with 2 GiB of graphs it says 10,911 MiB, and the seat is judged at that.
    base = "{weights: 5 GiB, non_kv: 1 GiB, kv_bytes_per_token: 147456, max_model_len: 8192"
    code, verdict = _check_profile(capsys, tmp_path, base + "}")
    assert code == 0 and _floor_warnings(verdict) == []
    assert verdict["need_bytes"] == 10_740 * 2**20
    code, verdict = _check_profile(capsys, tmp_path, base + ", cuda_graphs: 2 GiB}")
    assert code == 0
    (warning,) = _floor_warnings(verdict)
    assert warning.startswith("vllm-voices judged with a resident of 10.66 GiB: declared resident")
    assert "declared resident 10.49 GiB is below what it holds" in warning
    assert "KV 1.50 GiB + cuda_graphs 2.00 GiB + cuda_context 1.16 GiB" in warning
    assert warning.endswith(f"raise resident to {10_911 * 2**20:,} B")
    assert verdict["need_bytes"] == 10_911 * 2**20
