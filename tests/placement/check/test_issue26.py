"""Issue 26's seven reproductions: deploys `check --compose … && docker compose up -d` let through.

End to end through `gpuplan check`, on the seed's before-voices snapshot of fv-ml1 (card 0 has
12.32 GiB free, card 1 5.32 GiB of room); compose files written under tmp_path.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from placement.cli import check as check_command
from placement.cli import main as cli

ROOT = Path(__file__).resolve().parents[3]
CATALOGUE = "seats/catalogue/fv-ml1.yaml"
BEFORE = "seats/catalogue/fv-ml1-before-voices.snapshot.json"
TAKEN = datetime(2026, 9, 16, 11, 40, 5, tzinfo=UTC)


def card(*cards: int) -> str:
    ids = ", ".join(f"'{c}'" for c in cards)
    return f"    deploy: {{resources: {{reservations: {{devices: [{{driver: nvidia, device_ids: [{ids}], capabilities: [gpu]}}]}}}}}}\n"


@pytest.fixture(autouse=True)
def _fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    for name in ("GPUPLAN_CATALOGUE", "COMPOSE_PROFILES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(check_command, "utc_now", lambda: TAKEN + timedelta(minutes=5))


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["check", *args, "--catalogue", CATALOGUE, "--snapshot", BEFORE])
    out, err = capsys.readouterr()
    return code, out, err


def compose(
    capsys: pytest.CaptureFixture[str], path: Path, *extra: str
) -> tuple[int, dict[str, Any]]:
    code, out, _ = run(capsys, "--compose", str(path), "--json", *extra)
    return code, json.loads(out)


def vllm(name: str, util: str, where: str, extra: str = "") -> str:
    return (
        f"  {name}:\n    image: vllm/vllm-openai:v0.11.0\n"
        f"    command: [--model, m, --gpu-memory-utilization, '{util}'{extra}]\n{where}"
    )


def test_profiles_from_compose_profiles_are_started(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """COMPOSE_PROFILES=debug starts the profiled service: it shares card 1 and is judged."""
    path = tmp_path / "compose.yaml"
    path.write_text(
        "services:\n"
        + vllm("a", "0.03", card(1))
        + vllm("debug", "0.03", "    profiles: [debug]\n" + card(1)),
        encoding="utf-8",
    )
    code, data = compose(capsys, path)
    assert code == 0 and [v["service"] for v in data["verdicts"]] == ["a"]
    monkeypatch.setenv("COMPOSE_PROFILES", "debug")
    code, data = compose(capsys, path)
    assert code == 1 and [v["service"] for v in data["verdicts"]] == ["a", "debug"]
    monkeypatch.delenv("COMPOSE_PROFILES")
    (tmp_path / ".env").write_text("COMPOSE_PROFILES=debug\n", encoding="utf-8")
    code, data = compose(capsys, path)
    assert code == 1 and data["verdict"] == "refuse"


def test_the_override_file_docker_merges_is_judged_and_said(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A compose.override.yaml that raises util to 0.2 on card 1 (5.32 GiB room): refused."""
    path = tmp_path / "compose.yaml"
    path.write_text("services:\n" + vllm("a", "0.03", card(1)), encoding="utf-8")
    assert compose(capsys, path)[0] == 0
    override = tmp_path / "compose.override.yaml"
    override.write_text(
        "services:\n  a:\n    command: [--model, m, --gpu-memory-utilization, '0.2']\n",
        encoding="utf-8",
    )
    code, data = compose(capsys, path)
    assert code == 1 and data["files"] == [str(path), str(override)]
    assert data["verdicts"][0]["util"] == "0.2"
    code, out, _ = run(capsys, "--compose", str(path))
    assert code == 1
    assert f"merged {override} over {path}, as `docker compose up -d` does" in out
    # Explicit files, as `docker compose -f compose.yaml`: the override is not read.
    code, data = compose(capsys, path, "--compose", str(path))
    assert code == 0 and data["files"] == [str(path)] and data["verdicts"][0]["util"] == "0.03"


def test_include_and_extends_are_merged_not_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Both were "not merged yet" (exit 2); now the files are read as compose reads them."""
    (tmp_path / "gpu").mkdir()
    (tmp_path / "gpu" / "base.yaml").write_text(
        "services:\n  vllm-base:\n    image: vllm/vllm-openai:v0.11.0\n"
        "    command: [--model, m, --gpu-memory-utilization, '0.03']\n",
        encoding="utf-8",
    )
    (tmp_path / "gpu" / "models.yaml").write_text(
        "services:\n  b:\n    extends: {file: base.yaml, service: vllm-base}\n" + card(1),
        encoding="utf-8",
    )
    path = tmp_path / "compose.yaml"
    path.write_text(
        "include: [gpu/models.yaml]\nservices:\n  a:\n    extends: {file: gpu/base.yaml, service: vllm-base}\n"
        + card(1),
        encoding="utf-8",
    )
    code, data = compose(capsys, path)
    # Each fits card 1 alone; together they do not.
    assert code == 1 and sorted(v["service"] for v in data["verdicts"]) == ["a", "b"]
    assert str(tmp_path / "gpu" / "models.yaml") in data["files"]
    (tmp_path / "gpu" / "models.yaml").unlink()
    code, _, err = run(capsys, "--compose", str(path))
    assert code == 2 and "gpu/models.yaml does not exist" in err


MiB = 2**20
WEIGHTS = 8_044_936_192  # vllm-voices' weights in the example catalogue
VOICES = Path("tests/placement/data/voices-compose.yaml")


def test_a_kv_override_changes_the_need_by_what_it_changes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """vllm-voices (10,740 MiB declared, 1.5 GiB KV, 8,044,936,192 B of weights) with a 20 GiB
    KV cache on card 0 (12.32 GiB free): 10,740 − 1,536 + 20,480 = 29,684 MiB (its weights +
    KV + the 1,183 MiB context, 29,335.25 MiB, are less). It passed on the declared 10,740 MiB
    before."""
    code, out, _ = run(capsys, "vllm-voices", "--gpu", "0", "--json")
    assert code == 0 and json.loads(out)["need_bytes"] == 10_740 * MiB
    code, out, _ = run(capsys, "vllm-voices", "--gpu", "0", "--kv-cache-memory", "20 GiB", "--json")
    data = json.loads(out)
    assert code == 1 and data["need_bytes"] == (10_740 - 1_536 + 20_480) * MiB
    assert data["reasons"][0]["rule"] == "room"
    # A smaller KV cache lowers it, to 10,740 − 1,536 + 1,024 = 10,228 MiB.
    code, out, _ = run(capsys, "vllm-voices", "--gpu", "0", "--kv-cache-memory", "1 GiB", "--json")
    assert code == 0 and json.loads(out)["need_bytes"] == (10_740 - 1_536 + 1_024) * MiB
    # A resident given below the weights + KV + context is raised to them:
    # 8,044,936,192 B + (1,536 + 1,183) MiB = 10,896,014,336 B.
    code, out, _ = run(capsys, "vllm-voices", "--gpu", "0", "--resident", "9 GiB", "--json")
    assert code == 0 and json.loads(out)["need_bytes"] == WEIGHTS + (1_536 + 1_183) * MiB


def test_flags_the_loader_would_refuse_are_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "vllm-voices", "--gpu", "0", "--resident", "1 GiB")
    assert code == 2
    assert "--resident 1.00 GiB (1073741824 B) is below seat vllm-voices's weights 7.49 GiB" in err
    code, _, err = run(
        capsys, "vllm-voices", "--gpu", "0", "--resident", "8 GiB", "--kv-cache-memory", "9 GiB"
    )
    assert code == 2 and "KV cache 9.00 GiB (9663676416 B) is more than --resident 8.00 GiB" in err


def test_a_compose_kv_typo_is_judged_with_its_bytes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The seed's compose file with `1536M` mistyped `15360M`: refused where `1536M` passes."""
    monkeypatch.setenv("VOICES_UTIL", "0.11")
    assert compose(capsys, VOICES)[0] == 0
    typo = tmp_path / "compose.yaml"
    typo.write_text(
        VOICES.read_text(encoding="utf-8").replace("- 1536M\n", "- 15360M\n"), encoding="utf-8"
    )
    code, data = compose(capsys, typo)
    (verdict,) = data["verdicts"]
    assert code == 1 and verdict["need_bytes"] == (10_740 - 1_536 + 15_360) * MiB
    assert any("judged with a resident of 23.99 GiB" in w for w in data["warnings"])


def test_data_parallel_engines_are_each_judged_on_their_cards(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`-dp 2` over cards 1 and 2: the second engine, on card 2 (2.09 GiB of room), is refused;
    before, only the first card was judged and the deploy passed."""
    path = tmp_path / "compose.yaml"
    for flag in ("-dp", "--data-parallel-size", "--data_parallel_size=2"):
        value = "" if "=" in flag else ", '2'"
        path.write_text(
            "services:\n" + vllm("chat", "0.03", card(1, 2), f", {flag}{value}"), encoding="utf-8"
        )
        code, data = compose(capsys, path)
        first, second = data["verdicts"]
        assert code == 1, flag
        assert (first["cards"], first["verdict"], first["data_parallel_rank"]) == ([1], "pass", 0)
        assert (second["cards"], second["verdict"], second["data_parallel_rank"]) == (
            [2],
            "refuse",
            1,
        )
    path.write_text("services:\n" + vllm("chat", "0.03", card(1), ", -dp, '2'"), encoding="utf-8")
    code, _, err = run(capsys, "--compose", str(path))
    assert code == 2 and "--data-parallel-size" in err and "2 in all" in err


def test_a_latest_vllm_without_util_is_unbounded_on_every_neighbours_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "compose.yaml"
    big = "  big:\n    image: vllm/vllm-openai:latest\n    command: [--model, m]\n" + card(1)
    path.write_text("services:\n" + big + vllm("small", "0.03", card(1)), encoding="utf-8")
    code, data = compose(capsys, path)
    big_verdict, small = data["verdicts"]
    assert code == 1 and big_verdict["unbounded"] is True
    assert [r["rule"] for r in big_verdict["reasons"]] == ["unbounded"]
    # Its neighbour fits by bytes (4.00 GiB of 5.32 GiB) but not beside a seat that grows.
    assert small["verdict"] == "refuse"
    (reason,) = small["reasons"]
    assert reason["rule"] == "unbounded" and reason["card"] == 1
    assert reason["text"].startswith("big beside it on card 1 is unbounded")
    code, out, _ = run(capsys, "--compose", str(path))
    assert code == 1 and "  big      REFUSED  fv-ml1:1  unbounded" in out
    assert "256.00 MiB  unbounded" in out  # its own block: no "1 B" need


def test_an_unknown_service_shows_its_cards_and_a_visible_device_it_lacks(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "compose.yaml"
    path.write_text(
        "services:\n  tts:\n    image: myorg/tts:1\n    environment: [CUDA_VISIBLE_DEVICES=1]\n"
        + card(3)
        + "  stt:\n    image: myorg/stt:1\n"
        + card(2),
        encoding="utf-8",
    )
    code, data = compose(capsys, path)
    tts, stt = data["verdicts"]
    assert code == 3
    assert (tts["host"], tts["cards"], stt["cards"]) == ("fv-ml1", [3], [2])
    (warning,) = tts["warnings"]
    assert "CUDA_VISIBLE_DEVICES names a card its container lacks" in warning
    assert "index 1 but the container sees 1 card(s) (3 on fv-ml1)" in warning
    assert warning in data["warnings"]
    code, out, _ = run(capsys, "--compose", str(path))
    assert code == 3
    assert "  tts      UNKNOWN  fv-ml1:3" in out and "it asks for card(s) 3 of fv-ml1" in out


PIN = "      kv_cache_memory: 1536 MiB\n"
# Qwen3-4B: 2 × 36 layers × 8 KV heads × 128 × 2 B = 147,456 B per token; 1.5 GiB hold 10,922.
PROFILE = "      profile: {weights: 8044936192, non_kv: 300 MiB, kv_bytes_per_token: 147456, max_model_len: 8192}\n"


def test_max_model_len_and_kv_cache_dtype_from_the_command(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--max-model-len 20000 needs 20,000 tokens: 1.5 GiB at bf16 hold 10,922, at fp8 21,845."""
    text = Path(CATALOGUE).read_text(encoding="utf-8")
    catalogue = tmp_path / "fv-ml1.yaml"
    catalogue.write_text(text.replace(PIN, PIN + PROFILE), encoding="utf-8")
    monkeypatch.setenv("VOICES_UTIL", "0.11")
    base = VOICES.read_text(encoding="utf-8")

    def judged(extra: str) -> dict[str, Any]:
        path = tmp_path / "compose.yaml"
        path.write_text(base.replace("      - --enable-lora\n", extra + "      - --enable-lora\n"))
        code = cli.main(
            [
                "check",
                "--compose",
                str(path),
                "--catalogue",
                str(catalogue),
                "--snapshot",
                BEFORE,
                "--json",
            ]
        )
        data: dict[str, Any] = json.loads(capsys.readouterr().out)["verdicts"][0]
        assert code == (0 if data["verdict"] == "pass" else 1)
        return data

    assert judged("")["verdict"] == "pass"
    refused = judged("      - --max-model-len\n      - '20000'\n")
    (reason,) = refused["reasons"]
    assert reason["rule"] == "kv_capacity" and "holds 10,922 tokens" in reason["text"]
    assert "fewer than max_model_len 20,000" in reason["text"]
    fp8 = judged("      - --max-model-len=20k\n      - --kv-cache-dtype\n      - fp8_e4m3\n")
    assert fp8["verdict"] == "pass"
    assert any("73,728 B per token, half the profile's 147,456 B" in w for w in fp8["warnings"])
    too_long = judged("      - --max-model-len\n      - 32K\n      - --kv-cache-dtype=fp8\n")
    assert "fewer than max_model_len 32,768" in too_long["reasons"][0]["text"]
