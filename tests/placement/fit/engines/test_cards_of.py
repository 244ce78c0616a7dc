"""The cards one server of each engine takes as its command line starts it: its tensor ×
pipeline parallel flags, and TGI's shards over every card it sees unless told otherwise."""

from __future__ import annotations

import pytest

from placement.fit.engines.base import FlagError
from placement.fit.engines.registry import engine

CASES: list[tuple[str, str, dict[str, str], int | None]] = [
    ("sglang", "python3 -m sglang.launch_server --model-path m", {}, 1),
    ("sglang", "python3 -m sglang.launch_server --model-path m --tp 2", {}, 2),
    ("sglang", "python3 -m sglang.launch_server --tp-size=4 --pp-size 2", {}, 8),
    # Data parallel: dp replicas of tp cards each, unless the dp ranks share them (dp attention).
    ("sglang", "python3 -m sglang.launch_server --model-path m --dp 2", {}, 2),
    ("sglang", "python3 -m sglang.launch_server --tp 2 --dp-size 2", {}, 4),
    ("sglang", "python3 -m sglang.launch_server --tp 8 --dp 8 --enable-dp-attention", {}, 8),
    ("tgi", "text-generation-launcher --model-id m", {}, None),
    ("tgi", "text-generation-launcher --model-id m --num-shard 2", {}, 2),
    ("tgi", "text-generation-launcher --model-id m", {"NUM_SHARD": "4"}, 4),
    ("tgi", "text-generation-launcher --model-id m --sharded false", {}, 1),
    ("tgi", "text-generation-launcher --model-id m", {"SHARDED": "false"}, 1),
    ("trtllm", "trtllm-serve serve m", {}, 1),
    ("trtllm", "trtllm-serve serve m --tp_size 2 --pp_size 2", {}, 4),
    ("vllm", "vllm serve m -tp 2", {}, 2),
    ("vllm", "vllm serve m --tensor-parallel-size 2 --pipeline-parallel-size 2", {}, 4),
    ("llamacpp", "llama-server -m m.gguf -ngl 99", {}, 1),
    ("ollama", "ollama serve", {}, 1),
    ("other", "python3 asr_server.py", {}, 1),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}:{c[1][-30:]}:{c[2]}")
def test_cards_one_server_takes(case: tuple[str, str, dict[str, str], int | None]) -> None:
    kind, line, env, cards = case
    assert engine(kind).cards_of(line.split(), env) == cards


# Where the card count came from, as a card-count error names it.
FLAGS: list[tuple[str, str, dict[str, str], str | None]] = [
    ("sglang", "python3 -m sglang.launch_server --model-path m", {}, None),
    ("sglang", "python3 -m sglang.launch_server --tp 2 --dp=2", {}, "--tp 2 × --dp 2"),
    ("tgi", "text-generation-launcher --num-shard=2", {}, "--num-shard 2"),
    ("tgi", "text-generation-launcher", {"NUM_SHARD": "4"}, "environment NUM_SHARD 4"),
    ("tgi", "text-generation-launcher", {"SHARDED": "false"}, "environment SHARDED false"),
    ("trtllm", "trtllm-serve serve m --pp_size 2", {}, "--pp_size 2"),
    ("vllm", "vllm serve m --tensor-parallel 2", {}, "--tensor-parallel 2"),
]


@pytest.mark.parametrize("case", FLAGS, ids=lambda c: f"{c[0]}:{c[1][-30:]}:{c[2]}")
def test_the_flags_that_set_the_cards(case: tuple[str, str, dict[str, str], str | None]) -> None:
    kind, line, env, flag = case
    assert engine(kind).cards_flag(line.split(), env) == flag


BAD: list[tuple[str, str, dict[str, str], str]] = [
    (
        "sglang",
        "python3 -m sglang.launch_server --tensor-parallel-size x",
        {},
        "--tensor-parallel-size: 'x' is not a whole number: SGLang stops at start",
    ),
    (
        "sglang",
        "python3 -m sglang.launch_server --dp 0",
        {},
        "--dp: 0 is below 1, which SGLang cannot start with",
    ),
    (
        "tgi",
        "text-generation-launcher --num-shard two",
        {},
        "--num-shard: 'two' is not a whole number: TGI's launcher (clap) stops at start",
    ),
    (
        "tgi",
        "text-generation-launcher",
        {"NUM_SHARD": "0"},
        "environment NUM_SHARD: 0 is below 1, which TGI's launcher (clap) cannot start with",
    ),
    (
        "tgi",
        "text-generation-launcher --num-sh 2",
        {},
        "--num-sh: is not --num-shard: TGI's launcher (clap) takes whole names only, spelled as "
        "it spells them, and stops at start on any other",
    ),
    (
        "tgi",
        "text-generation-launcher --num-shard 2 --num-shard 4",
        {},
        "--num-shard: is given twice: TGI's launcher (clap) stops at start (\"the argument "
        "'--num-shard <NUM_SHARD>' cannot be used multiple times\")",
    ),
    (
        "trtllm",
        "trtllm-serve serve m --tp-size 2",
        {},
        "--tp-size: is not --tp_size: TensorRT-LLM's trtllm-serve (click) takes whole names "
        "only, spelled as it spells them, and stops at start on any other",
    ),
]


@pytest.mark.parametrize("case", BAD, ids=lambda c: f"{c[0]}:{c[1][-30:]}:{c[2]}")
def test_a_card_count_the_engine_refuses_is_bad_input(
    case: tuple[str, str, dict[str, str], str],
) -> None:
    kind, line, env, says = case
    with pytest.raises(FlagError) as raised:
        engine(kind).cards_of(line.split(), env)
    assert str(raised.value) == says
