"""`ledger --window` over a synthetic ledger: per card room now, the least room and when, the hours
with less room than now (and who held more then), and days to full by the trend."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from placement.cli import main as cli
from tests.placement.week.builders import (
    CUDA_TOTAL,
    GIB,
    MIB,
    START,
    Proc,
    between,
    moments,
    write_week,
)

MARGIN = 256 * MIB
CATALOGUE = """
hosts:
  fv-ml1: {cards: 2, card_total: 97871 MiB, cuda_context: 1183 MiB, margin: 256 MiB}
seats: []
"""
OLLAMA = Proc(5301, 20 * GIB, "/usr/bin/ollama serve")


def growing(at: datetime) -> list[Proc]:
    """A PyTorch server whose cache grows 2 GiB a day: 60 GiB on day 0, 72 GiB on day 6."""
    day = (at - START).days
    return [Proc(6101, (60 + 2 * day) * GIB, "python3 /srv/asr/server.py --port 9001")]


@pytest.fixture(scope="module")
def week(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("ledger-window")
    catalogue = folder / "catalogue.yaml"
    catalogue.write_text(CATALOGUE)

    def card1(at: datetime) -> list[Proc]:
        return [OLLAMA] if between(at, 14, 15) else []

    ledger = write_week(folder / "ledger.sqlite", moments("fv-ml1", [growing, card1]))
    return catalogue, ledger


def ledger(
    capsys: pytest.CaptureFixture[str], week: tuple[Path, Path], *argv: str
) -> tuple[int, str]:
    catalogue, db = week
    code = cli.main(
        ["ledger", "--catalogue", str(catalogue), "--ledger", str(db), "--max-age", "1000d", *argv]
    )
    return code, capsys.readouterr().out


@pytest.mark.slow
def test_ledger_window_json_per_card(
    capsys: pytest.CaptureFixture[str], week: tuple[Path, Path]
) -> None:
    code, out = ledger(capsys, week, "--window", "7d", "--json")
    assert code == 0
    (host,) = json.loads(out)["hosts"]
    window = host["window"]
    assert (window["start"], window["end"]) == ("2026-09-13T23:50:00Z", "2026-09-20T23:50:00Z")
    assert (window["moments"], window["coverage"], window["gaps"]) == (1008, 1.0, [])
    card0, card1 = window["cards"]

    # Card 0 grows 2 GiB a day: its least room is now's, first reached at day 6's first moment,
    # and the least squares of its 7 daily minima run out in (room now) / (2 GiB a day) days.
    room0 = CUDA_TOTAL - 72 * GIB - MARGIN
    assert (card0["card"], card0["room_now_bytes"], card0["window_room_bytes"]) == (0, room0, room0)
    assert card0["min_room_at"] == "2026-09-20T00:00:00Z"
    assert card0["short_moments"] == 0
    forecast = card0["forecast"]
    assert (forecast["buckets"], forecast["slope_bytes_per_day"]) == (7, -2 * GIB)
    assert (forecast["intercept_bytes"], forecast["r2"], forecast["confidence"]) == (
        room0,
        1.0,
        "high",
    )
    assert forecast["days_to_full"] == round(room0 / (2 * GIB), 2) == 11.36

    # Card 1 is empty now; each afternoon Ollama holds 20 GiB: 12 moments a day, 84 in all.
    room1 = CUDA_TOTAL - MARGIN
    assert (card1["room_now_bytes"], card1["window_room_bytes"]) == (room1, room1 - 20 * GIB)
    assert card1["min_room_at"] == "2026-09-14T14:00:00Z"
    assert card1["short_moments"] == 84
    assert card1["short_by_hour"] == [0] * 14 + [42, 42] + [0] * 8
    (squeezer,) = card1["squeezed_by"]
    assert (squeezer["name"], squeezer["engine"]) == ("/usr/bin/ollama serve", "ollama")
    assert (squeezer["then_bytes"], squeezer["now_bytes"], squeezer["days"]) == (20 * GIB, 0, 7)
    assert card1["forecast"]["days_to_full"] is None  # the same least room every day


def test_ledger_window_text(capsys: pytest.CaptureFixture[str], week: tuple[Path, Path]) -> None:
    code, out = ledger(capsys, week, "--window", "7d", "--percentile", "95")
    assert code == 0
    block = out[out.index("fv-ml1 · window") :].splitlines()
    assert block[0] == (
        "fv-ml1 · window 2026-09-13T23:50Z → 2026-09-20T23:50Z (7d) · 1,008 moments · "
        "seen 100.0% · p95"
    )
    assert block[1].split() == [
        "card", "room", "now", "window", "room", "room", "at", "p95", "least", "at",
        "less", "room", "than", "now", "days", "to", "full",
    ]  # fmt: skip
    # At p95, 50 of 1,008 moments may be left out: card 1's 84 afternoon moments may not.
    assert block[2].split() == [
        "0", "22.72", "GiB", "22.72", "GiB", "22.72", "GiB", "2026-09-20T00:00Z", "-",
        "11.4", "(high)",
    ]  # fmt: skip
    assert block[3].split()[:8] == [
        "1", "94.72", "GiB", "74.72", "GiB", "74.72", "GiB", "2026-09-14T14:00Z",
    ]  # fmt: skip
    assert "14:00–15:59 UTC (84 moments)" in block[3]
    assert block[4] == (
        "  card 1 at its least: /usr/bin/ollama serve (+20.00 GiB, 14:00–15:59 UTC on 7 of 7 "
        "days: Ollama would put part of its model on the CPU)"
    )


def test_ledger_window_needs_the_ledger(
    capsys: pytest.CaptureFixture[str], week: tuple[Path, Path], tmp_path: Path
) -> None:
    catalogue, _ = week
    snapshot = tmp_path / "s.json"
    snapshot.write_text("{}")
    code = cli.main(
        ["ledger", "--catalogue", str(catalogue), "--snapshot", str(snapshot), "--window", "7d"]
    )
    assert code == 2
    assert "--window needs --ledger or --prometheus" in capsys.readouterr().err
    code = cli.main(["ledger", "--catalogue", str(catalogue), "--horizon", "14d"])
    assert code == 2
    assert "--horizon need --window D" in capsys.readouterr().err
