"""`check --compose` of services of every engine as docker starts them: the version their image
tag names, and the verdict of a service that no catalogue seat describes (DESIGN.md, Engines and
Whole deploys)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from placement.check.compose import load_compose
from placement.cli import main as cli
from placement.fit.engines.registry import spec_of
from tests.placement.check.test_mixed_engines import CHAT_OLLAMA, SNAPSHOT, STACK, catalogue_with


def check_json(
    catalogue: Path, compose: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, dict[str, Any]]:
    argv = ["check", "--compose", str(compose), "--catalogue", str(catalogue)]
    code = cli.main([*argv, "--snapshot", str(SNAPSHOT), "--json"])
    return code, json.loads(capsys.readouterr().out)


def seat(name: str, engine: dict[str, str]) -> dict[str, Any]:
    """A 3 GiB catalogue seat of fv-ml1 with this engine block."""
    return {"name": name, "host": "fv-ml1", "resident": "3 GiB", "engine": engine}


def test_each_service_carries_the_version_its_image_tag_names() -> None:
    services = {s.name: s for s in load_compose(STACK, {}).services}
    assert {name: s.version for name, s in services.items()} == {
        "chat-vllm": "0.11.0",
        "chat-sglang": "0.5.8",  # lmsysorg/sglang:v0.5.8-cu129
        "chat-ollama": "0.12.6",  # ollama/ollama:0.12.6
    }


def test_the_image_version_lands_in_the_verdict_and_a_disagreeing_catalogue_is_warned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sglang = seat("chat-sglang", {"kind": "sglang", "version": "0.5.7"})
    # The catalogue's chat-ollama names no version: the image's is taken, with no warning.
    ollama = {**CHAT_OLLAMA, "engine": {"kind": "ollama"}}
    catalogue = catalogue_with(tmp_path, monkeypatch, ollama, sglang)
    _, found = check_json(catalogue, STACK, capsys)
    verdicts = {v["service"]: v for v in found["verdicts"]}
    assert verdicts["chat-sglang"]["engine"]["version"] == "0.5.8"
    assert verdicts["chat-ollama"]["engine"]["version"] == "0.12.6"
    said = [w for w in found["warnings"] if w.startswith("compose image ")]
    assert said == [
        "compose image lmsysorg/sglang:v0.5.8-cu129 is SGLang 0.5.8; the catalogue says 0.5.7 "
        "for chat-sglang (judged as 0.5.8)"
    ]


def test_a_vllm_service_is_built_by_its_engine_from_its_flags() -> None:
    # --gpu-memory-utilization 0.05 --kv-cache-memory 1G, read by vllm_flags.read_sizes.
    vllm = next(s for s in load_compose(STACK, {}).services if s.name == "chat-vllm")
    assert vllm.engine_fields == (("gpu_memory_utilization", 0.05), ("kv_cache_memory", 2**30))
    spec = spec_of("vllm", dict(vllm.engine_fields), version=vllm.version)
    assert (spec.kind, spec.version, spec.kv_cache_bytes) == ("vllm", "0.11.0", 2**30)
    assert repr(spec.gpu_memory_utilization) == "0.05"


# --- no catalogue seat, yet decidable --------------------------------------------------------

ENGINES_DATA = Path(__file__).resolve().parents[2] / "placement/fit/engines/data"


@pytest.fixture
def fv_ml1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """fv-ml1's catalogue as shipped (no seat for any of the real files' services)."""
    return catalogue_with(tmp_path, monkeypatch)


ALL = [0, 1, 2, 3]  # fv-ml1's cards: `count: all`


@pytest.mark.parametrize(
    ("name", "service", "why", "cards"),
    [
        # --model-path only: no --max-total-tokens, so SGLang's pool is m × what is free.
        ("sglang/compose-sglang-docker.yaml", "sglang", "SGLang with no pin of its bytes", [0]),
        # --model-id only: TGI fills each card down to (1 − 0.9 × 1.0) × total, and with no
        # --num-shard it shards over every card its container sees (`count: all`).
        ("tgi/compose-db-agent.yml", "huggingface-tgi", "TGI with no pin of its bytes", ALL),
        # bash /app/start.sh on the release image: no max_tokens gpuplan can see, no --tp_size.
        (
            "trtllm/compose-agentbusters.yml",
            "trtllm-api",
            "TensorRT-LLM with no pin of its bytes",
            [0],
        ),
        # `--model-id ${MODEL_ID}` on TGI 3.3.4, and `trtllm-serve serve ${MODEL_ID}` on 0.21.0.
        ("tgi/compose-slm-exploration.yml", "llm", "TGI with no pin of its bytes", ALL),
        ("trtllm/compose-slm-exploration.yml", "llm", "TensorRT-LLM with no pin of its bytes", [0]),
    ],
)
def test_a_real_unpinned_share_of_free_service_with_no_seat_is_refused_unbounded(
    fv_ml1: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    service: str,
    why: str,
    cards: list[int],
) -> None:
    monkeypatch.setenv("MODEL_ID", "Qwen/Qwen3-8B")  # the slm-exploration files need it set
    code, found = check_json(fv_ml1, ENGINES_DATA / name, capsys)
    assert code == 1  # refused, not unknown (3): card 0 of fv-ml1 holds four seats
    (verdict,) = [v for v in found["verdicts"] if v["service"] == service]
    assert verdict["verdict"] == "refuse" and verdict["cards"] == cards
    assert verdict["resident_known"] is False and verdict["resident_bytes"] is None
    assert verdict["engine"]["behaviour"] == "share-of-free"
    # Each of its cards holds another seat, or card 3 its reserve: unbounded on every one.
    unbounded = [r for r in verdict["reasons"] if r["rule"] == "unbounded"]
    assert [r["card"] for r in unbounded] == cards
    text = unbounded[0]["text"]
    assert why in text and "cyberprev" in text  # whom it would squeeze, named
    # No resident to size a pin from: the flags to set, by name, and no pin flags printed.
    rule = text.rsplit("pin it (", 1)[1]
    assert rule.startswith(
        ("--mem-fraction-static with", "--cuda-memory-fraction with", "kv_cache")
    )
    assert verdict["flags"] == []


def test_the_deploy_table_shows_no_byte_figure_for_an_unbounded_need(
    fv_ml1: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Its need is no figure (the 1 B it is judged with stands for none): nor is the room it uses.
    path = ENGINES_DATA / "sglang/compose-sglang-docker.yaml"
    argv = [
        "check",
        "--compose",
        str(path),
        "--catalogue",
        str(fv_ml1),
        "--snapshot",
        str(SNAPSHOT),
    ]
    code = cli.main(argv)
    row = next(x for x in capsys.readouterr().out.splitlines() if x.lstrip().startswith("sglang "))
    assert code == 1
    assert row.split()[3:5] == ["unbounded", "unbounded/1.58"]
    assert "1 B" not in row


def test_the_image_version_of_a_seatless_service_is_in_its_verdict(
    fv_ml1: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, found = check_json(fv_ml1, ENGINES_DATA / "trtllm/compose-agentbusters.yml", capsys)
    assert found["verdicts"][0]["engine"]["version"] == "1.3.0rc1"


def test_the_mixed_stack_without_seats_refuses_sglang_and_its_neighbour_and_ollama_stays_unknown(
    fv_ml1: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The stack as it is, less the `x-gpuplan-seat` ties to seats this catalogue does not have.
    stack = yaml.safe_load(STACK.read_text(encoding="utf-8"))
    for body in stack["services"].values():
        body.pop("x-gpuplan-seat", None)
    unseated = tmp_path / "mixed-stack.yaml"
    unseated.write_text(yaml.safe_dump(stack), encoding="utf-8")
    code, found = check_json(fv_ml1, unseated, capsys)
    verdicts = {v["service"]: v for v in found["verdicts"]}
    # chat-sglang: --mem-fraction-static 0.3 and no --max-total-tokens, on card 1 beside the others.
    assert verdicts["chat-sglang"]["verdict"] == "refuse"
    assert verdicts["chat-sglang"]["unbounded"] is True
    # chat-vllm starts beside it: refused with it, as beside an unbounded vLLM.
    beside = [r for r in verdicts["chat-vllm"]["reasons"] if r["rule"] == "unbounded"]
    assert [r["text"].split(" beside it")[0] for r in beside] == ["chat-sglang"]
    # Ollama fits itself to free memory: its verdict needs its resident, so it stays unknown
    # with the message it had, and the deploy with it (exit 3 over 1).
    assert verdicts["chat-ollama"]["verdict"] == "unknown"
    assert verdicts["chat-ollama"]["message"].startswith(
        "service chat-ollama runs Ollama but matches no catalogue seat"
    )
    assert code == 3 and found["verdict"] == "unknown"


def test_a_seatless_share_of_free_service_alone_on_an_empty_card_stays_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Card 3 of fv-ml1 holds nothing; without its reserve nothing will hold it either. What
    # SGLang takes there is its resident's to say: no catalogue seat, no verdict.
    catalogue = catalogue_with(tmp_path, monkeypatch)
    data = yaml.safe_load(catalogue.read_text(encoding="utf-8"))
    data["reserves"] = []
    catalogue.write_text(yaml.safe_dump(data), encoding="utf-8")
    service = (
        "services:\n"
        "  solo:\n"
        "    image: lmsysorg/sglang:v0.5.8-cu126\n"
        "    command: python3 -m sglang.launch_server --model-path m --mem-fraction-static 0.8\n"
        "    deploy: {{replicas: {n}, resources: {{reservations: {{devices: "
        '[{{driver: nvidia, device_ids: ["3"], capabilities: [gpu]}}]}}}}}}\n'
    )
    compose = tmp_path / "compose.yaml"
    compose.write_text(service.format(n=1), encoding="utf-8")
    code, found = check_json(catalogue, compose, capsys)
    (verdict,) = found["verdicts"]
    assert code == 3 and verdict["verdict"] == "unknown"
    assert verdict["message"].startswith("service solo runs SGLang but matches no catalogue seat")
    assert (verdict["host"], verdict["cards"]) == ("fv-ml1", [3])
    # Two of it on that card squeeze each other: refused, whatever their residents, at once for
    # the count (a thousand of it are not judged one by one either).
    for n in (2, 1000):
        compose.write_text(service.format(n=n), encoding="utf-8")
        code, found = check_json(catalogue, compose, capsys)
        assert code == 1
        (verdict,) = found["verdicts"]
        assert (verdict["verdict"], verdict["replicas"]) == ("refuse", n)
        assert [(r["rule"], r["card"]) for r in verdict["reasons"]] == [("unbounded", 3)]


def test_a_catalogue_seat_of_fewer_cards_than_the_engine_takes_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # db-agent's TGI (`count: all`, no --num-shard) tied to a one-card catalogue seat: TGI would
    # shard over all four cards, so the seat cannot be the one it starts.
    chat_tgi = seat("chat-tgi", {"kind": "tgi"})
    catalogue = catalogue_with(tmp_path, monkeypatch, chat_tgi)
    stack = yaml.safe_load((ENGINES_DATA / "tgi/compose-db-agent.yml").read_text(encoding="utf-8"))
    stack["services"]["huggingface-tgi"]["x-gpuplan-seat"] = "chat-tgi"
    compose = tmp_path / "compose.yaml"
    compose.write_text(yaml.safe_dump(stack), encoding="utf-8")
    code, found = check_json(catalogue, compose, capsys)
    assert code == 2
    (verdict,) = found["verdicts"]
    assert verdict["verdict"] == "error"
    assert verdict["message"].endswith(
        "its TGI takes 4 card(s) here (every card its container sees: 0, 1, 2, 3); the "
        "catalogue's chat-tgi takes 1: give the service that many cards, or its engine that "
        "parallel size"
    )
