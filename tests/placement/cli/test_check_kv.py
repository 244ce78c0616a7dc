"""Issue 15's done-when: fv-ml1's vllm-voices with a Qwen3-4B profile and its 2 GiB KV pin is
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
PIN = '      kv_cache_memory: 2 GiB     # the log pins it ("do not remove the pin"), not to what\n'
# Qwen3-4B: 36 layers, 8 KV heads, head dim 128, bf16 → 2 × 36 × 8 × 128 × 2 = 147,456 B per token.
PROFILE = (
    "      profile: {{weights: 7600 MiB, non_kv: 1.32 GiB, kv_bytes_per_token: 147456, "
    "max_model_len: {length}}}\n"
)


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
    assert reason["room_bytes"] == 2 * GiB
    assert reason["short_bytes"] == 40_960 * 147_456 - 2 * GiB
    # vLLM's own words for this seat would be "(40960) is larger than ... KV cache (14563)".
    assert "holds 14,563 tokens" in reason["text"]
    assert verdict["nearest"] == [
        "card 0: kv_cache_memory ≥ 5.62 GiB (6,039,797,760 B), or --max-model-len ≤ 14,563"
    ]


def test_refusal_as_text(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out = check(capsys, tmp_path, 40_960)
    assert code == 1
    assert out.startswith("REFUSED  vllm-voices → fv-ml1:0")
    assert "kv_capacity" in out and "--max-model-len ≤ 14,563" in out


@pytest.mark.parametrize("length", [8_192, 14_563])
def test_passes_at_a_length_the_pin_holds(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, length: int
) -> None:
    code, out = check(capsys, tmp_path, length, "--json")
    assert code == 0
    assert json.loads(out)["verdict"] == "pass"


def test_one_token_past_the_pin_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out = check(capsys, tmp_path, 14_564, "--json")
    assert code == 1
    assert [r["rule"] for r in json.loads(out)["reasons"]] == ["kv_capacity"]


def test_the_named_pin_holds_40960(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # The named fix, applied: 6,039,797,760 B holds exactly 40,960 tokens.
    code, out = check(capsys, tmp_path, 40_960, "--kv-cache-memory", "6039797760", "--json")
    assert "kv_capacity" not in {r["rule"] for r in json.loads(out)["reasons"]}
    code, out = check(capsys, tmp_path, 40_960, "--kv-cache-memory", "6039797759", "--json")
    assert code == 1
    # The bigger cache is bigger resident too (issue 26): 7,600 MiB + 1.32 GiB + 5.63 GiB + the
    # context no longer fit card 0, so room binds beside kv_capacity.
    assert [r["rule"] for r in json.loads(out)["reasons"]] == ["room", "kv_capacity"]


def test_a_resident_below_the_profile_is_a_warning_with_both_figures(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # 7600 MiB + 1.32 GiB + the 2 GiB pin + fv-ml1's cuda_context: ~12,183 MiB against 10,740 MiB.
    code, out = check(capsys, tmp_path, 8_192, "--json")
    assert code == 0
    (warning,) = [w for w in json.loads(out)["warnings"] if "its profile implies" in w]
    assert warning.startswith("vllm-voices: declared resident 10.49 GiB is below the 11.90 GiB")
    assert "weights 7.42 GiB + non_kv 1.32 GiB + KV 2.00 GiB + cuda_context" in warning


def test_a_resident_that_covers_the_profile_draws_no_warning(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out = check(capsys, tmp_path, 8_192, "--resident", "12 GiB", "--json")
    assert code == 0
    assert not [w for w in json.loads(out)["warnings"] if "its profile implies" in w]


def _check_profile(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, profile: str
) -> tuple[int, list[str]]:
    text = CATALOGUE.read_text(encoding="utf-8").replace(PIN, PIN + f"      profile: {profile}\n")
    path = tmp_path / "fv-ml1-graphs.yaml"
    path.write_text(text, encoding="utf-8")
    code = cli.main(
        ["check", "vllm-voices", "--catalogue", str(path), "--snapshot", SNAPSHOT, "--json"]
    )
    warnings = json.loads(capsys.readouterr().out)["warnings"]
    return code, [w for w in warnings if "its profile implies" in w]


def test_cuda_graphs_outside_the_request_count_in_the_profiles_resident(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # vLLM before 0.21 captures its graphs after sizing the KV cache. Without them the profile
    # says 5 GiB + 1 GiB + the 2 GiB pin + 1,183 MiB = 9,375 MiB, under the declared 10,740 MiB;
    # with 2 GiB of graphs it says 11,423 MiB.
    base = "{weights: 5 GiB, non_kv: 1 GiB, kv_bytes_per_token: 147456, max_model_len: 8192"
    code, warnings = _check_profile(capsys, tmp_path, base + "}")
    assert code == 0 and warnings == []
    code, warnings = _check_profile(capsys, tmp_path, base + ", cuda_graphs: 2 GiB}")
    assert code == 0
    (warning,) = warnings
    assert warning.startswith("vllm-voices: declared resident 10.49 GiB is below the 11.16 GiB")
    assert "KV 2.00 GiB + cuda_graphs 2.00 GiB + cuda_context 1.16 GiB" in warning
    assert warning.endswith(f"raise resident to {11_423 * 2**20:,} B")
