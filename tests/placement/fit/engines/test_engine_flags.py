"""Each engine's fields read by its own parser's rule (DESIGN.md, Engines: flags as the engine's
own parser reads them): argparse prefixes for vLLM and SGLang, whole names for the others, and
Ollama's environment as Ollama parses it."""

from __future__ import annotations

import pytest

from placement.fit.engines.base import FlagError
from placement.fit.engines.registry import engine

READ: list[tuple[str, str, dict[str, str], dict[str, object]]] = [
    # vLLM 0.11.0: unique prefixes, `=`, `_` for `-`.
    (
        "vllm",
        "vllm serve m --kv-cache-mem 1G --gpu_memory_util=0.2",
        {},
        {"gpu_memory_utilization": 0.2, "kv_cache_memory": 2**30},
    ),
    # SGLang: a prefix of --mem-fraction-static, the last of a repeated flag.
    (
        "sglang",
        "python3 -m sglang.launch_server --mem-frac 0.5 --max-total 4096 --mem-fraction-static=0.3",
        {},
        {"mem_fraction_static": 0.3, "max_total_tokens": 4096},
    ),
    # SGLang inside a shell script.
    (
        "sglang",
        "sh -c",
        {},
        {},
    ),
    # TGI: the command line wins over the environment (clap's `env`).
    (
        "tgi",
        "text-generation-launcher --cuda-memory-fraction=0.4",
        {"CUDA_MEMORY_FRACTION": "0.9", "MAX_TOTAL_TOKENS": "8192"},
        {"cuda_memory_fraction": 0.4, "max_total_tokens": 8192},
    ),
    # TensorRT-LLM: click's own spellings.
    (
        "trtllm",
        "trtllm-serve serve m --kv_cache_free_gpu_memory_fraction=0.2 --max_seq_len 4096",
        {},
        {"free_gpu_memory_fraction": 0.2, "max_seq_len": 4096},
    ),
    # llama.cpp turns `_` into `-` in a `--` word; the command line wins over LLAMA_ARG_*.
    (
        "llamacpp",
        "llama-server -m m.gguf --ctx_size 8192 -ngl 99",
        {"LLAMA_ARG_CTX_SIZE": "4096"},
        {"ctx_size": 8192, "n_gpu_layers": 99},
    ),
    # Ollama: strconv.ParseUint of the trimmed, unquoted text; past 2**64 − 1 it is 0 (unset).
    ("ollama", "ollama serve", {"OLLAMA_GPU_OVERHEAD": "'1073741824'"}, {"gpu_overhead": 2**30}),
    (
        "ollama",
        "ollama serve",
        {"OLLAMA_GPU_OVERHEAD": "18446744073709551615"},
        {"gpu_overhead": 2**64 - 1},
    ),
    ("ollama", "ollama serve", {"OLLAMA_GPU_OVERHEAD": "18446744073709551616"}, {}),
    ("ollama", "ollama serve", {"OLLAMA_GPU_OVERHEAD": "1GiB"}, {}),
]


@pytest.mark.parametrize("case", READ, ids=lambda c: f"{c[0]}:{c[1][-40:]}:{c[2]}")
def test_fields_as_the_engine_reads_them(
    case: tuple[str, str, dict[str, str], dict[str, object]],
) -> None:
    kind, line, env, fields = case
    argv = line.split()
    if line == "sh -c":
        argv = ["sh", "-c", "python3 -m sglang.launch_server --context 8192 --mem-frac 0.25"]
        fields = {"mem_fraction_static": 0.25, "context_length": 8192}
    assert engine(kind).read_flags(argv, env) == fields


REFUSED: list[tuple[str, str, dict[str, str], str]] = [
    (
        "llamacpp",
        "llama-server -m m.gguf --ctx-size=8192",
        {},
        "--ctx-size=8192: llama.cpp's llama-server reads no --flag=value (\"invalid argument: "
        '--ctx-size=8192"): write --ctx-size 8192',
    ),
    (
        "llamacpp",
        "llama-server -m m.gguf --ctx 8192",
        {},
        "--ctx: is not --ctx-size: llama.cpp's llama-server takes whole names only, spelled as "
        "it spells them, and stops at start on any other",
    ),
    (
        "tgi",
        "text-generation-launcher --cuda-memory 0.3",
        {},
        "--cuda-memory: is not --cuda-memory-fraction: TGI's launcher (clap) takes whole names "
        "only, spelled as it spells them, and stops at start on any other",
    ),
    (
        "tgi",
        "text-generation-launcher",
        {"CUDA_MEMORY_FRACTION": "1.5"},
        "environment CUDA_MEMORY_FRACTION: 1.5 is not a fraction in (0, 1]: TGI's launcher "
        "(clap) cannot take that share of a card",
    ),
    (
        "trtllm",
        "trtllm-serve serve m --kv_cache_free_gpu_memory_fraction 1.2",
        {},
        "--kv_cache_free_gpu_memory_fraction: 1.2 is not a fraction in (0, 1]: TensorRT-LLM's "
        "trtllm-serve (click) cannot take that share of a card",
    ),
    (
        "sglang",
        "python3 -m sglang.launch_server --mem-fraction-static",
        {},
        "--mem-fraction-static: needs a value: SGLang stops at start (expected one argument)",
    ),
    (
        "vllm",
        "vllm serve m --gpu-memory-utilization 0",
        {},
        "--gpu-memory-utilization: '0' is not in (0, 1]; vLLM's gate needs a share of the card, "
        "e.g. 0.11",
    ),
]


@pytest.mark.parametrize("case", REFUSED, ids=lambda c: f"{c[0]}:{c[1][-40:]}:{c[2]}")
def test_what_the_engine_stops_at_is_a_flag_error(
    case: tuple[str, str, dict[str, str], str],
) -> None:
    kind, line, env, says = case
    with pytest.raises(FlagError) as raised:
        engine(kind).read_flags(line.split(), env)
    assert str(raised.value) == says
