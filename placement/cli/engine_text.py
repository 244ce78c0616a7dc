"""The words of each engine's own refusal or spill, from its data (`Refusal.said` and facts).

Each engine's module (placement/fit/engines/) says how it refuses as figures and names; the
sentences are written here, each number once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from placement.cli.render import b

Data = Mapping[str, Any]


def _vllm_gate(r: Data) -> str:
    return (
        f"vLLM refuses at start: {b(r['room_bytes'])} free < util {r['util']} × "
        f"{b(r['cuda_total_bytes'])} = {b(r['need_bytes'])}, short {b(r['short_bytes'])}"
    )


def _sglang_gate(r: Data) -> str:
    return (
        f"SGLang refuses at start: weights {b(r['need_bytes'])} ≥ mem_fraction_static "
        f"{r['share']} × {b(r['free_bytes'])} free = {b(r['room_bytes'])}, short "
        f'{b(r["short_bytes"])} ("{r["error"]}")'
    )


def _tgi_gate(r: Data) -> str:
    return (
        f"TGI leaves (1 − 0.9 × {r['share']}) × {b(r['cuda_total_bytes'])} = "
        f"{b(r['level_bytes'])} free and its weights leave nothing above that: its warm-up "
        f'fails ("{r["error"]}")'
    )


def _llamacpp_spill(r: Data) -> str:
    return (
        f"llama.cpp starts, slowly: {b(r['need_bytes'])} to load, room {b(r['room_bytes'])} once "
        f"--fit leaves {b(r['margin_bytes'])} free, so it moves {b(r['short_bytes'])} of the "
        "model off the card (onto the CPU)"
    )


def _ollama_spill(r: Data) -> str:
    return (
        f"Ollama starts, slowly: {b(r['need_bytes'])} to load, free − {r['overhead']} − "
        f"{b(r['minimum_bytes'])} leaves {b(r['room_bytes'])}, so {b(r['short_bytes'])} of the "
        "model runs on the CPU"
    )


def _sglang_kv(r: Data) -> str:
    return (
        f"SGLang's KV pool holds {r['tokens']:,} tokens here, under its context of "
        f"{r['wanted']:,}: it starts and caps every request at the pool (raise "
        f"{' or '.join(r['raise_flags'])}, or lower {r['lower_flag']})"
    )


ENGINE_WRITERS: dict[str, Callable[[Data], str]] = {
    "vllm_gate": _vllm_gate,
    "sglang_gate": _sglang_gate,
    "tgi_gate": _tgi_gate,
    "trtllm_gate": lambda r: (
        "TensorRT-LLM's weights and warm-up leave no free memory for a KV cache on this card "
        "(its room is what is free at start)"
    ),
    "llamacpp_spill": _llamacpp_spill,
    "ollama_spill": _ollama_spill,
    "sglang_kv": _sglang_kv,
    "tgi_kv": lambda r: (
        f"TGI refuses at start: max_total_tokens {r['wanted']:,} > {r['tokens']:,} tokens its KV "
        f'cache holds here ("{r["error"]}")'
    ),
    "trtllm_kv": lambda r: (
        f"TensorRT-LLM's KV cache holds {r['tokens']:,} tokens here, under max_seq_len "
        f"{r['wanted']:,}: it starts with max_seq_len cut to fit"
    ),
    "llamacpp_kv": lambda r: (
        f"llama.cpp gives each slot {r['tokens']:,} tokens (-c ÷ -np), under the "
        f"{r['wanted']:,} a request may need: longer ones are cut"
    ),
    "ollama_kv": lambda r: (
        f"Ollama holds {r['tokens']:,} tokens per request (num_ctx), under the {r['wanted']:,} a "
        "request may need: longer prompts are truncated"
    ),
}

# The engine sentences that say their need, room and short themselves (printed alone).
ENGINE_SAYS_FIGURES = frozenset({"vllm_gate", "sglang_gate", "llamacpp_spill", "ollama_spill"})
