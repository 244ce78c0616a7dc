"""`gpuplan check` of seats that run other engines than vLLM: each refused by its own rule, its
verdict naming the engine in text and in --json (DESIGN.md, Engines)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from placement.cli import main as cli
from tests.placement.check.test_mixed_engines import CHAT_OLLAMA, SNAPSHOT, catalogue_with


@pytest.fixture
def catalogue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    sglang = {
        "name": "chat-sglang",
        "host": "fv-ml1",
        "resident": "4 GiB",
        "engine": {"kind": "sglang", "version": "0.5.8", "mem_fraction_static": 0.3},
    }
    return catalogue_with(tmp_path, monkeypatch, CHAT_OLLAMA, sglang)


def check(capsys: pytest.CaptureFixture[str], catalogue: Path, *argv: str) -> tuple[int, str]:
    code = cli.main(["check", *argv, "--catalogue", str(catalogue), "--snapshot", str(SNAPSHOT)])
    return code, capsys.readouterr().out


def test_ollama_short_of_room_spills_and_names_its_engine(
    catalogue: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = check(capsys, catalogue, "chat-ollama", "--gpu", "1")
    assert code == 1
    first = out.splitlines()[0]
    assert first.startswith("REFUSED  chat-ollama") and "Ollama 0.12.6 (self-fitting)" in first
    assert "spill" in out and "runs on the CPU" in out
    code, out = check(capsys, catalogue, "chat-ollama", "--gpu", "1", "--json")
    found = json.loads(out)
    assert code == 1
    assert found["engine"] == {"kind": "ollama", "version": "0.12.6", "behaviour": "self-fitting"}
    spill = next(r for r in found["reasons"] if r["rule"] == "spill")
    # It wants its resident less its context on the card; what it finds is less than that.
    assert spill["need_bytes"] == 8 * 2**30 - 1183 * 2**20
    assert 0 < spill["short_bytes"] == spill["need_bytes"] - spill["room_bytes"]


def test_unpinned_sglang_beside_others_is_unbounded_with_its_pin(
    catalogue: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = check(capsys, catalogue, "chat-sglang", "--gpu", "1", "--json")
    found: dict[str, Any] = json.loads(out)
    assert code == 1
    assert found["engine"] == {"kind": "sglang", "version": "0.5.8", "behaviour": "share-of-free"}
    unbounded = [r for r in found["reasons"] if r["rule"] == "unbounded"]
    assert unbounded and "--mem-fraction-static with --max-total-tokens" in unbounded[0]["text"]
