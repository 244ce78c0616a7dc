"""`gpuplan learn SEAT --config DIR`: a seat's profile from a Hugging Face model folder.

Reads `config.json` and the JSON headers of the `*.safetensors` files (8-byte length, then the
header; never the tensors), and prints the `profile:` block with how each figure was counted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from placement.check.hf_model import (
    KvPerToken,
    derived_max_model_len,
    header_length,
    kv_bytes_per_token,
    safetensors_bytes,
)
from placement.cli.learn_text import profile_block
from placement.cli.notes_text import note_texts
from seats.errors import BadInputError
from seats.model import Seat

MAX_CONFIG_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Weights:
    """The checkpoint's tensor bytes in all, and on each card."""

    total_bytes: int
    per_card_bytes: int
    files: tuple[str, ...]


def read_config(folder: Path) -> dict[str, Any]:
    """config.json as a dict, or exit 2 naming the file."""
    path = folder / "config.json"
    try:
        with path.open("rb") as handle:
            data = json.loads(handle.read(MAX_CONFIG_BYTES))
    except OSError as exc:
        raise BadInputError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadInputError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise BadInputError(f"{path}: not a JSON object")
    return data


def weight_files(folder: Path) -> list[Path]:
    """The checkpoint's files: those model.safetensors.index.json names, else every *.safetensors."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
            names = sorted(set(weight_map.values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise BadInputError(f"{index}: no weight_map of tensor to file ({exc})") from None
        return [folder / name for name in names]
    return sorted(folder.glob("*.safetensors"))


def file_tensor_bytes(path: Path) -> int:
    """One safetensors file's tensor bytes, reading its header only."""
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            length = header_length(handle.read(8), size, str(path))
            header = handle.read(length)
    except OSError as exc:
        raise BadInputError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    return safetensors_bytes(header, size - 8 - length, str(path))


def read_weights(folder: Path, tensor_parallel: int) -> Weights | None:
    """The checkpoint's bytes, split evenly over the ranks; None when the folder has no weights."""
    files = weight_files(folder)
    if not files:
        return None
    total = sum(file_tensor_bytes(path) for path in files)
    return Weights(total, -(-total // tensor_parallel), tuple(path.name for path in files))


def run_config(seat: Seat, folder: Path, *, as_json: bool) -> int:
    """Print the profile a model folder gives (or its JSON); exit 2 on a bad file."""
    config = read_config(folder)
    source = str(folder / "config.json")
    tp = seat.card_count
    per_token = kv_bytes_per_token(config, source, tp)
    length, length_from = derived_max_model_len(config, source)
    weights = read_weights(folder, tp)
    if as_json:
        print(json.dumps(_as_json(seat.name, per_token, length, length_from, weights), indent=2))
    else:
        print(_as_text(seat.name, folder, tp, per_token, (length, length_from), weights))
    return 0


def _as_json(
    seat: str, per_token: KvPerToken, length: int, length_from: str, weights: Weights | None
) -> dict[str, Any]:
    return {
        "schema": 1,
        "seat": seat,
        "profile": {
            "weights_bytes": weights.per_card_bytes if weights else None,
            "non_kv_bytes": None,
            "kv_bytes_per_token": per_token.value,
            "max_model_len": length,
        },
        "sources": {
            "kv_bytes_per_token": per_token.formula,
            "max_model_len": length_from,
            "weights": list(weights.files) if weights else [],
            "weights_total_bytes": weights.total_bytes if weights else None,
        },
        "notes": note_texts(per_token.notes),
    }


def _as_text(
    seat: str,
    folder: Path,
    tp: int,
    per_token: KvPerToken,
    length: tuple[int, str],
    weights: Weights | None,
) -> str:
    """The block to paste, then how each figure was counted."""
    out = profile_block(
        f"{seat}: from {folder} (tensor parallel {tp}, the seat's card count)",
        (
            ("weights", weights.per_card_bytes if weights else None, True),
            ("non_kv", None, True),
            ("kv_bytes_per_token", per_token.value, False),
            ("max_model_len", length[0], False),
        ),
    )
    out += [
        "sources:",
        f"  kv_bytes_per_token: {per_token.formula}",
        f"  max_model_len: config.json {length[1]} (vLLM's default without --max-model-len)",
    ]
    if weights:
        out.append(
            f"  weights: {weights.total_bytes:,} B of tensors in {len(weights.files)} safetensors "
            f"file(s), headers only" + (f", ÷ {tp} cards" if tp > 1 else "")
        )
    else:
        out.append("note: weights unknown: the folder has no *.safetensors files")
    out.append(
        "note: non_kv (activation peak, non-torch memory, CUDA graphs) is not in these files; "
        "`gpuplan learn SEAT --vllm-log` reads it from vLLM's start-up log"
    )
    out.append("note: with --kv-cache-dtype fp8, kv_bytes_per_token is half this figure")
    out.extend(f"note: {note}" for note in note_texts(per_token.notes))
    return "\n".join(out)
