"""`check --compose` of a stack of three engines on one card (vLLM, SGLang, Ollama): each service
recognised by its command or image, its flags read by its engine, and each judged by its own rule
as if it started last (DESIGN.md, Engines)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from placement.check.compose import load_compose
from placement.cli import check as check_command
from placement.cli import main as cli

ROOT = Path(__file__).resolve().parents[3]
SNAPSHOT = ROOT / "seats/catalogue/fv-ml1.snapshot.json"
STACK = ROOT / "tests/placement/check/data/mixed-stack.yaml"


CHAT_OLLAMA: dict[str, Any] = {
    "name": "chat-ollama",
    "host": "fv-ml1",
    "resident": "8 GiB",
    "engine": {"kind": "ollama", "version": "0.12.6"},
}


def catalogue_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *seats: dict[str, Any]) -> Path:
    """fv-ml1's catalogue with `seats` added, written under tmp_path; `check` judges 5 minutes
    after the snapshot was taken, so it is never too old."""
    monkeypatch.delenv("GPUPLAN_CATALOGUE", raising=False)
    taken = json.loads(SNAPSHOT.read_text(encoding="utf-8"))["taken_at"]
    moment = datetime.fromisoformat(taken.replace("Z", "+00:00")) + timedelta(minutes=5)
    monkeypatch.setattr(check_command, "utc_now", lambda: moment)
    data = yaml.safe_load((ROOT / "seats/catalogue/fv-ml1.yaml").read_text(encoding="utf-8"))
    data["seats"] += list(seats)
    path = tmp_path / "fv-ml1.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.fixture
def catalogue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    sglang = {
        "name": "chat-sglang",
        "host": "fv-ml1",
        "resident": "3 GiB",
        "engine": {"kind": "sglang", "version": "0.5.8"},
    }
    return catalogue_with(tmp_path, monkeypatch, CHAT_OLLAMA, sglang)


def test_each_service_is_read_by_its_own_engine() -> None:
    services = {s.name: s for s in load_compose(STACK, {}).services}
    assert services["chat-vllm"].engine == "vllm"
    assert services["chat-sglang"].engine == "sglang"
    assert dict(services["chat-sglang"].engine_fields) == {"mem_fraction_static": 0.3}
    assert services["chat-ollama"].engine == "ollama"  # by its image alone
    assert dict(services["chat-ollama"].engine_fields) == {"gpu_overhead": 256 * 2**20}


def test_the_stack_is_refused_with_each_engines_own_reason(
    catalogue: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["check", "--compose", str(STACK), "--catalogue", str(catalogue)]
    code = cli.main([*argv, "--snapshot", str(SNAPSHOT), "--json"])
    found: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert code == 1
    verdicts = {v["service"]: v for v in found["verdicts"]}
    rules = {name: {r["rule"] for r in v["reasons"]} for name, v in verdicts.items()}
    kinds = {name: v["engine"]["kind"] for name, v in verdicts.items()}
    assert kinds == {"chat-vllm": "vllm", "chat-sglang": "sglang", "chat-ollama": "ollama"}
    # vLLM's own gate; SGLang unpinned beside the others; Ollama short of room spills.
    assert "gate" in rules["chat-vllm"]
    assert "unbounded" in rules["chat-sglang"]
    assert "spill" in rules["chat-ollama"]
    assert verdicts["chat-ollama"]["engine"]["behaviour"] == "self-fitting"
    assert verdicts["chat-sglang"]["engine"]["behaviour"] == "share-of-free"
    assert verdicts["chat-vllm"]["flags"][:2] == ["--gpu-memory-utilization", "0.05"]
    # Each seat meets the others' needs on the card, as if it started last.
    assert all(v["card_figures"][0]["others_bytes"] > 0 for v in verdicts.values())
    code = cli.main([*argv, "--snapshot", str(SNAPSHOT)])
    text = capsys.readouterr().out
    assert code == 1
    assert "SGLang 0.5.8 (share-of-free)" in text and "Ollama 0.12.6 (self-fitting)" in text
