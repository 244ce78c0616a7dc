"""The cards one server of each engine takes as its command line starts it: its tensor ×
pipeline parallel flags, and TGI's shards over every card it sees unless told otherwise."""

from __future__ import annotations

import pytest

from placement.fit.engines.registry import engine

CASES: list[tuple[str, str, dict[str, str], int | None]] = [
    ("sglang", "python3 -m sglang.launch_server --model-path m", {}, 1),
    ("sglang", "python3 -m sglang.launch_server --model-path m --tp 2", {}, 2),
    ("sglang", "python3 -m sglang.launch_server --tp-size=4 --pp-size 2", {}, 8),
    ("sglang", "python3 -m sglang.launch_server --tensor-parallel-size x", {}, 1),
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
