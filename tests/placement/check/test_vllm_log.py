"""`gpuplan learn SEAT --vllm-log`: real vLLM start-up logs (each with its source on its first
line) read back into a profile; prefixes of `docker compose logs`; the lines it needs, named."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from placement.check.vllm_log import clean, read_log
from placement.cli import main as cli
from seats.units import GiB

LOGS = Path(__file__).resolve().parents[1] / "data" / "vllm-logs"
V0_11 = LOGS / "v0.11.0-mistral-7b-gptq.log"
# Mistral-7B: 32 layers × 8 KV heads × head dim 128, fp16 K and V: 2 × 32 × 8 × 128 × 2 B.
MISTRAL_7B = 131_072

CATALOGUE = """\
hosts:
  spark: {cards: 1%s}
seats:
  - name: chat
    host: spark
    gpus: [0]
    resident: 110 GiB
    state: running
    engine: {kind: vllm, version: "0.11.0"%s}
"""


def catalogue(tmp_path: Path, host: str = "", engine: str = "") -> str:
    path = tmp_path / "catalogue.yaml"
    path.write_text(CATALOGUE % (host, engine), encoding="utf-8")
    return str(path)


def learn(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["learn", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_every_log_names_its_source() -> None:
    logs = sorted(LOGS.glob("*.log"))
    assert logs
    for log in logs:
        assert log.read_text(encoding="utf-8").startswith("# source: https://github.com/"), log


def test_a_0_11_log_gives_the_profile() -> None:
    figures = read_log(V0_11.read_text(encoding="utf-8").splitlines())
    assert figures.version == (0, 11)
    assert figures.max_model_len is not None and figures.max_model_len.value == 32_768
    assert figures.weights is not None and figures.weights.value == int(3.8844 * GiB)
    assert figures.weights.precision == "0.0001 GiB"
    assert figures.tokens is not None and figures.tokens.value == 840_160 == 52_510 * 16
    assert figures.kv is not None and figures.kv.precision == "0.01 GiB"
    # 102.56 GiB printed to 0.01: the true KV bytes are within half a hundredth of a GiB.
    assert abs(figures.kv.value - 840_160 * MISTRAL_7B) <= GiB // 200


def test_learn_prints_the_block_with_its_sources(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = learn(
        capsys, "chat", "--vllm-log", str(V0_11), "--catalogue", catalogue(tmp_path)
    )
    assert code == 0
    assert "      profile:" in out
    assert f"        weights: {int(3.8844 * GiB)}  # 3.88 GiB" in out
    assert "        max_model_len: 32768" in out
    assert "Model loading took 3.8844 GiB" in out and "GPU KV cache size: 840,160 tokens" in out
    # Without a util on the seat nor a total, non_kv is left unknown, saying what would give it.
    assert "        non_kv: unknown" in out and "note: non_kv unknown" in out


def test_bytes_per_token_is_an_upper_bound_within_the_printed_precision(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = learn(
        capsys, "chat", "--vllm-log", str(V0_11), "--catalogue", catalogue(tmp_path), "--json"
    )
    assert code == 0
    data = json.loads(out)
    per_token = data["profile"]["kv_bytes_per_token"]
    # Mistral-7B's 131,072 B per token, read back from 102.56 GiB ÷ 840,160 tokens.
    assert MISTRAL_7B <= per_token < MISTRAL_7B * 1.001
    assert data["vllm_version"] == "0.11"
    assert data["sources"]["kv_tokens"]["precision"] == "exact"


def test_non_kv_from_the_seats_util_and_its_hosts_total(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = catalogue(tmp_path, ", card_total: 120 GiB", ", gpu_memory_utilization: 0.9")
    code, out, _ = learn(capsys, "chat", "--vllm-log", str(V0_11), "--catalogue", path, "--json")
    assert code == 0
    data = json.loads(out)
    kv = data["sources"]["kv_cache"]["value"]
    assert data["profile"]["non_kv_bytes"] == -(-9 * 120 * GiB // 10) - int(3.8844 * GiB) - kv


def test_docker_compose_prefixes_are_read_through(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    text = "".join(f"chat-1  | {line}\n" for line in V0_11.read_text(encoding="utf-8").splitlines())
    assert clean("chat-1  | INFO x") == "INFO x"
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    code, out, _ = learn(capsys, "chat", "--vllm-log", "-", "--catalogue", catalogue(tmp_path))
    assert code == 0 and "        max_model_len: 32768" in out


@pytest.mark.parametrize(
    ("dropped", "named"),
    [
        ("Model loading took", "Model loading took X GiB"),
        ("GPU KV cache size", "GPU KV cache size: N tokens"),
        ("Available KV cache memory", "Available KV cache memory: X GiB"),
    ],
)
def test_a_missing_line_is_exit_2_naming_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, dropped: str, named: str
) -> None:
    log = tmp_path / "start.log"
    kept = [line for line in V0_11.read_text(encoding="utf-8").splitlines() if dropped not in line]
    log.write_text("\n".join(kept), encoding="utf-8")
    code, _, err = learn(capsys, "chat", "--vllm-log", str(log), "--catalogue", catalogue(tmp_path))
    assert code == 2
    assert str(log) in err and named in err


def test_a_version_outside_the_read_ones_is_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log = tmp_path / "old.log"
    log.write_text(
        V0_11.read_text(encoding="utf-8").replace("server version 0.11.0", "server version 0.6.3"),
        encoding="utf-8",
    )
    code, _, err = learn(capsys, "chat", "--vllm-log", str(log), "--catalogue", catalogue(tmp_path))
    assert code == 2 and "vLLM 0.6 is outside the versions read" in err


def test_an_unknown_seat_is_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = learn(
        capsys, "nope", "--vllm-log", str(V0_11), "--catalogue", catalogue(tmp_path)
    )
    assert code == 2 and "no seat 'nope'" in err


# Real logs of other versions, as far as the public threads quoted them (each file's first line
# says what it lacks): each figure they hold is read, and learn names the line they lack.
FRAGMENTS = {
    "v0.10.2-arbor-prefixed.fragment.log": {"weights": int(Decimal("27.5185") * GiB)},
    "v0.13.0-qwen3-8b-fp8.fragment.log": {
        "version": (0, 13),
        "weights": int(Decimal("8.8011") * GiB),
    },
    "v0.18.0-qwen3-8b-gguf-compose.fragment.log": {"version": (0, 18), "max_model_len": 16_384},
    "v0.18-dev-qwen3.5-gguf.fragment.log": {
        "kv": int(Decimal("6.9") * GiB),
        "tokens": 89_760,
        "max_model_len": 262_144,
    },
    "v0.24.0-qwen3.6-35b-a3b-nvfp4.fragment.log": {
        "kv": int(Decimal("6.01") * GiB),
        "tokens": 569_878,
        "max_model_len": 131_072,
    },
}


@pytest.mark.parametrize("name", sorted(FRAGMENTS))
def test_each_real_fragment_gives_its_figures(name: str) -> None:
    figures = read_log((LOGS / name).read_text(encoding="utf-8").splitlines())
    for field, expected in FRAGMENTS[name].items():
        value = getattr(figures, field)
        got = value if field == "version" else value.value
        assert got == expected, (name, field)


def test_a_gib_figure_printed_without_its_trailing_zero_is_still_to_the_hundredth() -> None:
    # From 0.14 vLLM prints str(round(x, 2)): "6.9 GiB" is 6.90, not a figure to a tenth.
    name = "v0.18-dev-qwen3.5-gguf.fragment.log"
    figures = read_log((LOGS / name).read_text(encoding="utf-8").splitlines())
    assert figures.kv is not None and figures.kv.precision == "0.01 GiB"


def test_a_fragment_without_the_kv_lines_is_exit_2_naming_the_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log = LOGS / "v0.13.0-qwen3-8b-fp8.fragment.log"
    code, _, err = learn(capsys, "chat", "--vllm-log", str(log), "--catalogue", catalogue(tmp_path))
    assert code == 2 and "Available KV cache memory: X GiB" in err
