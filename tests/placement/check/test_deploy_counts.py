"""A replica count that cannot fit is refused at once, never expanded (issue 32, DESIGN.md "Never
yes by accident"): `deploy.replicas: 1000000` ran past 120 s and 1.4 GB before it was killed.

End to end through `gpuplan check --compose` on the seed's before-voices snapshot of fv-ml1,
where card 1 has 102,625,181,696 B in all and a vLLM service at util 0.03 needs 4,299,654,431 B
alone: 23 replicas fit in the card's total, 24 cannot, whatever else is on it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from placement.cli import check as check_command
from placement.cli import main as cli
from seats.units import format_bytes as b

ROOT = Path(__file__).resolve().parents[3]
CATALOGUE = "seats/catalogue/fv-ml1.yaml"
BEFORE = "seats/catalogue/fv-ml1-before-voices.snapshot.json"
TAKEN = datetime(2026, 9, 16, 11, 40, 5, tzinfo=UTC)
CARD1_TOTAL = 102_625_181_696
NEED = 4_299_654_431


@pytest.fixture(autouse=True)
def _fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("GPUPLAN_CATALOGUE", raising=False)
    monkeypatch.setattr(check_command, "utc_now", lambda: TAKEN + timedelta(minutes=5))


def service(name: str, count: str, util: str = "0.03") -> str:
    return (
        f"  {name}:\n    image: vllm/vllm-openai:v0.11.0\n"
        f"    command: [--model, m, --gpu-memory-utilization, '{util}']\n"
        f"    deploy: {{{count}resources: {{reservations: {{devices: [{{driver: nvidia, "
        "device_ids: ['1'], capabilities: [gpu]}]}}}\n"
    )


def check(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, *extra: str
) -> tuple[int, str, str]:
    path = tmp_path / "compose.yaml"
    path.write_text(text, encoding="utf-8")
    code = cli.main(
        ["check", "--compose", str(path), "--catalogue", CATALOGUE, "--snapshot", BEFORE, *extra]
    )
    out, err = capsys.readouterr()
    return code, out, err


def as_json(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str) -> tuple[int, Any]:
    code, out, _ = check(capsys, tmp_path, text, "--json")
    return code, json.loads(out)


def test_the_snapshot_and_need_are_what_the_bound_is_told_with(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    snapshot = json.loads((ROOT / BEFORE).read_text(encoding="utf-8"))
    assert snapshot["cards"][1]["total_bytes"] == CARD1_TOTAL
    code, data = as_json(capsys, tmp_path, "services:\n" + service("chat", ""))
    assert code == 0 and data["verdicts"][0]["card_figures"][0]["need_bytes"] == NEED
    assert CARD1_TOTAL // NEED == 23


@pytest.mark.parametrize("count", ["replicas: 1000000, ", "replicas: 24, "])
def test_replicas_beyond_the_cards_total_are_refused_at_once(
    count: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    n = int(count.split(":")[1].strip(" ,"))
    text = "services:\n" + service("chat", count) + service("other", "", "0.01")
    code, data = as_json(capsys, tmp_path, text)
    assert code == 1 and data["verdict"] == "refuse"
    chat, other = data["verdicts"]
    assert (chat["service"], chat["verdict"], chat["replicas"]) == ("chat", "refuse", n)
    assert "replica" not in chat
    assert chat["reasons"] == [
        {
            "rule": "room",
            "host": "fv-ml1",
            "card": 1,
            "need_bytes": n * NEED,
            "room_bytes": CARD1_TOTAL,
            "short_bytes": n * NEED - CARD1_TOTAL,
            "text": chat["reasons"][0]["text"],
            "said": "replicas",
            "replicas": n,
            "each_bytes": NEED,
        }
    ]
    assert chat["reasons"][0]["text"].startswith(f"{n} replicas need {n} × 4.00 GiB = ")
    assert chat["reasons"][0]["text"].endswith(
        f"more than the card's 95.58 GiB in all, short {b(n * NEED - CARD1_TOTAL)}: refused at "
        "once, no replica judged"
    )
    # The other service is judged on its own merits, without the replicas that cannot start.
    assert other["service"] == "other" and other["verdict"] == "pass"
    code, out, _ = check(capsys, tmp_path, text)
    assert code == 1
    assert f"  chat ×{n}  REFUSED  fv-ml1:1" in out


def test_scale_is_bounded_the_same_way(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = "services:\n" + service("chat", "").replace(
        "    deploy:", "    scale: 1000000\n    deploy:"
    )
    code, data = as_json(capsys, tmp_path, text)
    assert code == 1 and [v["replicas"] for v in data["verdicts"]] == [1_000_000]


def test_replicas_within_the_total_are_each_judged(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """23 fit in the card's total: each is a seat judged beside the 22 others (and refused for
    room on card 1's 5.32 GiB), none refused by the count alone."""
    code, data = as_json(capsys, tmp_path, "services:\n" + service("chat", "replicas: 23, "))
    assert code == 1
    assert [v["replica"] for v in data["verdicts"]] == list(range(23))
    assert all("replicas" not in v for v in data["verdicts"])
    assert {r["rule"] for v in data["verdicts"] for r in v["reasons"]} == {"room", "gate"}


def test_an_unbounded_service_is_refused_at_once_for_any_count_above_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """vLLM with no version and no util grows into what is free: it has no need to multiply,
    and two of it on one card leave each other no room (rule `unbounded`), so a million of it
    are refused as soon as one is judged."""
    text = "services:\n" + service("chat", "replicas: 1000000, ").replace(
        "v0.11.0", "latest"
    ).replace(", --gpu-memory-utilization, '0.03'", "")
    code, data = as_json(capsys, tmp_path, text)
    assert code == 1
    (chat,) = data["verdicts"]
    assert (chat["verdict"], chat["replicas"], chat["unbounded"]) == ("refuse", 1_000_000, True)
    assert [(r["rule"], r["card"]) for r in chat["reasons"]] == [("unbounded", 1)]
    assert chat["reasons"][0]["text"].startswith(
        "chat#1 beside it on card 1 is unbounded (vLLM of no known version (an image tag like "
        "`latest`)"
    )
