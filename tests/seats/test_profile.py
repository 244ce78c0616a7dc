"""`engine.profile` in the catalogue: what a vLLM seat's model takes per card, validated like
every byte field, each bad value exit 2 naming its file and field (issue 15)."""

from __future__ import annotations

from pathlib import Path

import pytest

from seats.errors import CatalogueError, Exit
from seats.loader import load_catalogue
from seats.units import GiB, MiB

CATALOGUE = """\
hosts:
  fv-ml1: {cards: 4, card_total: 97871 MiB, cuda_context: 1183 MiB}
seats:
  - name: vllm-voices
    host: fv-ml1
    gpus: [0]
    resident: 10740 MiB
    state: running
    engine:
      kind: vllm
      version: "0.11.0"
      gpu_memory_utilization: 0.11
      kv_cache_memory: 2 GiB
      profile:
        weights: 7.55 GiB
        non_kv: 1.32 GiB
        kv_bytes_per_token: 147456
        max_model_len: 40960
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "catalogue.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def edited(old: str, new: str) -> str:
    assert CATALOGUE.count(old) == 1, old
    return CATALOGUE.replace(old, new)


def test_a_profile_loads_with_bytes_as_ints(tmp_path: Path) -> None:
    profile = load_catalogue(write(tmp_path, CATALOGUE)).seat("vllm-voices").engine.profile
    assert profile is not None
    assert profile.weights_bytes == int(7.55 * GiB)  # 8,106,750,771.2: a decimal rounds down
    assert profile.weights_bytes == 8_106_750_771
    assert profile.non_kv_bytes == 1_417_339_207
    assert profile.kv_bytes_per_token == 147_456
    assert profile.max_model_len == 40_960


def test_cuda_graphs_are_0_unless_given_and_left_out_of_dumps_at_0(tmp_path: Path) -> None:
    seat = load_catalogue(write(tmp_path, CATALOGUE)).seat("vllm-voices")
    assert seat.engine.profile is not None and seat.engine.profile.cuda_graphs_bytes == 0
    assert "cuda_graphs" not in seat.model_dump(by_alias=True)["engine"]["profile"]
    text = edited("non_kv: 1.32 GiB", "non_kv: 1.32 GiB\n        cuda_graphs: 4.06 GiB")
    seat = load_catalogue(write(tmp_path, text)).seat("vllm-voices")
    assert seat.engine.profile is not None
    assert seat.engine.profile.cuda_graphs_bytes == int(4.06 * GiB) == 4_359_391_805
    assert seat.model_dump(by_alias=True)["engine"]["profile"]["cuda_graphs"] == 4_359_391_805


def test_no_profile_by_default(tmp_path: Path) -> None:
    text = CATALOGUE.split("      profile:")[0]
    assert load_catalogue(write(tmp_path, text)).seat("vllm-voices").engine.profile is None


@pytest.mark.parametrize(
    ("old", "new", "loc", "message"),
    [
        ("kv_bytes_per_token: 147456", "kv_bytes_per_token: 0", "kv_bytes_per_token", "at least 1"),
        ("max_model_len: 40960", "max_model_len: 0", "max_model_len", "at least 1"),
        ("max_model_len: 40960", "max_model_len: 4096.5", "max_model_len", "whole number"),
        ("kv_bytes_per_token: 147456", "kv_bytes_per_token: '144 KiB'", "kv_bytes_per_token",
         "whole number"),
        ("weights: 7.55 GiB", "weights: 7.55 GB", "weights", "ambiguous unit"),
        ("non_kv: 1.32 GiB", "non_kv: -1 GiB", "non_kv", "negative"),
        ("non_kv: 1.32 GiB", "non_kv: 0.4", "non_kv", "looks like a fraction"),
        ("non_kv: 1.32 GiB", "non_kv: 1.32 GiB\n        cuda_graphs: -1 GiB", "cuda_graphs",
         "negative"),
        ("non_kv: 1.32 GiB", "non_kv: 1.32 GiB\n        cuda_graphs: 4 GB", "cuda_graphs",
         "ambiguous unit"),
        ("max_model_len: 40960", "max_model_len: 40960\n        tokens: 3", "tokens", "unknown key"),
    ],
)  # fmt: skip
def test_bad_values_name_the_field(
    tmp_path: Path, old: str, new: str, loc: str, message: str
) -> None:
    path = write(tmp_path, edited(old, new))
    with pytest.raises(CatalogueError, match=message) as caught:
        load_catalogue(path)
    assert caught.value.exit_code == Exit.BAD_INPUT
    assert caught.value.loc == f"seats[0].engine.profile.{loc}"
    assert str(path) in str(caught.value)


def test_a_missing_figure_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, edited("        non_kv: 1.32 GiB\n", ""))
    with pytest.raises(CatalogueError, match="required") as caught:
        load_catalogue(path)
    assert caught.value.loc == "seats[0].engine.profile.non_kv"


@pytest.mark.parametrize(
    ("old", "new", "loc", "amount"),
    [
        ("weights: 7.55 GiB", "weights: 97872 MiB", "weights", "95.58 GiB"),
        ("non_kv: 1.32 GiB", "non_kv: 100 GiB", "non_kv", "100.00 GiB"),
        ("non_kv: 1.32 GiB", "non_kv: 90 GiB", "non_kv", "weights \\+ non_kv = 97.55 GiB"),
        (
            "non_kv: 1.32 GiB",
            "non_kv: 1.32 GiB\n        cuda_graphs: 97872 MiB",
            "cuda_graphs",
            "cuda_graphs 95.58 GiB",
        ),
    ],
)
def test_weights_or_non_kv_over_the_card(
    tmp_path: Path, old: str, new: str, loc: str, amount: str
) -> None:
    path = write(tmp_path, edited(old, new))
    with pytest.raises(CatalogueError, match=f"{amount}.*more than the card's 95.58 GiB") as caught:
        load_catalogue(path)
    assert caught.value.loc == f"seats[0].engine.profile.{loc}"


def test_over_the_card_waits_for_a_snapshot_when_the_total_is_not_given(tmp_path: Path) -> None:
    text = edited("card_total: 97871 MiB, ", "").replace("weights: 7.55 GiB", "weights: 200 GiB")
    profile = load_catalogue(write(tmp_path, text)).seat("vllm-voices").engine.profile
    assert profile is not None and profile.weights_bytes == 200 * GiB


def test_weights_exactly_the_card_is_not_over_it(tmp_path: Path) -> None:
    text = edited("weights: 7.55 GiB", "weights: 97000 MiB").replace(
        "non_kv: 1.32 GiB", "non_kv: 871 MiB"
    )
    profile = load_catalogue(write(tmp_path, text)).seat("vllm-voices").engine.profile
    assert profile is not None and profile.weights_bytes + profile.non_kv_bytes == 97871 * MiB


def test_a_profile_on_an_engine_without_a_kv_cache_is_refused(tmp_path: Path) -> None:
    text = edited("kind: vllm", "kind: other").replace("      gpu_memory_utilization: 0.11\n", "")
    path = write(tmp_path, text.replace("      kv_cache_memory: 2 GiB\n", ""))
    with pytest.raises(CatalogueError, match="engines with a KV cache") as caught:
        load_catalogue(path)
    assert caught.value.loc == "seats[0].engine"


def test_a_profile_serves_every_engine_with_a_kv_cache(tmp_path: Path) -> None:
    text = edited("kind: vllm", "kind: sglang").replace("      gpu_memory_utilization: 0.11\n", "")
    path = write(tmp_path, text.replace("      kv_cache_memory: 2 GiB\n", ""))
    profile = load_catalogue(path).seat("vllm-voices").engine.profile
    assert profile is not None and profile.kv_bytes_per_token == 147_456


def test_a_field_of_another_engine_is_refused_by_name(tmp_path: Path) -> None:
    path = write(tmp_path, edited("kind: vllm", "kind: tgi"))
    with pytest.raises(
        CatalogueError,
        match=r"engine\.gpu_memory_utilization is a field of kind vllm, not of kind tgi",
    ) as caught:
        load_catalogue(path)
    assert caught.value.loc == "seats[0].engine"


def test_the_schema_describes_the_profile() -> None:
    import contextlib
    import io
    import json

    from placement.cli.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["schema"]) == 0
    schema = json.loads(out.getvalue())
    engine = schema["$defs"]["Engine"]["properties"]["profile"]
    assert {"$ref": "#/$defs/Profile"} in engine["anyOf"]
    profile = schema["$defs"]["Profile"]
    assert profile["additionalProperties"] is False
    assert sorted(profile["required"]) == [
        "kv_bytes_per_token",
        "max_model_len",
        "non_kv",
        "weights",
    ]
    assert profile["properties"]["kv_bytes_per_token"]["minimum"] == 1
    assert profile["properties"]["max_model_len"]["minimum"] == 1
    assert profile["properties"]["cuda_graphs"]["default"] == 0
    assert "outside its request" in profile["properties"]["cuda_graphs"]["description"]
    assert {
        "type": "string",
        "pattern": profile["properties"]["weights"]["anyOf"][1]["pattern"],
    } in (profile["properties"]["weights"]["anyOf"])
