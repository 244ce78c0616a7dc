"""A model's per-card KV bytes per token, max_model_len and weights from its Hugging Face files.

Pure functions over a parsed `config.json` and the JSON headers of `*.safetensors` files (the
CLI reads the files): counted as vLLM counts them (`vllm/v1/kv_cache_interface.py`,
`vllm/config/model.py`), DESIGN.md "vLLM's second refusal".
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from seats.errors import BadInputError

# vLLM's dtype "auto" serves a float32 checkpoint in 16 bits, so its KV cache too.
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 2, "float": 2}
SAFETENSORS_DTYPE_BYTES = {
    "F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2,
    "I16": 2, "U16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "I8": 1, "U8": 1, "BOOL": 1,
}  # fmt: skip
# Where vLLM looks for a model's context length; it takes the smallest present.
LENGTH_KEYS = (
    "max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
    "model_max_length", "max_sequence_length", "max_seq_length", "seq_len",
)  # fmt: skip
HEADER_LIMIT_BYTES = 100 * 1024 * 1024  # the safetensors format's own cap on a header


@dataclass(frozen=True)
class KvPerToken:
    """Bytes one token's KV cache takes on each card, and how they were counted."""

    value: int
    formula: str
    notes: tuple[str, ...]


def text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The language model's part of a multimodal config (Gemma 3, Llava …), else the config."""
    inner = config.get("text_config")
    return inner if isinstance(inner, Mapping) else config


def _field(config: Mapping[str, Any], source: str, *names: str) -> int:
    for name in names:
        value = config.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    raise BadInputError(f"{source}: no {' or '.join(names)} (a whole number of at least 1)")


def dtype_bytes(config: Mapping[str, Any], source: str) -> tuple[int, str]:
    """The KV cache element size for vLLM's `--kv-cache-dtype auto` (the model's dtype)."""
    name = config.get("torch_dtype") or config.get("dtype")
    if not isinstance(name, str):
        raise BadInputError(f"{source}: no torch_dtype or dtype")
    size = DTYPE_BYTES.get(name.removeprefix("torch."))
    if size is None:
        raise BadInputError(f"{source}: torch_dtype {name!r} is not one vLLM serves as is")
    return size, name


def kv_bytes_per_token(config: Mapping[str, Any], source: str, tensor_parallel: int) -> KvPerToken:
    """Per card: 2 × layers × (KV heads ÷ TP) × head dim × dtype bytes; MLA: layers × (rank + rope dim).

    MLA (DeepSeek V2/V3: `kv_lora_rank`) caches one compressed latent per layer that every
    rank holds whole, so it is not divided by the tensor-parallel size.
    """
    model = text_config(config)
    typed = model if ("torch_dtype" in model or "dtype" in model) else config
    size, dtype = dtype_bytes(typed, source)
    layers = _field(model, source, "num_hidden_layers", "n_layer", "num_layers")
    if model.get("kv_lora_rank"):
        rank = _field(model, source, "kv_lora_rank")
        rope = _field(model, source, "qk_rope_head_dim")
        value = layers * (rank + rope) * size
        formula = f"MLA: {layers} layers × ({rank} + {rope}) × {size} B ({dtype}), on every card"
        return KvPerToken(value, formula, ())
    heads = _field(model, source, "num_attention_heads", "n_head")
    kv_heads = model.get("num_key_value_heads") or heads
    if not isinstance(kv_heads, int) or kv_heads < 1:
        raise BadInputError(f"{source}: num_key_value_heads must be a whole number of at least 1")
    head_dim = model.get("head_dim") or _field(model, source, "hidden_size", "n_embd") // heads
    # vLLM splits KV heads across ranks and replicates them when there are fewer than ranks.
    per_rank = max(1, kv_heads // tensor_parallel)
    value = 2 * layers * per_rank * head_dim * size
    formula = (
        f"2 (K and V) × {layers} layers × {per_rank} KV heads"
        + (f" ({kv_heads} ÷ TP {tensor_parallel})" if tensor_parallel > 1 else "")
        + f" × head dim {head_dim} × {size} B ({dtype})"
    )
    return KvPerToken(value, formula, _sliding_notes(model, layers, value))


def sliding_layers(model: Mapping[str, Any], layers: int) -> int:
    """How many layers attend through a sliding window (0 when none do)."""
    types = model.get("layer_types")
    if isinstance(types, list):
        return sum(1 for kind in types if kind == "sliding_attention")
    window = model.get("sliding_window")
    if not window or model.get("use_sliding_window") is False:
        return 0
    if model.get("model_type") == "gemma2":
        return layers // 2  # every other layer (Gemma 2)
    pattern = model.get("sliding_window_pattern")
    if isinstance(pattern, int) and pattern > 1:
        return layers - layers // pattern  # one global layer in each `pattern` (Gemma 3)
    return layers


def _sliding_notes(model: Mapping[str, Any], layers: int, value: int) -> tuple[str, ...]:
    sliding = sliding_layers(model, layers)
    if not sliding:
        return ()
    full = value * (layers - sliding) // layers
    return (
        f"sliding window ({model.get('sliding_window')} tokens) on {sliding} of {layers} layers: "
        "counted here as full attention, an upper bound. vLLM's hybrid KV cache manager "
        "(0.10 on) keeps only min(window − 1 + max_num_batched_tokens, max_model_len) tokens "
        f"on those layers; the full-attention layers alone take {full:,} B per token",
    )


def derived_max_model_len(config: Mapping[str, Any], source: str) -> tuple[int, str]:
    """vLLM's default --max-model-len: the smallest length key, times a rope scaling factor."""
    model = text_config(config)
    found = {
        key: model[key]
        for key in LENGTH_KEYS
        if isinstance(model.get(key), int) and not isinstance(model.get(key), bool)
    }
    if not found:
        raise BadInputError(f"{source}: no {' or '.join(LENGTH_KEYS[:2])} (the context length)")
    key = min(found, key=lambda name: found[name])
    length, how = found[key], key
    scaling = model.get("rope_scaling")
    if isinstance(scaling, Mapping) and "gemma3" not in str(model.get("model_type", "")):
        kind = scaling.get("rope_type") or scaling.get("type")
        if kind not in ("su", "longrope", "llama3", "default", None):
            factor = scaling.get("factor", 1.0)
            if kind == "yarn" and "original_max_position_embeddings" in scaling:
                length = scaling["original_max_position_embeddings"]
                how = "rope_scaling.original_max_position_embeddings"
            length, how = int(length * factor), f"{how} × rope_scaling.factor {factor} ({kind})"
    return length, how


def safetensors_bytes(header: bytes, tensor_bytes: int, source: str) -> int:
    """The bytes of a safetensors file's tensors, from its JSON header (never the tensors).

    `tensor_bytes` is what the file holds after its header; a header that claims more is refused.
    """
    try:
        entries = json.loads(header)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadInputError(f"{source}: the safetensors header is not JSON ({exc})") from None
    if not isinstance(entries, dict):
        raise BadInputError(f"{source}: the safetensors header is not a JSON object")
    total = 0
    for name, entry in entries.items():
        if name == "__metadata__":
            continue
        size, end = _tensor_size(entry, f"{source}: tensor {name!r}")
        if end > tensor_bytes:
            raise BadInputError(
                f"{source}: tensor {name!r} ends at byte {end:,} of the data, which holds "
                f"{tensor_bytes:,}: the header claims more bytes than the file"
            )
        total += size
    return total


def _tensor_size(entry: object, where: str) -> tuple[int, int]:
    """(bytes, end offset) of one header entry, from data_offsets or dtype × shape."""
    if not isinstance(entry, dict):
        raise BadInputError(f"{where}: not an object with dtype, shape and data_offsets")
    offsets = entry.get("data_offsets")
    if isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(x, int) for x in offsets):
        begin, end = offsets
        if not 0 <= begin <= end:
            raise BadInputError(f"{where}: data_offsets {offsets} run backwards")
        return end - begin, end
    element = SAFETENSORS_DTYPE_BYTES.get(str(entry.get("dtype")))
    shape = entry.get("shape")
    if element is None or not isinstance(shape, list):
        raise BadInputError(f"{where}: no data_offsets, nor a known dtype and a shape")
    size = element * math.prod(int(x) for x in shape)
    return size, size


def header_length(first_eight: bytes, file_bytes: int, source: str) -> int:
    """The JSON header's length from a safetensors file's first 8 bytes (little-endian u64)."""
    if len(first_eight) < 8:
        raise BadInputError(f"{source}: shorter than a safetensors header's 8-byte length")
    (length,) = struct.unpack("<Q", first_eight)
    if length > min(file_bytes - 8, HEADER_LIMIT_BYTES):
        raise BadInputError(
            f"{source}: the safetensors header claims {length:,} bytes, more than the file's "
            f"{file_bytes - 8:,} after its length"
        )
    return int(length)
