"""`gpuplan learn SEAT --vllm-log`: real vLLM start-up logs (each with its source on its first
line) read back into a profile; prefixes of `docker compose logs`; the lines it needs, named."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from placement.cli import main as cli
from placement.fit.engines.vllm_log import clean, read_log
from seats.units import GiB

LOGS = Path(__file__).resolve().parents[2] / "data" / "vllm-logs"
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


@pytest.mark.parametrize(
    ("card_total", "request_bytes"),
    [
        # non_kv = ceil(util × the host's total) − weights − the log's KV bytes.
        ("120 GiB", -(-9 * 120 * GiB // 10)),
        # 0.9 × 130,000,000,001 B = 117,000,000,000.9 B: vLLM's request is the next whole byte.
        ("130000000001", 117_000_000_001),
    ],
)
def test_non_kv_from_the_seats_util_and_its_hosts_total_rounded_up(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, card_total: str, request_bytes: int
) -> None:
    path = catalogue(tmp_path, f", card_total: {card_total}", ", gpu_memory_utilization: 0.9")
    code, out, _ = learn(capsys, "chat", "--vllm-log", str(V0_11), "--catalogue", path, "--json")
    assert code == 0
    data = json.loads(out)
    kv = data["sources"]["kv_cache"]["value"]
    assert data["profile"]["non_kv_bytes"] == request_bytes - int(3.8844 * GiB) - kv


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


# Complete real start-up logs of other versions (each file's first line gives its source), with every
# figure computed by hand from the lines named. GiB figures as printed: int(Decimal(text) × GiB).
def gib(text: str) -> int:
    return int(Decimal(text) * GiB)


COMPLETE = {
    # Qwen2-VL-2B: 28 layers × 2 KV heads × head dim 128 (1536 ÷ 12 heads), bf16 K and V.
    "v0.10.2-qwen2-vl-2b.log": {
        "version": "0.10",
        "weights": gib("4.1513"),  # "Model loading took 4.1513 GiB"
        # "2.65 GiB for peak activation, 0.02 GiB for non-torch memory": the 4.06 GiB of CUDA
        # graphs lie outside 0.10's request (12.79 GiB = 4.15 + 2.65 + 0.02 + 5.97).
        "non_kv": gib("2.65") + gib("0.02") + 1,  # int(2.67 × GiB), one sum rounded once
        # "… and 4.06 GiB for CUDAGraph memory" on the same line: the profile's cuda_graphs.
        "cuda_graphs": gib("4.06"),
        "kv": 6_414_487_654,  # "Current kv cache memory in use is 6414487654 bytes", exact
        "tokens": 223_712,  # "GPU KV cache size: 223,712 tokens" = 13,982 blocks × 16
        "max_model_len": 4_096,
        "architecture": 2 * 28 * 2 * 128 * 2,  # 28,672 B
    },
    # Qwen2.5-14B-Instruct-AWQ: 48 layers × 8 KV heads × head dim 128 (5120 ÷ 40), fp16.
    "v0.13.0-qwen2.5-14b-awq.log": {
        "version": "0.13",
        "weights": gib("9.3795"),  # "Model loading took 9.3795 GiB memory"
        "non_kv": None,  # no line splits the request
        "cuda_graphs": gib("1.18"),  # "Graph capturing finished in 20 secs, took 1.18 GiB"
        "kv": gib("10.39"),  # "Available KV cache memory: 10.39 GiB"
        "tokens": 56_736,  # 3,546 blocks × 16
        "max_model_len": 8_192,
        "architecture": 2 * 48 * 8 * 128 * 2,  # 196,608 B
    },
    # Meta-Llama-3-8B-Instruct W4A16: 32 layers × 8 KV heads × head dim 128, bf16 KV cache.
    "v0.15.0rc2.dev46-llama-3-8b-w4a16.log": {
        "version": "0.15",
        "weights": gib("5.32"),  # "Model loading took 5.32 GiB memory"
        "non_kv": None,
        "cuda_graphs": gib("0.58"),  # "Graph capturing finished in 4 secs, took 0.58 GiB"
        "kv": gib("64.73"),  # "Available KV cache memory: 64.73 GiB"
        "tokens": 530_288,  # 33,143 blocks × 16
        "max_model_len": 8_192,  # "Using max model len 8192" (the offline LLM class: no server line)
        "architecture": 2 * 32 * 8 * 128 * 2,  # 131,072 B
    },
    # Phi-3-mini-4k-instruct: 32 layers × 32 KV heads × head dim 96 (3072 ÷ 32), fp16.
    "v0.19.1-phi-3-mini-4k.log": {
        "version": "0.19",
        "weights": gib("7.12"),
        "non_kv": None,
        "cuda_graphs": gib("0.46"),  # "Graph capturing finished in 6 secs, took 0.46 GiB"
        "kv": gib("13.06"),
        "tokens": 35_648,  # 2,228 blocks × 16
        "max_model_len": 4_096,
        "architecture": 2 * 32 * 32 * 96 * 2,  # 393,216 B
    },
    # Laguna-S-2.1 NVFP4 with a DFlash draft model: sliding-window and full-attention layers share
    # the KV cache with the drafter's, so the tokens are no whole number of 16-token blocks and no
    # one architecture figure is checked; max_model_len is the served model's, not the drafter's
    # 1,048,576 on line 17.
    "v0.25.1-laguna-s-2.1-nvfp4.log": {
        "version": "0.25",
        "weights": gib("95.63"),  # the model and its drafter
        "non_kv": None,
        # From 0.21 the graphs are inside the request (and non_kv): the 2.08 GiB of line 217 is
        # no cuda_graphs of the profile.
        "cuda_graphs": 0,
        "kv": gib("6.97"),
        "tokens": 94_135,
        "max_model_len": 65_536,
        "architecture": None,
    },
}


def test_at_least_four_complete_logs_of_different_versions() -> None:
    versions = {figures["version"] for figures in COMPLETE.values()} | {"0.11"}
    assert len(versions) >= 5 and all((LOGS / name).exists() for name in COMPLETE)


@pytest.mark.parametrize("name", sorted(COMPLETE))
def test_learn_reproduces_the_profile_of_a_real_log(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str
) -> None:
    expected = COMPLETE[name]
    path = catalogue(tmp_path)
    code, out, _ = learn(
        capsys, "chat", "--vllm-log", str(LOGS / name), "--catalogue", path, "--json"
    )
    assert code == 0
    data = json.loads(out)
    assert data["vllm_version"] == expected["version"]
    assert data["sources"]["kv_cache"]["value"] == expected["kv"]
    assert data["sources"]["kv_tokens"]["value"] == expected["tokens"]
    assert data["profile"] == {
        "weights_bytes": expected["weights"],
        "non_kv_bytes": expected["non_kv"],
        "cuda_graphs_bytes": expected["cuda_graphs"],
        "kv_bytes_per_token": expected["kv"] // expected["tokens"],
        "max_model_len": expected["max_model_len"],
    }


@pytest.mark.parametrize("name", sorted(n for n, f in COMPLETE.items() if f["architecture"]))
def test_bytes_per_token_agree_with_the_models_architecture(name: str) -> None:
    """tokens × per-token bytes ≤ the true KV bytes < one more 16-token block; the printed GiB
    is within half a hundredth of the true bytes."""
    expected = COMPLETE[name]
    kv, tokens, per_token = expected["kv"], expected["tokens"], expected["architecture"]
    assert tokens % 16 == 0
    exact = name.startswith("v0.10.2")
    slack = 0 if exact else GiB // 200
    assert tokens * per_token - slack <= kv < (tokens + 16) * per_token + slack
    if exact:  # the exact KV bytes give the architecture's figure itself
        assert kv // tokens == per_token == 28_672


def test_before_0_21_cuda_graphs_are_their_own_figure_not_non_kv(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log = LOGS / "v0.10.2-qwen2-vl-2b.log"
    code, out, _ = learn(capsys, "chat", "--vllm-log", str(log), "--catalogue", catalogue(tmp_path))
    assert code == 0
    # The line that splits the request (line numbers as `learn` and `grep -n` count them: at a
    # newline only, a progress bar's carriage returns staying inside its line).
    lines = log.read_bytes().decode("utf-8").split("\n")
    at = next(i for i, line in enumerate(lines, 1) if "4.06 GiB for CUDAGraph memory" in line)
    assert f"        cuda_graphs: {gib('4.06')}  # 4.06 GiB\n" in out
    source = next(line for line in out.splitlines() if line.startswith("  cuda_graphs:"))
    assert source.startswith(f"  cuda_graphs: line {at}: ")
    assert source.endswith("(0.01 GiB, '4.06 GiB for CUDAGraph memory')")
    assert "note: CUDA graphs took 4.06 GiB beyond weights + non_kv + KV" in out
    # The log's own request: util 0.8 × 15.99 GiB = 12.79 GiB = weights + non_kv + KV, to 0.01 GiB.
    request = gib("12.79")
    assert abs(gib("4.1513") + (gib("2.65") + gib("0.02")) + 6_414_487_654 - request) < GiB // 100


def test_a_negative_graph_capture_counts_as_none(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # 0.11.0's "Graph capturing finished in 18 secs, took -0.03 GiB": free memory grew meanwhile.
    path = catalogue(tmp_path)
    code, out, _ = learn(capsys, "chat", "--vllm-log", str(V0_11), "--catalogue", path, "--json")
    assert code == 0
    data = json.loads(out)
    assert data["profile"]["cuda_graphs_bytes"] == 0
    assert data["sources"]["cuda_graphs"]["precision"] == "printed -0.03 GiB: none counted"
    assert "took -0.03 GiB" in data["sources"]["cuda_graphs"]["source"]


def test_from_0_21_the_block_has_no_cuda_graphs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log = LOGS / "v0.25.1-laguna-s-2.1-nvfp4.log"
    assert "Graph capturing finished in 11 secs, took 2.08 GiB" in log.read_text(encoding="utf-8")
    code, out, _ = learn(capsys, "chat", "--vllm-log", str(log), "--catalogue", catalogue(tmp_path))
    assert code == 0
    assert "cuda_graphs" not in out and "CUDA graphs took" not in out


def test_before_0_21_a_log_without_the_capture_line_leaves_cuda_graphs_unknown(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = (LOGS / "v0.13.0-qwen2.5-14b-awq.log").read_text(encoding="utf-8").splitlines()
    kept = [line for line in text if "Graph capturing finished" not in line]
    assert len(kept) == len(text) - 1
    log = tmp_path / "cut.log"
    log.write_text("\n".join(kept), encoding="utf-8")
    code, out, _ = learn(capsys, "chat", "--vllm-log", str(log), "--catalogue", catalogue(tmp_path))
    assert code == 0
    assert "        cuda_graphs: unknown\n" in out
    assert "note: cuda_graphs unknown: the log prints no 'Graph capturing finished" in out


def test_kv_bytes_printed_to_a_hundredth_give_bytes_per_token_either_side(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log = LOGS / "v0.15.0rc2.dev46-llama-3-8b-w4a16.log"
    path = catalogue(tmp_path)
    code, out, _ = learn(capsys, "chat", "--vllm-log", str(log), "--catalogue", path, "--json")
    assert code == 0
    source = json.loads(out)["sources"]["kv_bytes_per_token"]
    # 64.73 GiB ÷ 530,288 tokens = 131,067: 5 B under Llama-3-8B's 131,072, inside the slack of
    # ceil(GiB / 200 / 530,288) = 11 B.
    assert source["value"] == 131_067 and 131_072 - 131_067 <= 11
    assert source["precision"].startswith("within 11 B either way")


FAILED_AFTER_GRAPHS = LOGS / "vllm-gfx906-llama-70b-graph-capture-failed.fragment.log"
FAILED_AFTER_KV = LOGS / "xinference-qwen3-vl-kv-check-failed.fragment.log"


@pytest.mark.parametrize(
    ("log", "line", "said", "stop"),
    [
        (FAILED_AFTER_GRAPHS, 11, "WorkerProc hit an exception.", 9),
        (FAILED_AFTER_KV, 4, "EngineCore failed to start.", 3),
    ],
)
def test_a_real_failed_start_up_is_exit_2_naming_its_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, log: Path, line: int, said: str, stop: int
) -> None:
    figures = read_log(log.read_text(encoding="utf-8").splitlines())
    assert figures.failed is not None and figures.failed.line_no == line
    assert figures.last_figure_line == stop
    code, _, err = learn(capsys, "chat", "--vllm-log", str(log), "--catalogue", catalogue(tmp_path))
    assert code == 2
    assert f"{log}: line {line}: vLLM's start-up failed here" in err and said in err
    assert f"its figures stop at line {stop}, before it" in err


def test_a_log_with_every_figure_then_a_failure_gives_no_profile(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 26: the figures were all printed, then the start failed: no profile from them."""
    lines = V0_11.read_text(encoding="utf-8").splitlines()
    cut = next(i for i, text in enumerate(lines) if "Maximum concurrency" in text) + 1
    failure = FAILED_AFTER_KV.read_text(encoding="utf-8").splitlines()[3:]
    log = tmp_path / "failed.log"
    log.write_text("\n".join(lines[:cut] + failure), encoding="utf-8")
    assert read_log(lines[:cut]).failed is None
    code, out, err = learn(
        capsys, "chat", "--vllm-log", str(log), "--catalogue", catalogue(tmp_path)
    )
    assert code == 2 and out == ""
    assert f"line {cut + 1}: vLLM's start-up failed here" in err
    assert f"its figures stop at line {cut}, before it" in err


def test_a_crash_after_the_server_came_up_is_not_a_failed_start(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    lines = V0_11.read_text(encoding="utf-8").splitlines()
    assert any("Starting vLLM API server" in text for text in lines)
    log = tmp_path / "later.log"
    crash = FAILED_AFTER_KV.read_text(encoding="utf-8").splitlines()[3:]
    log.write_text("\n".join(lines + crash), encoding="utf-8")
    code, _, _ = learn(capsys, "chat", "--vllm-log", str(log), "--catalogue", catalogue(tmp_path))
    assert code == 0
