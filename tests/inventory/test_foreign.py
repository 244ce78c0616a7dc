"""Another GPU tool's output given as a snapshot: named, with how to take a gpuplan snapshot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inventory.poller import FAKE_ENV, open_source
from inventory.snapshot import SnapshotError, load_snapshot

DATA = Path(__file__).parent / "data" / "foreign"


@pytest.mark.parametrize(
    ("name", "tool"),
    [("nvidia-smi.txt", "nvidia-smi's table"), ("nvidia-smi-q.txt", "nvidia-smi -q's report")],
)
def test_real_nvidia_smi_outputs_are_named(name: str, tool: str) -> None:
    with pytest.raises(SnapshotError) as caught:
        load_snapshot(DATA / name)
    text = str(caught.value)
    assert text.startswith(f"{DATA / name}: this is {tool}, not a gpuplan snapshot")
    assert "gpuplan snapshot --out FILE" in text


@pytest.mark.parametrize(
    ("text", "tool"),
    [
        # Shapes written here from each tool's documented format (no public sample file kept).
        ('<?xml version="1.0" ?>\n<nvidia_smi_log>\n<driver_version>535</driver_version>', "XML"),
        ("index, memory.total [MiB], memory.used [MiB]\n0, 23028 MiB, 1 MiB\n", "CSV"),
        (json.dumps({"hostname": "h", "gpus": [{"index": 0, "memory.used": 1, "memory.total": 2}]}), "gpustat"),
    ],
)  # fmt: skip
def test_other_shapes_are_named(tmp_path: Path, text: str, tool: str) -> None:
    path = tmp_path / "s.json"
    path.write_text(text)
    with pytest.raises(SnapshotError, match=tool):
        load_snapshot(path)


def test_plain_bad_json_is_still_said_plainly(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text("{not json")
    with pytest.raises(SnapshotError, match="not valid JSON"):
        load_snapshot(path)


def test_the_replay_variable_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(FAKE_ENV, str(tmp_path / "missing.json"))
    expected = f"^{FAKE_ENV}=.*missing.json: no such file"
    with pytest.raises(SnapshotError, match=expected), open_source():
        pass
