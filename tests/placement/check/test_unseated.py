"""`check --compose` of services of every engine as docker starts them: the version their image
tag names, and the verdict of a service that no catalogue seat describes (DESIGN.md, Engines and
Whole deploys)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from placement.check.compose import load_compose
from placement.cli import main as cli
from placement.fit.engines.registry import spec_of
from tests.placement.check.test_mixed_engines import CHAT_OLLAMA, SNAPSHOT, STACK, catalogue_with


def check_json(
    catalogue: Path, compose: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, dict[str, Any]]:
    argv = ["check", "--compose", str(compose), "--catalogue", str(catalogue)]
    code = cli.main([*argv, "--snapshot", str(SNAPSHOT), "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_each_service_carries_the_version_its_image_tag_names() -> None:
    services = {s.name: s for s in load_compose(STACK, {}).services}
    assert {name: s.version for name, s in services.items()} == {
        "chat-vllm": "0.11.0",
        "chat-sglang": "0.5.8",  # lmsysorg/sglang:v0.5.8-cu129
        "chat-ollama": "0.12.6",  # ollama/ollama:0.12.6
    }


def test_the_image_version_lands_in_the_verdict_and_a_disagreeing_catalogue_is_warned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sglang = {
        "name": "chat-sglang",
        "host": "fv-ml1",
        "resident": "3 GiB",
        "engine": {"kind": "sglang", "version": "0.5.7"},
    }
    # The catalogue's chat-ollama names no version: the image's is taken, with no warning.
    ollama = {**CHAT_OLLAMA, "engine": {"kind": "ollama"}}
    catalogue = catalogue_with(tmp_path, monkeypatch, ollama, sglang)
    _, found = check_json(catalogue, STACK, capsys)
    verdicts = {v["service"]: v for v in found["verdicts"]}
    assert verdicts["chat-sglang"]["engine"]["version"] == "0.5.8"
    assert verdicts["chat-ollama"]["engine"]["version"] == "0.12.6"
    said = [w for w in found["warnings"] if w.startswith("compose image ")]
    assert said == [
        "compose image lmsysorg/sglang:v0.5.8-cu129 is SGLang 0.5.8; the catalogue says 0.5.7 "
        "for chat-sglang (judged as 0.5.8)"
    ]


def test_a_vllm_service_is_built_by_its_engine_from_its_flags() -> None:
    # --gpu-memory-utilization 0.05 --kv-cache-memory 1G, read by vllm_flags.read_sizes.
    vllm = next(s for s in load_compose(STACK, {}).services if s.name == "chat-vllm")
    assert vllm.engine_fields == (("gpu_memory_utilization", 0.05), ("kv_cache_memory", 2**30))
    spec = spec_of("vllm", dict(vllm.engine_fields), version=vllm.version)
    assert (spec.kind, spec.version, spec.kv_cache_bytes) == ("vllm", "0.11.0", 2**30)
    assert repr(spec.gpu_memory_utilization) == "0.05"
