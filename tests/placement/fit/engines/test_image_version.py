"""Each engine reads its version from its own images' tags, by one parser (base.image_version)
with each engine's tag pattern; a tag that names no version (`latest`, `main`, a variant alone)
and an image named by digest alone give None.

The images of REAL are those of the real compose files in data/ (sources in data/README.md)
and tests/placement/check/data/mixed-stack.yaml; the rest follow each project's published tags.
"""

from __future__ import annotations

import pytest

from placement.fit.engines.base import image_version, split_image
from placement.fit.engines.registry import KINDS, engine
from placement.fit.engines.vllm_command import image_version as vllm_image_version

REAL = [
    ("sglang", "lmsysorg/sglang:latest", None),
    ("sglang", "lmsysorg/sglang:v0.5.8-cu129", "0.5.8"),
    ("tgi", "ghcr.io/huggingface/text-generation-inference:2.2.0", "2.2.0"),
    ("tgi", "ghcr.io/huggingface/text-generation-inference:3.3.4", "3.3.4"),
    ("tgi", "ghcr.io/huggingface/text-generation-inference:latest", None),
    ("trtllm", "nvcr.io/nvidia/tensorrt-llm/release:0.21.0", "0.21.0"),
    ("trtllm", "nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc1", "1.3.0rc1"),
    ("llamacpp", "ghcr.io/ggerganov/llama.cpp:full-cuda", None),
    (
        "llamacpp",
        "ghcr.io/ggml-org/llama.cpp@sha256:69019445c94c970496c8f6d6447214b837508162dfe1152768942c51237e3ab7",
        None,
    ),
    ("ollama", "ollama/ollama:latest", None),
    ("ollama", "ollama/ollama", None),
    ("ollama", "ollama/ollama:0.12.6", "0.12.6"),
    ("vllm", "vllm/vllm-openai:v0.11.0", "0.11.0"),
]
PUBLISHED = [
    ("sglang", "lmsysorg/sglang:v0.5.8-cu126", "0.5.8"),
    ("sglang", "lmsysorg/sglang:v0.4.6.post1-cu124", "0.4.6.post1"),
    ("sglang", "lmsysorg/sglang:v0.5.0rc0-cu126", "0.5.0rc0"),
    ("sglang", "lmsysorg/sglang:dev", None),
    ("tgi", "ghcr.io/huggingface/text-generation-inference:2.4.0-intel-cpu", "2.4.0"),
    ("tgi", "ghcr.io/huggingface/text-generation-inference:sha-e4201f4-intel-cpu", None),
    ("trtllm", "nvcr.io/nvidia/tensorrt-llm/release:1.0.0", "1.0.0"),
    ("trtllm", "nvcr.io/nvidia/tensorrt-llm/release:1.1.0rc2.post2", "1.1.0rc2.post2"),
    ("llamacpp", "ghcr.io/ggml-org/llama.cpp:server-b6123", "b6123"),
    ("llamacpp", "ghcr.io/ggml-org/llama.cpp:server-cuda-b6123", "b6123"),
    ("llamacpp", "ghcr.io/ggml-org/llama.cpp:server-cuda", None),
    ("ollama", "ollama/ollama:0.12.6-rocm", "0.12.6"),
    ("ollama", "ollama/ollama:0.5.14-rc0", "0.5.14-rc0"),
    ("ollama", "ollama/ollama:rocm", None),
    ("vllm", "docker.io/vllm/vllm-openai:v0.8.5.post1", "0.8.5.post1"),
    ("vllm", "registry.local:5000/vllm/vllm-openai:v0.10.1.1", "0.10.1.1"),
    ("vllm", "vllm/vllm-openai:nightly", None),
    ("vllm", "vllm/vllm-openai:main", None),
]


@pytest.mark.parametrize("case", REAL + PUBLISHED, ids=lambda c: c[1][-40:])
def test_each_engine_reads_its_own_tags(case: tuple[str, str, str | None]) -> None:
    kind, image, version = case
    assert engine(kind).version_of(image) == version


@pytest.mark.parametrize("case", REAL, ids=lambda c: c[1][-40:])
def test_no_engine_reads_a_version_from_another_engines_image(
    case: tuple[str, str, str | None],
) -> None:
    kind, image, _ = case
    others = [other for other in KINDS if other != kind]
    assert [other for other in others if engine(other).version_of(image) is not None] == []


def test_the_vllm_spelling_is_the_shared_parser() -> None:
    # compose's `_find` asks whether the image is vLLM's own (its entrypoint is the server).
    assert vllm_image_version("vllm/vllm-openai:latest") == (True, None)
    assert vllm_image_version("vllm/vllm-openai:v0.11.0") == (True, "0.11.0")
    assert vllm_image_version("lmsysorg/sglang:v0.5.8-cu126") == (False, None)
    assert vllm_image_version(None) == (False, None)


@pytest.mark.parametrize(
    ("image", "split"),
    [
        ("nvcr.io/nvidia/tensorrt-llm/release:1.0.0", ("nvidia/tensorrt-llm/release", "1.0.0")),
        ("localhost:5000/ollama/ollama:0.12.6", ("ollama/ollama", "0.12.6")),
        ("localhost/ollama/ollama", ("ollama/ollama", None)),
        ("ghcr.io/ggml-org/llama.cpp:server@sha256:ab", ("ggml-org/llama.cpp", "server")),
        ("ghcr.io/ggml-org/llama.cpp@sha256:ab", ("ggml-org/llama.cpp", None)),
        ("LMSysOrg/SGLang:v0.5.8-cu126", ("lmsysorg/sglang", "v0.5.8-cu126")),
    ],
)
def test_an_image_reference_splits_as_docker_reads_it(
    image: str, split: tuple[str, str | None]
) -> None:
    assert split_image(image) == split


def test_a_repository_counts_with_the_paths_below_it_and_no_others() -> None:
    tag = engine("trtllm").version_tag
    devel = image_version("nvcr.io/nvidia/tensorrt-llm/devel:1.0.0", ("nvidia/tensorrt-llm",), tag)
    assert devel == (True, "1.0.0")
    assert image_version("nvcr.io/nvidia/tensorrt-llm-x:1.0.0", ("nvidia/tensorrt-llm",), tag) == (
        False,
        None,
    )
