"""`plan --window` over synthetic ledgers (issue 34 item 5): the solver places on each card's window
room, and the replay has the last word (the union by moment of a multi-card seat)."""

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
    Proc,
    between,
    moments,
    write_week,
)

MARGIN = 256 * MIB
HOST = (
    "hosts:\n  fv-ml1: {cards: 2, card_total: 97871 MiB, cuda_context: 1183 MiB, margin: 256 MiB}\n"
)
# Card 0: a speech server holding 74 GiB all week. Card 1: a TTS server holding 78 GiB, and an
# Ollama that loads an 8 GiB model every afternoon, 14:00–15:59 UTC.
ASR = Proc(6101, 74 * GIB, "python3 /srv/asr/server.py --port 9001")
TTS = Proc(6201, 78 * GIB, "python3 /srv/tts/server.py --port 9002")
OLLAMA = Proc(5301, 8 * GIB, "/usr/bin/ollama serve")


@pytest.fixture(scope="module")
def afternoon(tmp_path_factory: pytest.TempPathFactory) -> Path:
    def card1(at: datetime) -> list[Proc]:
        return [TTS, OLLAMA] if between(at, 14, 15) else [TTS]

    folder = tmp_path_factory.mktemp("afternoon")
    return write_week(folder / "ledger.sqlite", moments("fv-ml1", [lambda at: [ASR], card1]))


def plan_both(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, ledger: Path, seats: str, *argv: str
) -> tuple[int, str, str]:
    """`gpuplan plan` on the ledger with `seats`: exit code, stdout, stderr."""
    catalogue = tmp_path / "catalogue.yaml"
    catalogue.write_text(HOST + "seats:\n" + seats)
    source = ["--catalogue", str(catalogue), "--ledger", str(ledger), "--max-age", "1000d"]
    code = cli.main(["plan", *source, *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def plan(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, ledger: Path, seats: str, *argv: str
) -> tuple[int, str]:
    code, out, _ = plan_both(capsys, tmp_path, ledger, seats, *argv)
    return code, out


STT = "  - {name: stt, host: fv-ml1, gpus: 1, resident: 12 GiB}\n"


@pytest.mark.slow
def test_the_window_plan_takes_the_only_card_that_holds_at_every_moment(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, afternoon: Path
) -> None:
    # The newest snapshot (23:50) alone: card 1 is the tighter fit (16.72 GiB of room against
    # 20.72), and the plan takes it.
    code, out = plan(capsys, tmp_path, afternoon, STT, "--json")
    data = json.loads(out)
    (seat,) = data["seats"]
    assert (code, seat["verdict"], seat["cards"]) == (0, "pass", [1])
    assert "window" not in seat

    # Over the week, card 1's room falls to 8.72 GiB each afternoon: only card 0 holds.
    code, out = plan(capsys, tmp_path, afternoon, STT, "--window", "7d", "--json")
    data = json.loads(out)
    (seat,) = data["seats"]
    assert (code, data["verdict"], seat["verdict"], seat["cards"]) == (0, "pass", "pass", [0])
    window = seat["window"]
    assert (window["moments"], window["short_moments"], window["status"]) == (1008, 0, "pass")
    (card,) = window["cards"]
    room0 = CUDA_TOTAL - 74 * GIB - MARGIN
    assert (card["card"], card["room_now_bytes"], card["window_room_bytes"]) == (0, room0, room0)
    assert card["percentile_room_bytes"] == room0
    after = {c["index"]: c["free_after_bytes"] for c in data["cards"]}
    assert after == {0: CUDA_TOTAL - 74 * GIB - 12 * GIB, 1: CUDA_TOTAL - 78 * GIB}

    code, out = plan(capsys, tmp_path, afternoon, STT, "--window", "7d")
    assert code == 0
    assert out.startswith(
        "window 2026-09-13T23:50Z → 2026-09-20T23:50Z (7d) · 1,008 moments · seen 100.0% · p100\n"
    )
    assert "PLACED   stt → fv-ml1 card 0" in out


@pytest.mark.slow
def test_a_seat_only_card_1_may_take_is_refused_by_peak_and_passes_at_its_percentile(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, afternoon: Path
) -> None:
    pinned = "  - {name: stt, host: fv-ml1, gpus: [1], resident: 12 GiB}\n"
    code, out = plan(capsys, tmp_path, afternoon, pinned, "--window", "7d", "--json")
    data = json.loads(out)
    (seat,) = data["seats"]
    assert (code, data["verdict"], seat["verdict"], seat["cards"]) == (1, "refuse", "refuse", [1])
    (peak,) = seat["reasons"]
    worst = CUDA_TOTAL - 78 * GIB - 8 * GIB - MARGIN  # card 1's room at 14:00
    assert (peak["rule"], peak["card"], peak["at"]) == ("peak", 1, "2026-09-14T14:00:00Z")
    assert (peak["need_bytes"], peak["room_bytes"]) == (12 * GIB, worst)
    assert peak["short_bytes"] == 12 * GIB - worst
    # 12 moments an afternoon (two hours of 10-minute moments) on 7 days: 84 of 1,008.
    assert (peak["short_moments"], peak["allowed_short"]) == (84, 0)
    assert peak["pass_percentile"] == "91.66"
    (card,) = seat["window"]["cards"]
    assert (card["window_room_bytes"], card["min_room_at"]) == (worst, "2026-09-14T14:00:00Z")

    code, out = plan(capsys, tmp_path, afternoon, pinned, "--window", "7d")
    assert code == 1
    assert "REFUSED  stt (12.00 GiB): room now, but no placement it may use holds over" in out
    assert "card 1   peak      short 3.28 GiB at 2026-09-14T14:00Z (room 8.72 GiB)" in out

    # At p91.66, 84 of 1,008 moments may be short (⌊8.34 × 1,008 / 100⌋ = 84): it passes.
    code, out = plan(
        capsys, tmp_path, afternoon, pinned, "--window", "7d", "--percentile", "91.66", "--json"
    )
    (seat,) = json.loads(out)["seats"]
    assert (code, seat["verdict"], seat["window"]["allowed_short"]) == (0, "pass", 84)
    # Its 84 afternoon moments left out, the least room is the night's.
    assert seat["window"]["cards"][0]["percentile_room_bytes"] == CUDA_TOTAL - 78 * GIB - MARGIN


# Three cards, 22 GiB each of room now; each is short by 4 GiB for two hours a day: cards 0 and
# 2 at 14:00–14:59, card 1 at 03:00–03:59. At p95 (50 of 1,008 moments may be short) each card
# alone holds a 20 GiB seat (42 short moments), but a seat on cards 0 and 1 is short in both
# hours (84 moments), on cards 0 and 2 in the one (42).
THREE = "hosts:\n  h3: {cards: 3, card_total: 97871 MiB, cuda_context: 1183 MiB, margin: 256 MiB}\n"


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Path:
    def card(pid: int, hour: int, steady_gib: int) -> object:
        steady = Proc(pid, steady_gib * GIB, f"python3 /srv/{pid}/server.py")
        burst = Proc(pid + 1, 4 * GIB, f"python3 /srv/{pid}/batch.py")
        return lambda at: [steady, burst] if at.hour == hour else [steady]

    folder = tmp_path_factory.mktemp("three")
    cards = [card(7000, 14, 72), card(7100, 3, 72), card(7200, 14, 71)]
    return write_week(folder / "ledger.sqlite", moments("h3", cards))  # type: ignore[list-item]


@pytest.mark.slow
def test_a_tensor_parallel_seat_goes_where_its_cards_are_short_at_the_same_hours(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, three: Path
) -> None:
    catalogue = tmp_path / "three.yaml"
    catalogue.write_text(THREE + "seats:\n  - {name: tp, host: h3, gpus: 2, resident: 20 GiB}\n")
    argv = ["plan", "--catalogue", str(catalogue), "--ledger", str(three), "--max-age", "1000d"]

    # The newest snapshot alone: cards 0 and 1 are the tightest pair (22.72 GiB of room each).
    code = cli.main([*argv, "--json"])
    (seat,) = json.loads(capsys.readouterr().out)["seats"]
    assert (code, seat["cards"]) == (0, [0, 1])

    code = cli.main([*argv, "--json", "--window", "7d", "--percentile", "95"])
    (seat,) = json.loads(capsys.readouterr().out)["seats"]
    window = seat["window"]
    assert (code, seat["verdict"], seat["cards"]) == (0, "pass", [0, 2])
    # One hour a day on 7 days: 42 short moments of 1,008, 50 allowed; the union is the same 42.
    assert (window["short_moments"], window["allowed_short"]) == (42, 50)
    assert [c["short_moments"] for c in window["cards"]] == [42, 42]
    assert window["short_by_hour"][14] == 42 and sum(window["short_by_hour"]) == 42

    # At p100 no pair holds: each card is short an hour a day.
    code = cli.main([*argv, "--json", "--window", "7d"])
    (seat,) = json.loads(capsys.readouterr().out)["seats"]
    assert (code, seat["verdict"]) == (1, "refuse")
    assert {r["rule"] for r in seat["reasons"]} == {"peak"}


@pytest.mark.parametrize(
    ("argv", "code", "words"),
    [
        (["--window", "7d", "--min-history", "8d"], 3, "unknown: 7d of history"),
        (["--window", "7d", "--allow-moves"], 2, "--allow-moves with --window"),
        (["--percentile", "99"], 2, "--percentile need --window D"),
    ],
)
def test_plan_window_exits(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    afternoon: Path,
    argv: list[str],
    code: int,
    words: str,
) -> None:
    got, out, err = plan_both(capsys, tmp_path, afternoon, STT, *argv)
    assert got == code
    assert words in out + err


def test_plan_window_needs_a_history(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    catalogue = tmp_path / "catalogue.yaml"
    catalogue.write_text(HOST + "seats:\n" + STT)
    snapshot = tmp_path / "s.json"
    snapshot.write_text("{}")
    code = cli.main(
        ["plan", "--catalogue", str(catalogue), "--snapshot", str(snapshot), "--window", "7d"]
    )
    assert code == 2
    assert "--window needs --ledger or --prometheus" in capsys.readouterr().err
