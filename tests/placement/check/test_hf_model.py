"""`gpuplan learn SEAT --config DIR`: real config.json files (each with its SOURCE) counted by hand,
tensor parallel, MLA and sliding windows as vLLM counts them, and safetensors headers read
without the tensors; bad files are exit 2 naming the file and the field."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from placement.check.hf_model import derived_max_model_len, kv_bytes_per_token
from placement.cli import main as cli

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "hf-configs"

CATALOGUE = """\
hosts:
  spark: {cards: 2}
seats:
  - name: chat
    host: spark
    gpus: %s
    resident: 20 GiB
    state: running
    engine: {kind: vllm, version: "0.11.0"}
"""


def catalogue(tmp_path: Path, gpus: str = "[0]") -> str:
    path = tmp_path / "catalogue.yaml"
    path.write_text(CATALOGUE % gpus, encoding="utf-8")
    return str(path)


def learn(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["learn", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def config(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((CONFIGS / name / "config.json").read_text("utf-8"))
    return loaded


def write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int], int]]) -> int:
    """A small real safetensors file: name → (dtype, shape, bytes); returns the tensor bytes."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape, size) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + bytes(offset))
    return offset


def test_every_config_names_its_source() -> None:
    folders = sorted(p for p in CONFIGS.iterdir() if p.is_dir())
    assert len(folders) >= 4
    for folder in folders:
        assert (folder / "SOURCE").read_text("utf-8").startswith("https://github.com/"), folder


# Each figure by hand: 2 (K and V) × layers × KV heads × head dim × 2 bytes (bfloat16).
@pytest.mark.parametrize(
    ("name", "per_token", "length"),
    [
        ("qwen3-4b", 2 * 36 * 8 * 128 * 2, 40_960),  # 147,456: the done-when figure
        ("meta-llama-3-8b", 2 * 32 * 8 * 128 * 2, 8_192),  # GQA: 8 KV heads for 32 query heads
        ("mistral-7b-v0.3", 2 * 32 * 8 * (4096 // 32) * 2, 32_768),  # head dim from hidden size
        ("gemma-2-9b-it", 2 * 42 * 8 * 256 * 2, 8_192),
    ],
)
def test_a_real_config_gives_bytes_per_token_and_max_model_len(
    name: str, per_token: int, length: int
) -> None:
    assert kv_bytes_per_token(config(name), name, 1).value == per_token
    assert derived_max_model_len(config(name), name)[0] == length


def test_qwen3_4b_is_147456_bytes_per_token() -> None:
    assert kv_bytes_per_token(config("qwen3-4b"), "qwen3-4b", 1).value == 147_456


def test_tensor_parallel_divides_the_kv_heads_and_replicates_when_too_few() -> None:
    assert kv_bytes_per_token(config("qwen3-4b"), "q", 2).value == 147_456 // 2
    # 8 KV heads over 16 ranks: vLLM keeps one head on every rank.
    assert kv_bytes_per_token(config("meta-llama-3-8b"), "l", 16).value == 2 * 32 * 1 * 128 * 2


def test_sliding_window_layers_are_counted_in_full_and_said_so() -> None:
    counted = kv_bytes_per_token(config("gemma-2-9b-it"), "g", 1)
    assert counted.value == 344_064
    (note,) = counted.notes
    assert "21 of 42 layers" in note and "upper bound" in note and "172,032 B" in note
    assert not kv_bytes_per_token(config("qwen3-4b"), "q", 1).notes


def test_mla_counts_one_latent_per_layer_on_every_card() -> None:
    # DeepSeek-V2-Lite's published MLA figures (27 layers, kv_lora_rank 512, rope dim 64), bf16.
    lite = {
        "num_hidden_layers": 27,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
        "torch_dtype": "bfloat16",
        "max_position_embeddings": 163840,
        "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096},
    }
    assert kv_bytes_per_token(lite, "lite", 1).value == 27 * (512 + 64) * 2 == 31_104
    assert kv_bytes_per_token(lite, "lite", 2).value == 31_104  # not divided by TP
    assert derived_max_model_len(lite, "lite")[0] == 4096 * 40


def test_learn_config_prints_the_block(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    model = tmp_path / "qwen3-4b"
    model.mkdir()
    (model / "config.json").write_text((CONFIGS / "qwen3-4b" / "config.json").read_text("utf-8"))
    tensor_bytes = write_safetensors(
        model / "model.safetensors", {"a": ("BF16", [4, 8], 64), "b": ("F32", [3], 12)}
    )
    code, out, _ = learn(capsys, "chat", "--config", str(model), "--catalogue", catalogue(tmp_path))
    assert code == 0
    assert "        kv_bytes_per_token: 147456" in out and "        max_model_len: 40960" in out
    assert f"        weights: {tensor_bytes}  #" in out and tensor_bytes == 76
    assert "2 (K and V) × 36 layers × 8 KV heads × head dim 128 × 2 B (bfloat16)" in out
    assert "        non_kv: unknown" in out


def test_learn_config_json_reads_the_shards_an_index_names(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    model = tmp_path / "llama"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(config("meta-llama-3-8b")))
    first = write_safetensors(model / "part-1.safetensors", {"x": ("BF16", [10], 20)})
    second = write_safetensors(model / "part-2.safetensors", {"y": ("I8", [7], 7)})
    write_safetensors(model / "stray.safetensors", {"z": ("F32", [100], 400)})  # not in the index
    index = {"weight_map": {"x": "part-1.safetensors", "y": "part-2.safetensors"}}
    (model / "model.safetensors.index.json").write_text(json.dumps(index))
    path = catalogue(tmp_path, "[0, 1]")
    code, out, _ = learn(capsys, "chat", "--config", str(model), "--catalogue", path, "--json")
    assert code == 0
    data = json.loads(out)
    assert data["sources"]["weights_total_bytes"] == first + second == 27
    assert data["profile"]["weights_bytes"] == 14  # 27 B over 2 cards, rounded up
    assert data["profile"]["kv_bytes_per_token"] == 131_072 // 2


@pytest.mark.parametrize(
    ("drop", "named"),
    [("num_hidden_layers", "num_hidden_layers"), ("torch_dtype", "torch_dtype or dtype")],
)
def test_a_config_missing_a_field_is_exit_2_naming_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, drop: str, named: str
) -> None:
    model = tmp_path / "m"
    model.mkdir()
    broken = {k: v for k, v in config("qwen3-4b").items() if k != drop}
    (model / "config.json").write_text(json.dumps(broken))
    code, _, err = learn(capsys, "chat", "--config", str(model), "--catalogue", catalogue(tmp_path))
    assert code == 2 and str(model / "config.json") in err and named in err


def _folder_with(tmp_path: Path, weights: bytes) -> Path:
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(config("qwen3-4b")))
    (model / "model.safetensors").write_bytes(weights)
    return model


def test_a_header_that_is_not_json_is_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    model = _folder_with(tmp_path, struct.pack("<Q", 5) + b"{oops" + bytes(4))
    code, _, err = learn(capsys, "chat", "--config", str(model), "--catalogue", catalogue(tmp_path))
    assert code == 2 and "model.safetensors" in err and "header is not JSON" in err


def test_a_header_longer_than_the_file_is_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    model = _folder_with(tmp_path, struct.pack("<Q", 1_000_000) + b"{}")
    code, _, err = learn(capsys, "chat", "--config", str(model), "--catalogue", catalogue(tmp_path))
    assert code == 2 and "model.safetensors" in err and "claims 1,000,000 bytes" in err


def test_tensors_claiming_more_bytes_than_the_file_are_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    header = json.dumps({"w": {"dtype": "BF16", "shape": [64], "data_offsets": [0, 128]}}).encode()
    model = _folder_with(tmp_path, struct.pack("<Q", len(header)) + header + bytes(16))
    code, _, err = learn(capsys, "chat", "--config", str(model), "--catalogue", catalogue(tmp_path))
    assert code == 2 and "tensor 'w'" in err and "claims more bytes than the file" in err
