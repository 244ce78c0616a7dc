"""Every VERDICT names its engine, every pinned engine's flags are printed by `check` as by `plan`,
and a service whose resident is unknown says its need is a lower bound everywhere it shows it
(DESIGN.md, Engines; issue 31)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from placement.cli import main as cli
from placement.fit.engines.base import EngineCard
from placement.fit.engines.registry import engine
from seats.model import Seat
from seats.units import GiB, MiB
from tests.placement.check.test_mixed_engines import SNAPSHOT, catalogue_with

FV_ML1 = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
CUDA_CONTEXT = 1183 * MiB  # fv-ml1's cuda_context
MARGIN = 256 * MiB


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main([*argv, "--snapshot", str(SNAPSHOT)])
    return code, capsys.readouterr().out


def compose_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "compose.yaml"
    path.write_text(body, encoding="utf-8")
    return path


def without_reserves(catalogue: Path) -> None:
    data = yaml.safe_load(catalogue.read_text(encoding="utf-8"))
    data["reserves"] = []
    catalogue.write_text(yaml.safe_dump(data), encoding="utf-8")


# --- every VERDICT's engine ---------------------------------------------------------------

SOLO_SGLANG = """\
services:
  solo:
    image: lmsysorg/sglang:v0.5.8-cu126
    command: python3 -m sglang.launch_server --model-path m --mem-fraction-static 0.8
    deploy: {resources: {reservations: {devices: [{driver: nvidia, device_ids: ["3"], capabilities: [gpu]}]}}}
"""


def test_an_unknown_sglang_service_names_its_engine_in_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 31: alone on empty card 3 (no reserve), no catalogue seat: `unknown`, and its JSON
    # had no `engine` while its text line said SGLang.
    catalogue = catalogue_with(tmp_path, monkeypatch)
    without_reserves(catalogue)
    compose = compose_file(tmp_path, SOLO_SGLANG)
    code, out = run(["check", "--compose", str(compose), "--catalogue", str(catalogue)], capsys)
    code_json, found = run(
        ["check", "--compose", str(compose), "--catalogue", str(catalogue), "--json"], capsys
    )
    (verdict,) = json.loads(found)["verdicts"]
    assert code == code_json == 3 and verdict["verdict"] == "unknown"
    assert verdict["engine"] == {
        "kind": "sglang",
        "version": "0.5.8",
        "behaviour": "share-of-free",
    }
    assert "runs SGLang but matches no catalogue seat" in out


def test_an_unknown_service_no_engine_recognises_has_a_null_kind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    catalogue = catalogue_with(tmp_path, monkeypatch)
    compose = compose_file(
        tmp_path,
        "services:\n"
        "  tool:\n"
        "    image: example/tool:1.0\n"
        "    command: ./serve --port 9000\n"
        "    deploy: {resources: {reservations: {devices: "
        '[{driver: nvidia, device_ids: ["3"], capabilities: [gpu]}]}}}\n',
    )
    code, found = run(
        ["check", "--compose", str(compose), "--catalogue", str(catalogue), "--json"], capsys
    )
    (verdict,) = json.loads(found)["verdicts"]
    assert code == 3 and verdict["verdict"] == "unknown"
    assert verdict["engine"] == {"kind": None, "version": None, "behaviour": None}


def test_a_service_with_an_invalid_engine_flag_still_names_its_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # An error verdict keeps the engine its command line starts, version from its image tag.
    catalogue = catalogue_with(
        tmp_path,
        monkeypatch,
        {"name": "chat-tgi", "host": "fv-ml1", "resident": "3 GiB", "engine": {"kind": "tgi"}},
    )
    compose = compose_file(
        tmp_path,
        "services:\n"
        "  chat:\n"
        "    image: ghcr.io/huggingface/text-generation-inference:3.3.4\n"
        "    command: --model-id m\n"
        "    x-gpuplan-seat: chat-tgi\n"
        "    deploy: {resources: {reservations: {devices: "
        '[{driver: nvidia, device_ids: ["0", "1"], capabilities: [gpu]}]}}}\n',
    )
    code, found = run(
        ["check", "--compose", str(compose), "--catalogue", str(catalogue), "--json"], capsys
    )
    (verdict,) = json.loads(found)["verdicts"]
    # TGI shards over both cards its container sees; the catalogue's seat takes one.
    assert code == 2 and verdict["verdict"] == "error"
    assert verdict["engine"] == {"kind": "tgi", "version": "3.3.4", "behaviour": "share-of-free"}


# --- pin flags: the seat's own where it declares them ------------------------------------

CARD = EngineCard(cuda_total_bytes=95 * GiB, free_bytes=60 * GiB, cuda_context_bytes=CUDA_CONTEXT)


def declared(kind: str, **fields: object) -> Seat:
    return Seat.model_validate(
        {
            "name": f"{kind}-pinned",
            "host": "fv-ml1",
            "gpus": [0],
            "resident": "30 GiB",
            "engine": {"kind": kind, **fields},
        }
    )


DECLARED_PINS = [
    # SGLang pinned by m and T, no profile: both as declared (issue 31: none were printed).
    (
        declared("sglang", mem_fraction_static=0.3, max_total_tokens=65_536),
        ("--mem-fraction-static", "0.3", "--max-total-tokens", "65536"),
    ),
    # T alone pins the pool; with no profile m cannot be sized, so T alone is printed.
    (declared("sglang", max_total_tokens=65_536), ("--max-total-tokens", "65536")),
    # TGI: its declared fraction, and its declared request cap.
    (
        declared("tgi", cuda_memory_fraction=0.3, max_total_tokens=32_768),
        ("--cuda-memory-fraction", "0.3", "--max-total-tokens", "32768"),
    ),
    # TensorRT-LLM: its declared max_tokens with its declared fraction.
    (
        declared("trtllm", free_gpu_memory_fraction=0.2, max_tokens=65_536),
        ("--kv_cache_free_gpu_memory_fraction", "0.2", "kv_cache_config.max_tokens=65536"),
    ),
    # llama.cpp and Ollama: a declared context is the one printed.
    (
        declared("llamacpp", n_gpu_layers=40, ctx_size=4096),
        ("-ngl", "40", "-c", "4096", "--fit", "off"),
    ),
]


@pytest.mark.parametrize("case", DECLARED_PINS, ids=lambda case: case[0].engine.kind)
def test_a_declared_pin_is_printed_as_declared(case: tuple[Seat, tuple[str, ...]]) -> None:
    seat, flags = case
    assert engine(seat.engine.kind).pin_flags(seat, CARD) == flags


def test_a_declared_pin_wins_over_one_sized_from_the_profile() -> None:
    # With a profile the pool could be sized from the resident (88,840 tokens at 0.457 on this
    # card, test_table's PINS): a seat that declares m and T is judged on them, so they are
    # what `check` must print.
    profile = {"weights": "16 GiB", "non_kv": "2 GiB", "kv_bytes_per_token": 131_072}
    seat = declared(
        "sglang",
        mem_fraction_static=0.35,
        max_total_tokens=40_000,
        profile={**profile, "max_model_len": 8192},
    )
    assert engine("sglang").pin_flags(seat, CARD) == (
        "--mem-fraction-static",
        "0.35",
        "--max-total-tokens",
        "40000",
    )


SGLANG_SEAT: dict[str, Any] = {
    "name": "chat-sglang",
    "host": "fv-ml1",
    "gpus": [3],
    "resident": "30 GiB",
    "state": "planned",
    "engine": {
        "kind": "sglang",
        "version": "0.5.8",
        "mem_fraction_static": 0.3,
        "max_total_tokens": 65536,
    },
}


def test_check_prints_a_pinned_sglang_seats_flags_as_plan_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    catalogue = catalogue_with(tmp_path, monkeypatch, SGLANG_SEAT)
    data = yaml.safe_load(catalogue.read_text(encoding="utf-8"))
    data["reserves"] = []
    data["seats"] = [s for s in data["seats"] if s["name"] != "flash-next"]
    catalogue.write_text(yaml.safe_dump(data), encoding="utf-8")
    code, out = run(["check", "chat-sglang", "--gpu", "3", "--catalogue", str(catalogue)], capsys)
    assert code == 0
    assert out.splitlines()[0] == (
        "PASS  chat-sglang → fv-ml1:3 · SGLang 0.5.8 (share-of-free) · resident 30.00 GiB"
    )
    assert "  flags: --mem-fraction-static 0.3 --max-total-tokens 65536" in out.splitlines()
    _, found = run(
        ["check", "chat-sglang", "--gpu", "3", "--catalogue", str(catalogue), "--json"], capsys
    )
    assert json.loads(found)["flags"] == [
        "--mem-fraction-static",
        "0.3",
        "--max-total-tokens",
        "65536",
    ]
    code, out = run(["plan", "--catalogue", str(catalogue)], capsys)
    assert code == 0
    assert (
        "PLACED   chat-sglang → fv-ml1 card 3   --mem-fraction-static 0.3 --max-total-tokens 65536"
        in out.splitlines()
    )


# --- a need that is a lower bound says so -------------------------------------------------

TINY_VLLM = """\
services:
  tiny:
    image: vllm/vllm-openai:v0.11.0
    command: ["--model", "tiny-model", "--port", "8111", "--gpu-memory-utilization", "0.006"]
    deploy: {resources: {reservations: {devices: [{driver: nvidia, device_ids: ["0"], capabilities: [gpu]}]}}}
"""


def test_a_service_of_unknown_resident_says_its_need_is_a_lower_bound_in_every_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 31: the headline said "resident unknown" and the figures "(lower bound)", while the
    # refusal's row printed a plain "need 1.73 GiB" as if it were the seat's whole need.
    catalogue = catalogue_with(tmp_path, monkeypatch)
    compose = compose_file(tmp_path, TINY_VLLM)
    card = FV_ML1["cards"][0]
    cuda_total = card["total_bytes"] - card["reserved_bytes"]
    requested = -(-6 * cuda_total // 1000)  # ceil(0.006 × CUDA total)
    need = requested + CUDA_CONTEXT
    room = card["free_bytes"] - MARGIN
    assert (requested, need, room) == (611_837_805, 1_852_303_213, 1_693_450_240)
    code, found = run(
        ["check", "--compose", str(compose), "--catalogue", str(catalogue), "--json"], capsys
    )
    (verdict,) = json.loads(found)["verdicts"]
    assert code == 1 and verdict["resident_known"] is False
    (reason,) = verdict["reasons"]
    assert (reason["rule"], reason["need_bytes"], reason["room_bytes"], reason["short_bytes"]) == (
        "room",
        need,
        room,
        need - room,
    )
    assert reason["text"] == (
        "need at least 1.73 GiB (its resident is unknown), room 1.58 GiB "
        "(1.83 GiB free − 256.00 MiB margin): short at least 151.49 MiB"
    )
    code, out = run(["check", "--compose", str(compose), "--catalogue", str(catalogue)], capsys)
    lines = out.splitlines()
    assert code == 1
    assert lines[0].endswith("util 0.006 · resident unknown")
    row = next(line for line in lines if line.startswith("  card 0  room"))
    assert row.startswith(
        "  card 0  room        need at least 1.73 GiB (its resident is unknown), room 1.58 GiB "
        "(1.83 GiB free − 256.00 MiB margin): short at least 151.49 MiB"
    )
    assert (
        "  nearest: fv-ml1:1 takes it: need at least 1.73 GiB per card, 3.60 GiB room left after"
        in lines
    )


def test_a_seat_of_known_resident_keeps_its_plain_need(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The same service tied to a 1.73 GiB catalogue seat: its need is a figure, said plainly.
    seat = {
        "name": "tiny",
        "host": "fv-ml1",
        "resident": "1852303213 B",
        "engine": {"kind": "vllm", "version": "0.11.0"},
    }
    catalogue = catalogue_with(tmp_path, monkeypatch, seat)
    compose = compose_file(
        tmp_path, TINY_VLLM.replace("  tiny:\n", "  tiny:\n    x-gpuplan-seat: tiny\n")
    )
    code, out = run(["check", "--compose", str(compose), "--catalogue", str(catalogue)], capsys)
    row = next(line for line in out.splitlines() if line.startswith("  card 0  room"))
    assert code == 1
    assert row.startswith(
        "  card 0  room        need 1.73 GiB, room 1.58 GiB (1.83 GiB free − 256.00 MiB margin): "
        "short 151.49 MiB"
    )
