"""vLLM's and SGLang's flags as argparse reads them, release by release (argparse_flags.py).

Each case is a word as written and what that release's parser makes of it: the flag it stands
for, or the start-up error naming what it could match. A version with no list of its own is read
with the releases either side of it; an unknown one with every release.
"""

from __future__ import annotations

import hashlib

import pytest

from placement.fit.engines.argparse_flags import release_key
from placement.fit.engines.base import FlagError
from placement.fit.engines.sglang import READER as SGLANG
from placement.fit.engines.vllm_flags import READER as VLLM

VLLM_CASES: list[tuple[str | None, str, str]] = [
    # 0.10.x: the seed's `--kv-cache-memory` and shorter are --kv-cache-memory-bytes.
    ("0.10.2", "--kv-cache-memory", "--kv-cache-memory-bytes"),
    ("0.10.2", "--kv-cache-me", "--kv-cache-memory-bytes"),
    ("0.10.2", "--tensor-parallel", "--tensor-parallel-size"),
    ("0.10.2", "-tp", "--tensor-parallel-size"),
    ("0.10.2", "--gpu_memory_util", "--gpu-memory-utilization"),
    # 0.11.x, the seed's image.
    ("0.11.0", "--kv-cache-mem", "--kv-cache-memory-bytes"),
    ("0.11.0", "--gpu-memory-util", "--gpu-memory-utilization"),
    ("0.11.0", "--pipeline-par", "--pipeline-parallel-size"),
    ("0.11.0", "--enable-lora", "--enable-lora"),  # exact wins over --enable-lora-bias
    # 0.33 and 0.34: --device-memory-utilization is the util's second name.
    ("0.33.0", "--device-memory", "--gpu-memory-utilization"),
    ("0.34.0", "--kv-cache-mem", "--kv-cache-memory-bytes"),
    ("0.34.0", "--device-memory-utilization", "--gpu-memory-utilization"),
    ("0.34.0", "--max-model", "--max-model-len"),
    # Between 0.11.0 and 0.33.0 the two lists either side: a prefix one of them reads.
    ("0.20.1", "--device-memory", "--gpu-memory-utilization"),
    (None, "--tensor-parallel", "--tensor-parallel-size"),
]

VLLM_ERRORS: list[tuple[str | None, str, str]] = [
    (
        "0.34.0",
        "--kv-cache-me",
        '--kv-cache-me: ambiguous: vLLM 0.34.0 stops at start with "ambiguous option: '
        "--kv-cache-me could match --kv-cache-memory-bytes, --kv-cache-metrics, "
        '--kv-cache-metrics-sample"',
    ),
    (
        "0.34.0",
        "--dp",
        '--dp: ambiguous: vLLM 0.34.0 stops at start with "ambiguous option: --dp could match '
        "--dp-sync-interval, --dp-supervisor-probe-interval-s, --dp-supervisor-probe-timeout-s, "
        '--dp-supervisor-probe-failure-threshold"',
    ),
    (
        "0.11.0",
        "--device-memory",
        '--device-memory: no flag of vLLM 0.11.0: it stops at start with "unrecognized '
        'arguments: --device-memory"',
    ),
    (
        "0.9.0",
        "--dp",
        "--dp: no flag of vLLM 0.9.0 (read with the flags of 0.10.2): it stops at start with "
        '"unrecognized arguments: --dp"',
    ),
]

SGLANG_CASES: list[tuple[str | None, str, str]] = [
    ("0.4.3.post4", "--tp", "--tensor-parallel-size"),
    ("0.4.3.post4", "--dp", "--data-parallel-size"),
    ("0.4.3.post4", "--mem-frac", "--mem-fraction-static"),
    ("0.4.10", "--pp", "--pipeline-parallel-size"),
    ("0.5.8", "--tp", "--tensor-parallel-size"),
    ("0.5.8", "--model", "--model-path"),
    ("0.5.8", "--max-total", "--max-total-tokens"),
    ("0.5.8", "--context", "--context-length"),
]

SGLANG_ERRORS: list[tuple[str | None, str, str]] = [
    (
        "0.5.8",
        "--pp",
        '--pp: ambiguous: SGLang 0.5.8 stops at start with "ambiguous option: --pp could match '
        '--pp-size, --pp-max-micro-batch-size, --pp-async-batch-depth"',
    ),
    (
        "0.4.3.post4",
        "--pp",
        '--pp: no flag of SGLang 0.4.3.post4: it stops at start with "unrecognized arguments: '
        '--pp"',
    ),
    # SGLang's parser is argparse's own: no `_` for `-`.
    (
        "0.5.8",
        "--mem_fraction_static",
        "--mem_fraction_static: no flag of SGLang 0.5.8: it stops at start with "
        '"unrecognized arguments: --mem_fraction_static"',
    ),
]


@pytest.mark.parametrize(("version", "word", "flag"), VLLM_CASES)
def test_vllm_reads_a_word_as_its_release_does(version: str | None, word: str, flag: str) -> None:
    assert VLLM.resolve(word, version) == flag


@pytest.mark.parametrize(("version", "word", "says"), VLLM_ERRORS)
def test_vllm_stops_at_an_ambiguous_or_unknown_word(
    version: str | None, word: str, says: str
) -> None:
    with pytest.raises(FlagError) as raised:
        VLLM.resolve(word, version)
    assert str(raised.value) == says and raised.value.flag == word


@pytest.mark.parametrize(("version", "word", "flag"), SGLANG_CASES)
def test_sglang_reads_a_word_as_its_release_does(version: str | None, word: str, flag: str) -> None:
    assert SGLANG.resolve(word, version) == flag


@pytest.mark.parametrize(("version", "word", "says"), SGLANG_ERRORS)
def test_sglang_stops_at_an_ambiguous_or_unknown_word(
    version: str | None, word: str, says: str
) -> None:
    with pytest.raises(FlagError) as raised:
        SGLANG.resolve(word, version)
    assert str(raised.value) == says


def test_the_tables_a_version_is_read_with() -> None:
    """Its own release (any patch suffix), else the releases either side, else all of them."""
    releases = lambda version: [t.release for t in VLLM.tables_for(version)]  # noqa: E731
    assert releases("0.11.0") == ["0.11.0"]
    assert releases("v0.34.0") == ["0.34.0"]
    assert releases("0.20.1") == ["0.11.0", "0.33.0"]
    assert releases("0.35.0") == ["0.34.0"]
    assert releases(None) == ["0.10.2", "0.11.0", "0.33.0", "0.34.0"]
    assert [t.release for t in SGLANG.tables_for("0.4.3")] == ["0.4.3.post4"]
    assert release_key("0.4.3.post4") == (0, 4, 3, 4) and release_key("latest") is None


def test_an_option_string_with_its_value_after_equals() -> None:
    """`--flag=value` is `--flag value`; values, negative numbers and what follows `--` are not
    flags; `--name.key` is vLLM's JSON spelling of `--name`; `-O3` its compilation level."""
    args = [
        "m",
        "--gpu-memory-util=0.5",
        "--max-model-len",
        "-1",
        "--compilation-config.cudagraph_mode",
        "FULL",
        "-O3",
        "--",
        "--nonsense",
    ]
    found = [(o.name, o.written, o.value, o.index) for o in VLLM.options(args, "0.11.0")]
    assert found == [
        ("--gpu-memory-utilization", "--gpu-memory-util", "0.5", 1),
        ("--max-model-len", "--max-model-len", None, 2),
        ("--compilation-config", "--compilation-config", None, 4),
    ]


# Every vLLM release's table, action by action in its order (the order argparse names the
# matches of an ambiguous prefix in), as it was while each release was written out whole.
VLLM_TABLES = {
    "0.10.2": (177, "13f99f886ae19844"),
    "0.11.0": (180, "1d8aa89ab663900c"),
    "0.33.0": (321, "9d6cfa7edc9544a6"),
    "0.34.0": (328, "a88b2f3b0abdbc19"),
}


def test_every_vllm_release_reads_the_table_it_had_written_out_whole() -> None:
    tables = {
        t.release: (
            len(t.actions),
            hashlib.sha256("\n".join("|".join(a) for a in t.actions).encode()).hexdigest()[:16],
        )
        for t in VLLM.tables
    }
    assert tables == VLLM_TABLES
