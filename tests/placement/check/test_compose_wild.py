"""Real compose files that run vLLM, from public repositories (source on each file's first line).

What gpuplan reads from each is pinned here from reading the file by hand: the GPU services,
util, KV cache bytes, tensor-parallel size, version, cards; the services left out; and the
ones gpuplan cannot size (a custom image, a wrapper script: `unknown` until declared) or
refuses (an unset variable in the command). `.env` beside a file is given where it names one.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import NamedTuple

import pytest

from placement.check.compose import ComposeFile, load_compose

WILD = Path(__file__).parent / "data" / "compose-wild"


def _load(name: str, dotenv: str | None, environ: dict[str, str], tmp_path: Path) -> ComposeFile:
    """The wild file `name` copied under tmp_path (with its `.env` when given), then read."""
    path = tmp_path / f"{name}.yaml"
    shutil.copy(WILD / f"{name}.yaml", path)
    if dotenv is not None:
        (tmp_path / ".env").write_text(dotenv, encoding="utf-8")
    return load_compose(path, environ)


class Read(NamedTuple):
    """One GPU service as gpuplan reads it: cards are (device ids, count, CUDA_VISIBLE_DEVICES)."""

    service: str
    engine: str | None
    util: str | None
    kv_bytes: int | None
    tp: int
    version: str | None
    cards: tuple[tuple[str, ...] | None, int | None, tuple[str, ...] | None]


ALL = (None, -1, None)
ALL_SEE_0 = (None, -1, ("0",))


CASES: list[tuple[str, dict[str, str], str | None, list[Read], tuple[str, ...], str | None]] = [
    # (file, environment, .env text, services, skipped, error text of a bad service)
    ("gptoss-20b", {}, None, [Read("vllm", "vllm", "0.90", None, 1, "0.15.0", ALL_SEE_0)], ("backend", "frontend"), None),
    ("gptoss-all", {}, None, [Read("vllm", "vllm", "0.8", None, 1, "0.10.1.1", ALL_SEE_0)], ("backend", "frontend", "redis", "nginx"), None),
    ("gptoss-simple", {}, None, [Read("vllm", "vllm", "0.8", None, 1, "0.10.1.1", ALL_SEE_0)], ("backend", "frontend"), None),
    # A custom image (built from a Dockerfile) whose command holds vLLM's flags: unknown until declared.
    ("gptoss-vllm", {}, None, [Read("vllm", None, None, None, 1, None, (None, 1, ("0",)))], (), None),
    # Its own image, but `python -m vllm.entrypoints.openai.api_server` in the command: vLLM.
    ("gptoss-qwen", {}, "", [Read("qwen3-next", "vllm", "0.90", None, 1, None, ALL_SEE_0)], ("backend", "frontend"), None),
    # The vllm image behind a wrapper script mounted as the entrypoint: unknown.
    ("homelab-qwen3", {}, "", [Read("vllm", None, None, None, 1, None, ALL)], (), None),
    ("homelab-nemotron", {}, "", [Read("vllm", None, None, None, 1, None, ALL)], (), None),
    ("selfhost", {}, None, [], (), "variable MODEL is not set"),
    ("selfhost", {"MODEL": "Qwen/Qwen3-8B", "MODEL_PARAMETERS": "--gpu-memory-utilization 0.85 -tp 2"}, None,
     [Read("vllm", "vllm", "0.85", None, 2, "0.17.0", ALL)], (), None),
    ("serve-multi-gemma4", {}, None, [Read("gemma4", "vllm", "0.75", None, 1, "0.27.1", ALL)], (), None),
    ("serve-multi-qwen38", {}, None, [Read("qwen38-fp8", "vllm", "0.65", None, 1, "0.27.1", ALL)], (), None),
    ("serve-multi-nemotron", {}, None, [Read("nemotron-35-lightning-dspark", "vllm", "0.80", None, 1, "0.27.1", ALL)], (), None),
    ("serve-multi-kat-coder", {}, None, [Read("kat-coder-v25-dev-awq", "vllm", "0.8", None, 1, "0.27.1", ALL)], (), None),
    ("simple-llm", {}, None, [Read("vllm", "vllm", None, None, 1, "0.17.1", ALL)], ("open-webui", "prometheus", "grafana"), None),
    ("taoari", {}, None, [Read("vllm", "vllm", "0.5", None, 1, "0.5.5", ALL)], (), None),
    # Built from a Dockerfile, no command at all: unknown.
    ("timmson", {}, None, [Read("vllm", None, None, None, 1, None, ALL)], (), None),
    ("zbhavyai", {}, None, [Read("vllm", "vllm", "0.8", None, 1, "0.12.0", ALL)], (), None),
]  # fmt: skip


def test_at_least_fifteen_real_files_each_with_its_source() -> None:
    files = sorted(WILD.glob("*.yaml"))
    assert len(files) >= 15
    for path in files:
        first = path.read_text(encoding="utf-8").splitlines()[0]
        assert first.startswith("# source: github.com/") and " @ " in first, path.name
    assert {path.stem for path in files} == {case[0] for case in CASES}


@pytest.mark.parametrize(
    ("name", "environ", "dotenv", "expected", "skipped", "error"),
    CASES,
    ids=[f"{case[0]}-{i}" for i, case in enumerate(CASES)],
)
def test_what_gpuplan_reads(
    name: str,
    environ: dict[str, str],
    dotenv: str | None,
    expected: list[Read],
    skipped: tuple[str, ...],
    error: str | None,
    tmp_path: Path,
) -> None:
    loaded = _load(name, dotenv, environ, tmp_path)
    read = [
        Read(
            s.name,
            s.engine,
            s.util_text,
            s.kv_cache_bytes,
            s.tensor_parallel_size,
            s.version,
            (s.devices, s.device_count, s.visible),
        )
        for s in loaded.services
    ]
    assert read == expected
    assert loaded.skipped == skipped
    if error is None:
        assert loaded.errors == ()
    else:
        (bad,) = loaded.errors
        assert error in str(bad) and name in str(bad)


@pytest.mark.parametrize(
    ("name", "dotenv", "max_model_len", "kv_cache_dtype"),
    [
        ("gptoss-20b", None, 128_000, None),
        ("gptoss-qwen", "", 8_192, None),
        ("serve-multi-gemma4", None, 262_144, None),
        ("serve-multi-kat-coder", None, 262_144, None),
        ("serve-multi-nemotron", None, None, "fp8"),
        ("serve-multi-qwen38", None, 262_144, "fp8"),
        ("taoari", None, 2_048, None),
        ("zbhavyai", None, 4_096, None),
    ],
)  # fmt: skip
def test_what_the_arithmetic_needs_is_read_from_real_commands(
    name: str,
    dotenv: str | None,
    max_model_len: int | None,
    kv_cache_dtype: str | None,
    tmp_path: Path,
) -> None:
    """Issue 26: --max-model-len (rule kv_capacity) and --kv-cache-dtype, as each file writes them."""
    (service,) = _load(name, dotenv, {}, tmp_path).services
    assert (service.max_model_len, service.kv_cache_dtype) == (max_model_len, kv_cache_dtype)
    assert service.data_parallel_size == 1
