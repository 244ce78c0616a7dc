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
from seats.units import GiB, MiB

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
    assert "KV Cache is allocated. … K size: … GB, V size: … GB" in err


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
    # K + V = 2 × floor(4.15 × 2**30) (SGLang's GB is 2**30) = 8,912,057,138 B as printed. Each
    # size is printed to 0.01 GB, so the pool holds at most (4.155 + 4.155) GiB =
    # 8,922,794,557 B: 15,374 B a token rounded down, at least the true figure (the printed
    # sizes alone give 15,355, which may be under it). The weights 3.76 GB = 4,037,269,258 B;
    # context_len 8,192.
    log = DATA / "sglang" / "ktransformers-issue-1870-qwen3.5-tp2.log"
    text = log.read_text(encoding="utf-8")
    learned = engine("sglang").learn(text.splitlines())
    assert learned.kv_tokens is not None and learned.kv_tokens.value == 580_364
    assert "max_total_num_tokens=580364" in text
    assert learned.kv is not None and learned.kv.value == 2 * (415 * 2**30 // 100) == 8_912_057_138
    assert learned.kv_bytes_per_token == 8_922_794_557 // 580_364 == 15_374
    assert 8_912_057_138 // 580_364 == 15_355
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
    assert refusal is not None and refusal.short_bytes == (600_000 - 580_364) * 15_374


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
    # 110,122,961,469 B ÷ 840,160 tokens = 131,073.8…: rounded down, as `learn --vllm-log` does.
    assert learned.kv_bytes_per_token == learned.kv.value // 840_160 == 131_073


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


# Whole start-ups, each from the engine's first line to its ready line (data/README.md).
TGI_22 = DATA / "tgi" / "chat-app-2.2.0-llama-3.1-8b-a10g.log"
TRTLLM_SPARK = DATA / "trtllm" / "jeansblog-1.1.0rc3-gpt-oss-120b-spark.log"
SGLANG_QWQ = DATA / "sglang" / "llms-in-clouds-0.4.3-qwq-32b-4xl4.log"
LLAMACPP_A100 = DATA / "llamacpp" / "yuy4o-b7342-qwen3-coder-30b-a100.log"
OLLAMA_4090 = DATA / "ollama" / "securetag-0.5.4-llama-3.1-8b-4090.log"
WHOLE = {
    "tgi": (TGI_22, "Connected"),
    "trtllm": (TRTLLM_SPARK, "Uvicorn running on"),
    "sglang": (SGLANG_QWQ, "The server is fired up and ready to roll!"),
    "llamacpp": (LLAMACPP_A100, "main: server is listening on"),
    "ollama": (OLLAMA_4090, 'msg="llama runner started in'),
}


def read(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("kind", sorted(WHOLE))
def test_every_engine_has_a_whole_start_up_read_through_the_cli(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Each log runs to its engine's ready line (nothing after it was kept), and `gpuplan
    # learn SEAT --log FILE` on a seat of that kind reads it: exit 0, KV tokens from its lines.
    path, ready = WHOLE[kind]
    lines = read(path)
    assert ready in lines[-1]
    code, out, _ = learn(tmp_path, capsys, kind, "--log", str(path), "--json")
    data = json.loads(out)
    assert code == 0 and data["engine"] == kind
    assert data["sources"]["kv_tokens"]["value"] > 0


def test_tgi_2_2_start_up_by_hand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # TGI 2.2.0, Llama 3.1 8B on one A10G, every size left to TGI (Args: max_total_tokens None,
    # cuda_memory_fraction 1.0). The router's figure is num_blocks × BLOCK_SIZE (16 in 2.2.0):
    # 19,056 = 1,191 × 16. Llama 3.1 8B (its config: 32 layers, 8 KV heads of 128, bf16) holds
    # 32 × 2 × 8 × 128 × 2 B = 131,072 B a token, so its KV cache is 19,056 × 131,072 =
    # 2,497,708,032 B = 2,382 MiB; TGI prints no byte figure of it. The launcher set
    # max_total_tokens to 4096 ("Default `max_total_tokens` to 4096"), and the router accepts
    # it only under the pool: 4,096 ≤ 19,056.
    code, out, _ = learn(tmp_path, capsys, "tgi", "--log", str(TGI_22), "--json")
    data = json.loads(out)
    assert code == 0
    tokens = data["sources"]["kv_tokens"]
    assert tokens["value"] == 19_056 == 1_191 * 16
    assert "Setting max batch total tokens to 19056" in tokens["source"]
    assert tokens["value"] * 32 * 2 * 8 * 128 * 2 == 2_382 * MiB
    assert data["profile"] == {
        "weights_bytes": None,
        "non_kv_bytes": None,
        "kv_bytes_per_token": None,
        "max_model_len": 4096,
    }
    assert "Default `max_total_tokens` to 4096" in data["sources"]["max_model_len"]["source"]
    assert "    max_total_tokens: None," in read(TGI_22)
    assert data["profile"]["max_model_len"] <= tokens["value"]
    assert data["missing"] == ["weights: TGI prints none; use `learn --config DIR`"]


# Lines of other TGI releases, verbatim from issue threads.
TGI_1_0_ARGS = (
    # huggingface/text-generation-inference issue 832 (TGI 1.0): Args on one line, with
    # max_total_tokens a plain number.
    '2023-08-22T18:35:50.966384Z  INFO text_generation_launcher: Args { model_id: "meta-llama/Llama-2-13b-chat-hf", revision: None, validation_workers: 2, sharded: None, num_shard: Some(4), quantize: None, dtype: None, trust_remote_code: false, max_concurrent_requests: 128, max_best_of: 2, max_stop_sequences: 4, max_input_length: 4096, max_total_tokens: 8192, waiting_served_ratio: 1.2, max_batch_prefill_tokens: 4096, max_batch_total_tokens: 16000, max_waiting_tokens: 20, hostname: "831e9d857f4c", port: 80, shard_uds_path: "/tmp/text-generation-server", master_addr: "localhost", master_port: 29500, huggingface_hub_cache: Some("/data"), weights_cache_override: None, disable_custom_kernels: false, json_output: false, otlp_endpoint: None, cors_allow_origin: [], watermark_gamma: None, watermark_delta: None, ngrok: false, ngrok_authtoken: None, ngrok_domain: None, ngrok_username: None, ngrok_password: None, env: false }'
)
TGI_3_LINES = [
    # huggingface/text-generation-inference issue 2842 (TGI 3, Llama 3.3 70B over shards).
    "2024-12-14T03:36:59.191040Z  INFO text_generation_launcher: KV-cache blocks: 13807, size: 1",
    "2024-12-14T03:37:01.047823Z  INFO text_generation_router_v3: backends/v3/src/lib.rs:137: Setting max batch total tokens to 13793",
    "2024-12-14T03:37:01.047870Z  INFO text_generation_router: backends/v3/src/main.rs:168: Maximum total tokens defaulted to 13793",
]


def test_tgi_older_and_newer_lines_mean_the_same() -> None:
    # TGI 1.0's one-line Args give max_total_tokens 8192 (a plain number there).
    learned = engine("tgi").learn([TGI_1_0_ARGS])
    assert learned.max_model_len is not None and learned.max_model_len.value == 8192
    # TGI 3: rank 0 printed 13,807 blocks of 1 token; the router keeps the smallest shard's
    # answer, 13,793 ≤ 13,807 × 1, and that is the pool. Without the router's line, rank 0's.
    learned = engine("tgi").learn(TGI_3_LINES)
    assert learned.kv_tokens is not None and learned.kv_tokens.value == 13_793 <= 13_807 * 1
    assert learned.max_model_len is not None and learned.max_model_len.value == 13_793
    extra = {figure.name: figure.value for figure in learned.extra}
    assert extra == {"KV-cache blocks (rank 0)": 13_807, "block size": 1}
    alone = engine("tgi").learn(TGI_3_LINES[:1])
    assert alone.kv_tokens is not None and alone.kv_tokens.value == 13_807


def test_trtllm_start_up_by_hand() -> None:
    # trtllm-serve 1.1.0rc3, gpt-oss-120b on a DGX Spark (119.70 GiB of unified memory).
    # It sizes its KV cache twice: an estimation run of 8,224 tokens first ("Allocated 0.56
    # GiB … (8224)"), the real one after profiling; the real one is the pool.
    lines = read(TRTLLM_SPARK)
    learned = engine("trtllm").learn(lines)
    assert "Allocated 0.56 GiB for max tokens in paged KV cache (8224)." in "\n".join(lines)
    assert learned.kv_tokens is not None and learned.kv_tokens.value == 86_720
    assert learned.kv is not None and learned.kv.value == int(Decimal("5.95") * GiB)
    # "kv size is 73728": c exactly, = gpt-oss-120b's 36 layers × 2 × 8 KV heads × 64 × 2 B
    # (its config; bf16 KV, "Using checkpoint KV quantization" with none in the checkpoint).
    assert learned.kv_bytes_per_token == 73_728 == 36 * 2 * 8 * 64 * 2
    # Both caches as printed, to 0.01 GiB: 8,224 × 73,728 B = 0.5647 GiB ("0.56", also its
    # "tmp kv_mem 0.56 GiB"); 86,720 × 73,728 B = 6,393,692,160 B = 5.9546 GiB ("5.95").
    assert round(8_224 * 73_728 / GiB, 2) == 0.56
    assert 86_720 * 73_728 == 6_393_692_160 and round(86_720 * 73_728 / GiB, 2) == 5.95
    # The rule (_cal_max_memory): available KV = (T − peak + the estimation's KV) × f =
    # (119.70 − 113.65 + 0.56) × 0.9 = 5.949 GiB, printed 5.95 ("available KV cache memory …:
    # 5.95 GiB", "Estimated max memory in KV cache : 5.95 GiB"); each figure is ± 0.005.
    available = (Decimal("119.70") - Decimal("113.65") + Decimal("0.56")) * Decimal("0.9")
    assert abs(available - Decimal("5.95")) <= Decimal("0.005") * 3 * Decimal("0.9")
    # max_tokens = available // c = 86,711 ("max_tokens are set (to 0.8999999761581421 and
    # 86711"), itself 5.95 GiB; rounded up to whole blocks of 32 tokens: 2,710 × 32 = 86,720.
    assert round(86_711 * 73_728 / GiB, 2) == 5.95
    assert -(-86_711 // 32) * 32 == 86_720
    # The model's length is 131,072 (inferred); at start TensorRT-LLM cut max_seq_len to the
    # cache, 86,720, the figure kept beside it.
    assert learned.max_model_len is not None and learned.max_model_len.value == 131_072
    assert {figure.name: figure.value for figure in learned.extra} == {
        "max_seq_len at start": 86_720
    }
    assert learned.weights is not None and learned.weights.value == int(Decimal("63.52") * GiB)
    assert learned.missing == ()


def test_sglang_whole_start_up_by_hand() -> None:
    # SGLang 0.4.3.post4, QwQ-32B over four 24 GB L4s (--tensor-parallel-size 4,
    # mem_fraction_static=0.85). Each rank holds 2 of QwQ-32B's 8 KV heads (its config: 64
    # layers, head 128, bf16): K of one token = 64 × 2 × 128 × 2 B = 32,768 B, K + V 65,536 B.
    # The pool: 46,611 × 32,768 B = 1,527,349,248 B = 1.4225 GiB, printed "K size: 1.42 GB"
    # (SGLang's GB is 2**30).
    lines = read(SGLANG_QWQ)
    learned = engine("sglang").learn(lines)
    assert learned.kv_tokens is not None and learned.kv_tokens.value == 46_611
    assert round(46_611 * 64 * 2 * 128 * 2 / GiB, 2) == 1.42
    assert learned.kv is not None and learned.kv.value == 2 * int(Decimal("1.42") * GiB)
    # Its rule: rest = avail after weights − F0 × (1 − m), tokens = rest × 2**30 // c, with F0
    # 21.63 GB ("Load weight begin. avail mem=21.63 GB"), 6.09 GB after the weights, m 0.85:
    # 6.09 − 21.63 × 0.15 = 2.8455 GB → 46,620 tokens. With each printed figure ± 0.005 GB the
    # pool lies within [46,526, 46,714]; it printed 46,611.
    assert "[2025-03-08 12:29:13 TP0] Load weight begin. avail mem=21.63 GB" in lines
    m = Decimal("0.85")
    low = (Decimal("6.085") - Decimal("21.635") * (1 - m)) * GiB // 65_536
    high = (Decimal("6.095") - Decimal("21.625") * (1 - m)) * GiB // 65_536
    assert (Decimal("6.09") - Decimal("21.63") * (1 - m)) * GiB // 65_536 == 46_620
    assert low <= 46_611 <= high
    assert learned.weights is not None and learned.weights.value == int(Decimal("15.54") * GiB)
    assert learned.max_model_len is not None and learned.max_model_len.value == 131_072
    assert learned.missing == ()


def test_llamacpp_whole_start_up_by_hand() -> None:
    # llama-server b7342, Qwen3-Coder-30B-A3B Q8_0, --ctx-size 65536 on one A100 40 GB. Its own
    # metadata: n_layer 48, n_embd_k_gqa = n_embd_v_gqa = 512, K and V f16. KV = n_ctx × layers
    # × (k + v) × 2 B = 65,536 × 48 × 1,024 × 2 = 6,442,450,944 B = 6,144.00 MiB as printed;
    # a token is 48 × 1,024 × 2 = 98,304 B.
    lines = read(LLAMACPP_A100)
    assert "print_info: n_layer          = 48" in lines
    assert "print_info: n_embd_k_gqa     = 512" in lines
    learned = engine("llamacpp").learn(lines)
    assert learned.kv is not None and learned.kv.value == 65_536 * 48 * (512 + 512) * 2
    assert learned.kv.value == 6_144 * MiB
    assert learned.kv_bytes_per_token == 48 * 1_024 * 2 == 98_304
    # Four slots share one unified cache (kv_unified = true): each may use all 65,536.
    assert learned.kv_tokens is not None and learned.kv_tokens.value == 65_536
    assert learned.max_model_len is not None and learned.max_model_len.value == 65_536
    assert learned.weights is not None and learned.weights.value == int(Decimal("30658.12") * MiB)
    assert learned.non_kv is not None and learned.non_kv.value == int(Decimal("300.75") * MiB)
    layers = {figure.name: figure.value for figure in learned.extra}
    assert layers == {"layers on the card": 49, "layers in the model": 49}
    # All of it on the card: 30,658.12 + 6,144.00 + 300.75 = 37,102.87 MiB of the 39,903 MiB
    # free it found ("using device CUDA0 … - 39903 MiB free").
    on_card = learned.weights.value + learned.kv.value + learned.non_kv.value
    assert on_card <= 39_903 * MiB
    assert learned.missing == ()


def test_ollama_whole_start_up_by_hand() -> None:
    # Ollama 0.5.4, Llama 3.1 8B Q4_K_M on one RTX 4090, parallel 4: its runner got
    # `--ctx-size 8192 --parallel 4`, num_ctx 2048 × 4. The model's own metadata: 32 layers,
    # n_embd_k_gqa = n_embd_v_gqa = 1,024, f16: KV = 8,192 × 32 × 2,048 × 2 B =
    # 1,073,741,824 B = 1,024.00 MiB as printed, the "memory.required.kv=1.0 GiB" its scheduler
    # estimated; each request holds n_ctx_per_seq = 8,192 / 4 = 2,048 tokens.
    lines = read(OLLAMA_4090)
    assert any("--ctx-size 8192" in line and "--parallel 4" in line for line in lines)
    learned = engine("ollama").learn(lines)
    assert learned.kv is not None and learned.kv.value == 8_192 * 32 * 2_048 * 2 == 1_024 * MiB
    assert learned.kv_bytes_per_token == 32 * 2_048 * 2 == 131_072
    assert learned.max_model_len is not None and learned.max_model_len.value == 8_192 // 4
    assert learned.weights is not None and learned.weights.value == int(Decimal("4403.49") * MiB)
    # Its compute buffer, 560.00 MiB, is the scheduler's memory.graph.full="560.0 MiB".
    assert learned.non_kv is not None and learned.non_kv.value == 560 * MiB
    assert any('memory.graph.full="560.0 MiB"' in line for line in lines)
    layers = {figure.name: figure.value for figure in learned.extra}
    assert layers == {"layers on the card": 33, "layers in the model": 33}
    # Its LoRA adapter (160.00 MiB on CUDA0) is in none of the four figures.
    assert learned.missing == ()
