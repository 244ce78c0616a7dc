"""Each engine is recognised in real compose files (data/, sources in data/README.md) and in
process command lines, and its flags are read into the catalogue's engine fields.

The compose files are read here only for their image, entrypoint, command and environment,
with `${VAR:-default}` taken at its default; the compose reader proper is placement/check/compose.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from placement.fit.engines.registry import engine, recognise
from seats.model import Engine as EngineSpec

DATA = Path(__file__).parent / "data"
_VARIABLE = re.compile(r"\$\{(\w+)(?::?[-?]([^}]*))?\}")


def _expand(text: str) -> str:
    return _VARIABLE.sub(lambda m: m.group(2) or "", text)


def _words(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list):
        return [_expand(str(word)) for word in value]
    return shlex.split(_expand(str(value)))


def _env(value: Any) -> dict[str, str]:
    if isinstance(value, dict):
        return {str(k): _expand(str(v)) for k, v in value.items() if v is not None}
    pairs = (str(item).split("=", 1) for item in value or [])
    return {pair[0]: _expand(pair[1]) for pair in pairs if len(pair) == 2}


def services(name: str) -> dict[str, tuple[list[str], str | None, dict[str, str]]]:
    """service → (argv, image, environment) of one data file."""
    body = yaml.safe_load((DATA / name).read_text())
    out = {}
    for service, spec in body["services"].items():
        argv = _words(spec.get("entrypoint")) + _words(spec.get("command"))
        image = _expand(spec["image"]) if spec.get("image") else None
        out[service] = (argv, image, _env(spec.get("environment")))
    return out


COMPOSE = [
    # (file, service, kind or None for "no engine")
    ("sglang/compose-sglang-docker.yaml", "sglang", "sglang"),
    ("sglang/compose-doc-arag.yml", "sglang-llm", "sglang"),
    ("sglang/compose-doc-arag.yml", "sglang-embed", "sglang"),
    ("sglang/compose-doc-arag.yml", "sglang-rerank", "sglang"),
    ("sglang/compose-doc-arag.yml", "api", None),
    ("tgi/compose-harbor-tgi.yml", "tgi", "tgi"),
    ("tgi/compose-slm-exploration.yml", "llm", "tgi"),
    ("tgi/compose-db-agent.yml", "huggingface-tgi", "tgi"),
    ("tgi/compose-db-agent.yml", "postgres", None),
    ("tgi/compose-db-agent.yml", "data-importer", None),
    ("llamacpp/compose-harbor-llamacpp.yml", "llamacpp", "llamacpp"),
    ("llamacpp/compose-harbor-llamacpp.yml", "webui", None),
    ("llamacpp/compose-digital-souls-core.yml", "llama", "llamacpp"),
    ("trtllm/compose-slm-exploration.yml", "llm", "trtllm"),
    # `bash /app/start.sh` on the TensorRT-LLM release image: recognised by its image.
    ("trtllm/compose-agentbusters.yml", "trtllm-api", "trtllm"),
    ("ollama/compose-harbor-ollama.yml", "ollama", "ollama"),
    ("ollama/compose-openhands-ollama.yml", "ollama", "ollama"),
]


@pytest.mark.parametrize("case", COMPOSE, ids=lambda c: f"{c[0]}:{c[1]}")
def test_recognised_in_real_compose_files(case: tuple[str, str, str | None]) -> None:
    name, service, kind = case
    argv, image, _ = services(name)[service]
    found = recognise(argv, image)
    assert (found.kind if found is not None else None) == kind


def test_flags_of_a_real_sglang_service() -> None:
    argv, _, env = services("sglang/compose-doc-arag.yml")["sglang-llm"]
    assert engine("sglang").read_flags(argv, env) == {"context_length": 16384}


def test_flags_of_a_real_llamacpp_service_make_it_fixed() -> None:
    # digital-souls-core pins it: --ctx-size 4096 --parallel 1 --gpu-layers 99 --fit off.
    argv, _, env = services("llamacpp/compose-digital-souls-core.yml")["llama"]
    flags = engine("llamacpp").read_flags(argv, env)
    assert flags == {"ctx_size": 4096, "parallel": 1, "n_gpu_layers": 99, "fit": False}
    spec = EngineSpec.model_validate({"kind": "llamacpp", **flags})
    assert engine("llamacpp").behaviour(spec) == "fixed"


def test_the_sglang_image_alone_is_its_own_entrypoint() -> None:
    assert recognise([], "lmsysorg/sglang:v0.5.8-cu129").kind == "sglang"  # type: ignore[union-attr]


CMDLINES = [
    (
        "python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --mem-fraction-static 0.3",
        "sglang",
    ),
    ("/opt/conda/bin/python3.11 /opt/conda/bin/text-generation-launcher --model-id x", "tgi"),
    ("trtllm-serve meta-llama/Llama-3.1-8B --kv_cache_free_gpu_memory_fraction 0.2", "trtllm"),
    ("/app/llama-server -m /models/q.gguf -ngl 99 -c 8192", "llamacpp"),
    ("sglang serve --model-path Qwen/Qwen3-8B", "sglang"),
    ("/usr/bin/ollama serve", "ollama"),
    ("/usr/bin/ollama runner --ollama-engine --port 40111", "ollama"),
    # Ollama's runner is a llama-server of its own model store: Ollama's, not llama.cpp's.
    ("/usr/lib/ollama/llama-server --model /root/.ollama/models/blobs/sha256-ab -c 8192", "ollama"),
    ("python3 -m vllm.entrypoints.openai.api_server --port 8027", "vllm"),
    ("vllm serve Qwen/Qwen3-4B --gpu-memory-utilization 0.11", "vllm"),
    ("python3 asr_server.py --port 9000", None),
]


@pytest.mark.parametrize("case", CMDLINES, ids=lambda c: c[0][:40])
def test_recognised_in_process_command_lines(case: tuple[str, str | None]) -> None:
    line, kind = case
    found = recognise(line.split())
    assert (found.kind if found is not None else None) == kind


def test_a_declared_engine_wins_over_recognition() -> None:
    # x-gpuplan-engine: KIND on a custom image.
    assert recognise(["/srv/start.sh"], "registry.local/llm:1", declared="tgi").kind == "tgi"  # type: ignore[union-attr]


FLAGS = [
    (
        "sglang",
        "python -m sglang.launch_server --mem-fraction-static 0.30 --max-total-tokens 65536",
        {},
        {"mem_fraction_static": 0.3, "max_total_tokens": 65536},
    ),
    (
        "tgi",
        "text-generation-launcher --model-id m --max-total-tokens 32768",
        {"CUDA_MEMORY_FRACTION": "0.3"},
        {"cuda_memory_fraction": 0.3, "max_total_tokens": 32768},
    ),
    (
        "trtllm",
        "trtllm-serve m --kv_cache_free_gpu_memory_fraction=0.2 --max_seq_len 8192",
        {},
        {"free_gpu_memory_fraction": 0.2, "max_seq_len": 8192},
    ),
    ("llamacpp", "llama-server -m m.gguf -c 8192 --fit off", {}, {"ctx_size": 8192, "fit": False}),
    (
        "ollama",
        "ollama serve",
        {"OLLAMA_GPU_OVERHEAD": "1073741824", "OLLAMA_CONTEXT_LENGTH": "8192"},
        {"gpu_overhead": 1073741824, "num_ctx": 8192},
    ),
    (
        "vllm",
        "vllm serve m --gpu-memory-utilization 0.11 --kv-cache-memory-bytes 8G",
        {},
        {"gpu_memory_utilization": 0.11, "kv_cache_memory": 8 * 2**30},
    ),
    # vLLM's own byte reading: a decimal count only with a decimal suffix (1.5g = 1.5·10⁹ B).
    (
        "vllm",
        "vllm serve m --kv-cache-memory=1.5g",
        {},
        {"kv_cache_memory": 1_500_000_000},
    ),
]


@pytest.mark.parametrize("case", FLAGS, ids=lambda c: c[0])
def test_flags_read_into_catalogue_fields(
    case: tuple[str, str, dict[str, str], dict[str, object]],
) -> None:
    kind, line, env, fields = case
    flags = engine(kind).read_flags(line.split(), env)
    assert flags == fields
    # What the reader returns is a valid engine block of that kind, as the catalogue takes it.
    spec = EngineSpec.model_validate({"kind": kind, **flags})
    assert spec.kind == kind
