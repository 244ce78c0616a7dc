"""Engines' own start-up logs read back (`learn --log`), with each figure the log prints
checked against the engine's rule by hand; a log without the engine's lines is exit 2."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from placement.cli import main as cli
from placement.fit.engines.base import EngineCard
from placement.fit.engines.registry import engine
from seats.model import Seat
from seats.units import MiB

DATA = Path(__file__).parent / "data"
ORIN = DATA / "llamacpp" / "orin-qwen3-0.6b-cpu.log"


def test_every_log_names_its_source() -> None:
    logs = sorted(DATA.glob("*/*.log"))
    assert logs
    for log in logs:
        assert log.read_text(encoding="utf-8").startswith("# source: https://github.com/"), log


def test_llamacpp_kv_buffer_is_its_rule_by_hand() -> None:
    # Qwen3-0.6B (its own metadata in the log): 28 layers, n_embd_k_gqa = n_embd_v_gqa = 1024,
    # f16 K and V. KV = n_ctx × layers × (k + v) × 2 B = 4096 × 28 × 2048 × 2 = 469,762,048 B
    # = 448.00 MiB, the size the log prints; one token is 28 × 2048 × 2 = 114,688 B.
    learned = engine("llamacpp").learn(ORIN.read_text(encoding="utf-8").splitlines())
    assert learned.kv_tokens is not None and learned.kv_tokens.value == 4096
    assert learned.kv_bytes_per_token == 28 * 2048 * 2 == 114_688
    assert 4096 * learned.kv_bytes_per_token == 448 * MiB
    # --fit had no say (build 5489 predates it): 0 of 29 layers went to the card, so model
    # and KV cache hold no bytes there; only its compute buffer does (422.92 MiB).
    layers = {figure.name: figure.value for figure in learned.extra}
    assert layers == {"layers on the card": 0, "layers in the model": 29}
    assert learned.weights is not None and learned.weights.value == 0
    assert learned.kv is not None and learned.kv.value == 0
    assert learned.non_kv is not None and learned.non_kv.value == int(422.92 * MiB)
    assert learned.max_model_len is not None and learned.max_model_len.value == 4096
    assert learned.missing == ()


CATALOGUE = """\
hosts:
  orin: {cards: 1}
seats:
  - name: qwen-small
    host: orin
    gpus: [0]
    resident: 1 GiB
    state: running
    engine: {kind: %s}
"""


def catalogue(tmp_path: Path, kind: str) -> str:
    path = tmp_path / "catalogue.yaml"
    path.write_text(CATALOGUE % kind, encoding="utf-8")
    return str(path)


def learn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, *options: str
) -> tuple[int, str, str]:
    """`gpuplan learn qwen-small OPTIONS` (default `--log ORIN`) with the seat's engine `kind`:
    exit code, stdout, stderr."""
    argv = ["learn", "qwen-small", *(options or ("--log", str(ORIN)))]
    code = cli.main([*argv, "--catalogue", catalogue(tmp_path, kind)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_learn_log_prints_the_profile_block(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = learn(tmp_path, capsys, "llamacpp")
    assert code == 0
    assert "      profile:\n        weights: 0" in out
    assert "        kv_bytes_per_token: 114688\n        max_model_len: 4096" in out
    assert "line 136: llama_context:      CUDA0 compute buffer size =   422.92 MiB" in out


def test_learn_log_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = learn(tmp_path, capsys, "llamacpp", "--log", str(ORIN), "--json")
    data = json.loads(out)
    assert code == 0
    assert data["engine"] == "llamacpp"
    assert data["profile"] == {
        "weights_bytes": 0,
        "non_kv_bytes": 443_463_761,  # floor(422.92 × 1,048,576)
        "kv_bytes_per_token": 114_688,
        "max_model_len": 4096,
    }


def test_a_log_of_another_engine_is_exit_2_naming_the_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The llama.cpp log read as SGLang's: none of SGLang's lines are there.
    code, _, err = learn(tmp_path, capsys, "sglang")
    assert code == 2
    assert "no SGLang start-up figures found" in err
    assert "KV Cache is allocated. #tokens" in err


def test_an_engine_without_a_log_reader_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = learn(tmp_path, capsys, "other")
    assert code == 2
    assert "engine kind 'other'" in err and "llama.cpp" in err


LINES = {
    # One line of each engine's start-up, as its source prints it (the f-strings quoted in each
    # module's docstring), with the figures worked by hand.
    "sglang": (
        [
            "[2025-09-28 17:07:10 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=61.70 GB, mem usage=14.99 GB.",
            "[2025-09-28 17:07:10 TP0] KV Cache is allocated. #tokens: 361134, K size: 22.04 GB, V size: 22.04 GB",
        ],
        # 44.08 GiB = 47,330,539,847 B over 361,134 tokens → 131,061 (c 131,072 printed to 0.01 GB).
        {"kv_tokens": 361_134, "weights": int(14.99 * 2**30)},
    ),
    "tgi": (
        [
            "2024-05-07T12:39:22.141566Z  INFO text_generation_router: router/src/main.rs:354: Setting max batch total tokens to 801568"
        ],
        {"kv_tokens": 801_568},
    ),
    "trtllm": (
        [
            "[TensorRT-LLM][INFO] Memory used after loading model weights (inside torch) in memory usage profiling: 14.96 GiB",
            "[TensorRT-LLM][INFO] Peak memory during memory usage profiling (torch + non-torch): 16.24 GiB, available KV cache memory when calculating max tokens: 56.82 GiB, fraction is set 0.9, kv size is 131072. device total memory 79.11 GiB, , tmp kv_mem 0.05 GiB",
            "[TensorRT-LLM][INFO] Estimated max memory in KV cache : 56.82 GiB",
        ],
        # 56.82 GiB // 131,072 = 465,469 tokens (56.82 × 8,192).
        {"kv_bytes_per_token": 131_072, "kv_tokens": 465_469},
    ),
}


@pytest.mark.parametrize("kind", sorted(LINES))
def test_each_engine_reads_its_own_lines(kind: str) -> None:
    lines, expected = LINES[kind]
    learned = engine(kind).learn(lines)
    if "kv_tokens" in expected:
        assert learned.kv_tokens is not None and learned.kv_tokens.value == expected["kv_tokens"]
    if "weights" in expected:
        assert learned.weights is not None and learned.weights.value == expected["weights"]
    if "kv_bytes_per_token" in expected:
        assert learned.kv_bytes_per_token == expected["kv_bytes_per_token"]


def test_llamacpp_kv_split_over_two_cards_by_hand() -> None:
    # 40 layers, K and V f16 of 8,192 each: one layer holds 4,096 × 8,192 × 2 × 2 B = 128 MiB.
    # The log splits them 12 + 28: CUDA0 1,536 MiB = 12 × 128, CUDA1 3,584 MiB = 28 × 128,
    # and "KV self size = 5120.00 MiB" = 40 × 128. The first card's figures are the seat's.
    log = DATA / "llamacpp" / "pr-6122-two-cards.log"
    learned = engine("llamacpp").learn(log.read_text(encoding="utf-8").splitlines())
    assert learned.kv is not None and learned.kv.value == 1536 * MiB == 12 * 128 * MiB
    assert learned.kv_tokens is not None and learned.kv_tokens.value == 4096
    assert learned.kv_bytes_per_token == 12 * 8192 * 2 * 2 == 393_216
    # Its weights on CUDA0 as printed (the older "CUDA0 buffer size" spelling), to 0.01 MiB.
    assert learned.weights is not None and learned.weights.value == int(5434.38 * MiB)
    assert learned.non_kv is not None and learned.non_kv.value == int(672.01 * MiB)


def test_ollama_overhead_log_by_hand() -> None:
    # OLLAMA_GPU_OVERHEAD=22032385536 left room for 1 of 62 layers; its KV cache, 61 layers of
    # 160 MiB at n_ctx 2048, puts 1 layer on the card: CUDA0 160 MiB, CPU 9,600 = 60 × 160 MiB.
    # Lines carry `docker compose logs` prefixes (`ollama  | `).
    log = DATA / "ollama" / "issue-8447-overhead-1-of-62-layers.log"
    learned = engine("ollama").learn(log.read_text(encoding="utf-8").splitlines())
    layers = {figure.name: figure.value for figure in learned.extra}
    assert layers == {"layers on the card": 1, "layers in the model": 62}
    assert learned.kv is not None and learned.kv.value == 160 * MiB == (9760 - 9600) * MiB
    assert learned.kv_bytes_per_token == 160 * MiB // 2048 == 81_920
    assert learned.weights is not None and learned.weights.value == int(7106.67 * MiB)
    # The thread's excerpt stops before the compute buffer: said, not guessed.
    assert learned.non_kv is None
    assert learned.missing == ("CUDA0 compute buffer size = … MiB",)


def test_ollama_own_engine_lines() -> None:
    # Ollama's own engine prints its buffers by card: the seat's figures are CUDA0's (11.5 GiB
    # of weights; 11.9 GiB sit on CUDA1 and 680 MiB on the CPU), all 41 layers on GPUs, a
    # compute graph of 0 B reserved on CUDA0. The excerpt ends before the KV cache line.
    log = DATA / "ollama" / "pr-11090-ollama-engine.log"
    learned = engine("ollama").learn(log.read_text(encoding="utf-8").splitlines())
    assert learned.weights is not None and learned.weights.value == int(11.5 * 2**30)
    assert "buffer=CUDA0" in learned.weights.line
    assert learned.non_kv is not None and learned.non_kv.value == 0
    assert {figure.name: figure.value for figure in learned.extra}["layers on the card"] == 41
    assert learned.missing == ('msg="kv cache" device=CUDA0 size="…"',)


def test_sglang_log_by_hand() -> None:
    # Two ranks print the same pool: 580,364 tokens in "KV Cache is allocated" and again as the
    # scheduler's max_total_num_tokens (the pool after its page rounding, page size 1).
    # K + V = 2 × floor(4.15 × 2**30) (SGLang's GB is 2**30) = 8,912,057,138 B → 15,356 B a token
    # (rounded up), the weights 3.76 GB = 4,037,269,258 B; context_len 8,192.
    log = DATA / "sglang" / "ktransformers-issue-1870-qwen3.5-tp2.log"
    text = log.read_text(encoding="utf-8")
    learned = engine("sglang").learn(text.splitlines())
    assert learned.kv_tokens is not None and learned.kv_tokens.value == 580_364
    assert "max_total_num_tokens=580364" in text
    assert learned.kv is not None and learned.kv.value == 2 * (415 * 2**30 // 100) == 8_912_057_138
    assert learned.kv_bytes_per_token == -(-8_912_057_138 // 580_364) == 15_356
    assert learned.weights is not None and learned.weights.value == 376 * 2**30 // 100
    assert learned.max_model_len is not None and learned.max_model_len.value == 8192
    # Its pool holds 70 × its context: no kv_capacity with that pool pinned; a context past the
    # pool is one.
    profile = {
        "weights": learned.weights.value,
        "non_kv": 0,
        "kv_bytes_per_token": learned.kv_bytes_per_token,
        "max_model_len": learned.max_model_len.value,
    }
    card = EngineCard(24 * 2**30, 23 * 2**30, 0)
    pinned = Seat.model_validate(
        {
            "name": "s",
            "resident": 20 * 2**30,
            "engine": {"kind": "sglang", "max_total_tokens": 580_364, "profile": profile},
        }
    )
    assert engine("sglang").kv_capacity(pinned, card) is None
    longer = pinned.model_copy(
        update={"engine": pinned.engine.model_copy(update={"context_length": 600_000})}
    )
    refusal = engine("sglang").kv_capacity(longer, card)
    assert refusal is not None and refusal.short_bytes == (600_000 - 580_364) * 15_356


def test_a_vllm_seat_read_with_log_is_read_as_vllm_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `--vllm-log` stays a spelling of `--log`: a vLLM seat's log goes to vLLM's own reader, and
    # both spellings print the same block.
    vllm_log = (
        Path(__file__).resolve().parents[2] / "data" / "vllm-logs" / "v0.11.0-mistral-7b-gptq.log"
    )
    path = tmp_path / "catalogue.yaml"
    path.write_text(
        "hosts:\n  spark: {cards: 1}\nseats:\n  - name: chat\n    host: spark\n    gpus: [0]\n"
        '    resident: 110 GiB\n    state: running\n    engine: {kind: vllm, version: "0.11.0"}\n',
        encoding="utf-8",
    )
    outs = []
    for option in ("--log", "--vllm-log"):
        code = cli.main(["learn", "chat", option, str(vllm_log), "--catalogue", str(path)])
        outs.append(capsys.readouterr().out)
        assert code == 0
    assert outs[0] == outs[1]
    assert "        max_model_len: 32768" in outs[0]


def test_vllm_learn_reads_its_own_log_through_the_protocol() -> None:
    # v0.11.0's log: "Model loading took 3.8844 GiB", "Available KV cache memory: 102.56 GiB",
    # "GPU KV cache size: 840,160 tokens" (lines 18, 24, 25).
    log = Path(__file__).resolve().parents[2] / "data" / "vllm-logs" / "v0.11.0-mistral-7b-gptq.log"
    learned = engine("vllm").learn(log.read_text(encoding="utf-8").splitlines())
    assert learned.kind == "vllm"
    assert learned.weights is not None and learned.weights.line_no == 18
    assert learned.weights.value == int(Decimal("3.8844") * 2**30)
    assert learned.kv is not None and learned.kv.value == int(Decimal("102.56") * 2**30)
    assert learned.kv_tokens is not None and learned.kv_tokens.value == 840_160
    assert learned.kv_bytes_per_token == -(-learned.kv.value // 840_160)


def test_vllm_log_spelling_on_another_engine_reads_that_engines_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `--vllm-log` is a spelling of `--log`: on a llama.cpp seat it reads llama.cpp's lines.
    outs = []
    for option in ("--log", "--vllm-log"):
        code, out, _ = learn(tmp_path, capsys, "llamacpp", option, str(ORIN))
        outs.append(out)
        assert code == 0
    assert outs[0] == outs[1] and "profile:" in outs[0]
