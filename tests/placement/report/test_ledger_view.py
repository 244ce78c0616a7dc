"""`gpuplan ledger` and the view behind it: the fv-ml1 example as docs/facts.md gives it, the JSON
shape of DESIGN.md, absent/foreign/v1/error cards, and every exit code.

GPUPLAN_UPDATE_GOLDEN=1 rewrites the golden file.
"""

from __future__ import annotations

import ctypes.util
import json
import os
from pathlib import Path
from typing import Any

import pytest

from inventory.ledger.store import open_ledger
from inventory.snapshot import Card, Process, Snapshot, save_snapshot
from placement.cli.ledger_text import render_ledger
from placement.cli.main import main
from placement.cli.notes_text import note_texts
from placement.report.ledger_view import build_ledger, ledger_json
from seats.errors import BadInputError
from seats.model import Catalogue
from seats.units import GiB, MiB
from tests.conftest import FV_ML1_CATALOGUE, FV_ML1_SNAPSHOT

GOLDEN = Path(__file__).parent.parent / "golden"
CUDA_TOTAL = (
    101_972_967_424  # 94.97 GiB: 97,871 MiB NVML total − 622 MiB reserve (docs/facts.md §3)
)


def _run(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[int, str, str]:
    monkeypatch.delenv("GPUPLAN_CATALOGUE", raising=False)
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _example_argv(*extra: str) -> list[str]:
    return [
        "ledger",
        "--catalogue",
        str(FV_ML1_CATALOGUE),
        "--snapshot",
        str(FV_ML1_SNAPSHOT),
        *extra,
    ]


def _view_json(catalogue: Catalogue, snapshot: Snapshot) -> dict[str, Any]:
    return ledger_json(build_ledger(catalogue, [snapshot], ["test"]))


def _with_cards(snapshot: Snapshot, cards: list[Card]) -> Snapshot:
    return snapshot.model_copy(update={"cards": tuple(cards)})


# --- the fv-ml1 example ----------------------------------------------------------------------


def test_golden_fv_ml1(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # Relative paths so the header reads the same on every machine.
    monkeypatch.chdir(FV_ML1_CATALOGUE.parent.parent.parent)
    argv = [
        "ledger",
        "--catalogue",
        "seats/catalogue/fv-ml1.yaml",
        "--snapshot",
        "seats/catalogue/fv-ml1.snapshot.json",
    ]
    code, out, err = _run(argv, capsys, monkeypatch)
    assert code == 0
    path = GOLDEN / "ledger_fv-ml1.txt"
    if os.environ.get("GPUPLAN_UPDATE_GOLDEN"):
        path.write_text(out, encoding="utf-8")
    assert out == path.read_text(encoding="utf-8")
    # The example is months old: said on stderr, not in the view.
    assert "old; deciding on it anyway" in err


def test_card_zero_is_nearly_full(fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot) -> None:
    card = _view_json(fv_ml1, fv_ml1_snapshot)["hosts"][0]["cards"][0]
    assert card["free_bytes"] == 1871 * MiB  # "1.8 GB free afterwards" (seed), docs/facts.md §3
    assert card["plannable_bytes"] == (1871 - 256) * MiB  # the 256 MiB margin
    assert card["used_bytes"] + card["reserved_bytes"] == 96_000 * MiB  # "96.0 of 97.9 GB" (v1)
    assert card["declared_bytes"] == (47_100 + 36_900 + 638 + 10_740) * MiB
    assert card["held_bytes"] == 0
    assert card["unexplained_bytes"] == 0
    assert card["seats"] == ["cyberprev", "gen-small", "parakeet-stt", "vllm-voices"]


def test_card_three_is_held_whole_for_flash_next(
    fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot
) -> None:
    card = _view_json(fv_ml1, fv_ml1_snapshot)["hosts"][0]["cards"][3]
    assert card["free_bytes"] == CUDA_TOTAL
    assert card["held_bytes"] == CUDA_TOTAL
    assert card["held_by"] == [{"kind": "reserve", "name": "flash-next-hold", "bytes": CUDA_TOTAL}]
    assert card["plannable_bytes"] == 0
    assert card["declared_bytes"] == 0


def test_seats_carry_the_seeds_bytes(fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot) -> None:
    seats = {s["seat"]: s for s in _view_json(fv_ml1, fv_ml1_snapshot)["hosts"][0]["seats"]}
    expected = {
        "cyberprev": 47_100 * MiB,
        "gen-small": 36_900 * MiB,
        "parakeet-stt": 638 * MiB,
        "vllm-voices": 10_740 * MiB,
    }
    for name, size in expected.items():
        assert seats[name]["declared_bytes"] == size
        assert seats[name]["observed_bytes"] == size
        assert seats[name]["status"] == "present"
        assert seats[name]["cards"] == [0]
    assert seats["flash-next"]["status"] == "planned"
    assert seats["flash-next"]["declared_bytes"] == 93 * GiB
    assert seats["flash-next"]["observed_bytes"] is None


def test_json_is_designs_shape(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, _ = _run(_example_argv("--json"), capsys, monkeypatch)
    assert code == 0
    data = json.loads(out)
    assert data["schema"] == 1
    host = data["hosts"][0]
    assert host.keys() >= {"host", "taken_at", "cards", "seats"}
    assert host["host"] == "fv-ml1" and host["taken_at"] == "2026-09-16T14:02:11Z"
    for card in host["cards"]:
        assert card.keys() >= {
            "index", "uuid", "total_bytes", "reserved_bytes", "declared_bytes", "held_bytes",
            "used_bytes", "attributed_bytes", "unexplained_bytes", "free_bytes",
            "plannable_bytes", "error",
        }  # fmt: skip
        # DESIGN.md: unexplained = used − attributed; plannable = max(0, free − held − margin).
        assert card["unexplained_bytes"] == card["used_bytes"] - card["attributed_bytes"]
        assert card["plannable_bytes"] == max(
            0, card["free_bytes"] - card["held_bytes"] - 256 * MiB
        )
        for key, value in card.items():
            if key.endswith("_bytes"):
                assert isinstance(value, int) and not isinstance(value, bool), key
    for seat in host["seats"]:
        assert seat.keys() >= {"seat", "cards", "declared_bytes", "observed_bytes", "status"}


# --- what the view says about the unusual --------------------------------------------------


def test_a_running_seat_that_is_down_is_absent_and_held(
    fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot
) -> None:
    # vllm-voices is down: its process is gone, its 10,740 MiB are free but keep its place.
    card = fv_ml1_snapshot.card(0)
    gone = card.model_copy(
        update={
            "processes": tuple(p for p in card.processes if p.pid != 4121),
            "used_bytes": (card.used_bytes or 0) - 10_740 * MiB,
            "free_bytes": (card.free_bytes or 0) + 10_740 * MiB,
        }
    )
    snapshot = _with_cards(fv_ml1_snapshot, [gone, *fv_ml1_snapshot.cards[1:]])
    host = _view_json(fv_ml1, snapshot)["hosts"][0]
    row = host["cards"][0]
    assert row["held_bytes"] == 10_740 * MiB
    assert row["held_by"] == [{"kind": "absent", "name": "vllm-voices", "bytes": 10_740 * MiB}]
    assert row["plannable_bytes"] == (1871 - 256) * MiB  # the same as when it ran
    seat = next(s for s in host["seats"] if s["seat"] == "vllm-voices")
    assert (seat["status"], seat["observed_bytes"]) == ("absent", 0)


def test_a_foreign_process_is_unexplained_and_listed(
    fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot
) -> None:
    card = fv_ml1_snapshot.card(1)
    stray = Process(pid=7777, used_bytes=2 * GiB, cmdline="python3 notebook.py")
    busy = card.model_copy(
        update={
            "processes": (*card.processes, stray),
            "used_bytes": (card.used_bytes or 0) + 2 * GiB,
            "free_bytes": (card.free_bytes or 0) - 2 * GiB,
        }
    )
    cards = list(fv_ml1_snapshot.cards)
    cards[1] = busy
    view = build_ledger(fv_ml1, [_with_cards(fv_ml1_snapshot, cards)], ["test"])
    data = ledger_json(view)["hosts"][0]
    assert data["cards"][1]["unexplained_bytes"] == 2 * GiB
    assert data["foreign"] == [
        {
            "card": 1,
            "pid": 7777,
            "used_bytes": 2 * GiB,
            "cmdline": "python3 notebook.py",
            "engine": None,  # no engine starts a notebook
            "parent": None,  # its own line is no bare process title
        }
    ]
    text = render_ledger(view)
    assert "foreign processes (no seat's match" in text
    assert "7777" in text and "python3 notebook.py" in text


def test_a_seat_running_on_another_card_is_elsewhere(
    fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot
) -> None:
    zero, one = fv_ml1_snapshot.card(0), fv_ml1_snapshot.card(1)
    voices = next(p for p in zero.processes if p.pid == 4121)
    cards = list(fv_ml1_snapshot.cards)
    cards[0] = zero.model_copy(
        update={"processes": tuple(p for p in zero.processes if p.pid != 4121)}
    )
    cards[1] = one.model_copy(update={"processes": (*one.processes, voices)})
    host = _view_json(fv_ml1, _with_cards(fv_ml1_snapshot, cards))["hosts"][0]
    seat = next(s for s in host["seats"] if s["seat"] == "vllm-voices")
    assert seat["status"] == "elsewhere"
    assert seat["observed_cards"] == [1]


def test_nvml_v1_says_so(fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot) -> None:
    cards = [
        c.model_copy(update={"reserved_bytes": None, "used_bytes": (c.used_bytes or 0) + 622 * MiB})
        for c in fv_ml1_snapshot.cards
    ]
    view = build_ledger(fv_ml1, [_with_cards(fv_ml1_snapshot, cards)], ["test"])
    row = ledger_json(view)["hosts"][0]["cards"][0]
    assert row["reserved_bytes"] is None and row["nvml_v1"] is True
    assert row["unexplained_bytes"] == 622 * MiB  # v1's used counts the reserve
    assert any("cuda_total taken as NVML total" in w for w in note_texts(view.warnings))
    assert "v1: NVML v1 only" in render_ledger(view)


def test_a_card_in_error_has_no_figures(fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot) -> None:
    cards = list(fv_ml1_snapshot.cards)
    cards[2] = Card(index=2, error="GpuIsLost")
    view = build_ledger(fv_ml1, [_with_cards(fv_ml1_snapshot, cards)], ["test"])
    row = ledger_json(view)["hosts"][0]["cards"][2]
    assert row["error"] == "GpuIsLost"
    assert (row["total_bytes"], row["used_bytes"], row["free_bytes"], row["held_bytes"]) == (
        None,
        None,
        None,
        None,
    )
    assert row["plannable_bytes"] == 0
    assert row["declared_bytes"] == (80_000 + 14_853) * MiB  # still declared there
    assert "error: GpuIsLost" in render_ledger(view)


def test_a_snapshot_that_contradicts_the_catalogue_is_bad_input(
    fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot
) -> None:
    three = _with_cards(fv_ml1_snapshot, list(fv_ml1_snapshot.cards[:3]))
    with pytest.raises(BadInputError, match="has 3 cards in the snapshot"):
        build_ledger(fv_ml1, [three], ["three.json"])


# --- exit codes ------------------------------------------------------------------------------


def test_missing_catalogue_exits_2_saying_so(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = _run(["ledger", "--snapshot", str(FV_ML1_SNAPSHOT)], capsys, monkeypatch)
    assert code == 2
    assert out == ""
    assert err == "error: no catalogue: pass --catalogue FILE or set GPUPLAN_CATALOGUE\n"


def test_catalogue_from_the_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUPLAN_CATALOGUE", str(FV_ML1_CATALOGUE))
    assert main(["ledger", "--snapshot", str(FV_ML1_SNAPSHOT), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["hosts"][0]["host"] == "fv-ml1"


def test_a_catalogue_file_that_does_not_exist_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "nope.yaml"
    argv = ["ledger", "--catalogue", str(missing), "--snapshot", str(FV_ML1_SNAPSHOT)]
    code, _, err = _run(argv, capsys, monkeypatch)
    assert code == 2
    assert err == f"error: {missing}: no such file\n"


def test_a_bad_snapshot_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "bad.json"
    data = json.loads(FV_ML1_SNAPSHOT.read_text())
    data["cards"][1]["free_bytes"] = -1
    bad.write_text(json.dumps(data))
    argv = ["ledger", "--catalogue", str(FV_ML1_CATALOGUE), "--snapshot", str(bad)]
    code, out, err = _run(argv, capsys, monkeypatch)
    assert code == 2
    assert out == ""
    assert err.startswith(f"error: {bad}: cards[1].free_bytes: -1 is negative")


def test_a_snapshot_with_the_wrong_card_count_exits_2(
    tmp_path: Path,
    fv_ml1_snapshot: Snapshot,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = tmp_path / "three.json"
    save_snapshot(_with_cards(fv_ml1_snapshot, list(fv_ml1_snapshot.cards[:3])), path)
    argv = ["ledger", "--catalogue", str(FV_ML1_CATALOGUE), "--snapshot", str(path)]
    code, _, err = _run(argv, capsys, monkeypatch)
    assert code == 2
    assert f"error: {path}: host fv-ml1 has 3 cards in the snapshot" in err


def test_no_source_exits_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = _run(["ledger", "--catalogue", str(FV_ML1_CATALOGUE)], capsys, monkeypatch)
    assert code == 2
    assert "no cards to read" in err


def test_a_missing_ledger_exits_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "nope.sqlite"
    argv = ["ledger", "--catalogue", str(FV_ML1_CATALOGUE), "--ledger", str(missing)]
    code, out, err = _run(argv, capsys, monkeypatch)
    assert code == 3
    assert out == ""
    assert err.startswith("error: ") and str(missing) in err
    assert not missing.exists()  # reading never creates a ledger


def test_from_a_real_ledger(
    tmp_path: Path,
    fv_ml1_snapshot: Snapshot,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = tmp_path / "ledger.sqlite"
    with open_ledger(db) as ledger:
        ledger.store(fv_ml1_snapshot)
    base = ["ledger", "--catalogue", str(FV_ML1_CATALOGUE), "--ledger", str(db)]
    # The example was taken on 2026-09-16: too old for the default --max-age of 15 minutes.
    code, _, err = _run(base, capsys, monkeypatch)
    assert code == 3
    assert "older than --max-age" in err
    code, out, _ = _run([*base, "--max-age", "100000d", "--json"], capsys, monkeypatch)
    assert code == 0
    host = json.loads(out)["hosts"][0]
    assert host["source"] == f"ledger {db}"
    assert host["cards"][3]["plannable_bytes"] == 0


def test_a_host_the_catalogue_does_not_know(fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot) -> None:
    other = fv_ml1_snapshot.model_copy(update={"host": "fv-ml9"})
    view = build_ledger(fv_ml1, [other, fv_ml1_snapshot], ["other.json", "fv-ml1.json"])
    stranger, known = ledger_json(view)["hosts"]
    assert stranger["seats"] == [] and stranger["margin_bytes"] == 0
    assert len(stranger["foreign"]) == 8  # nothing claims its processes
    assert stranger["cards"][0]["unexplained_bytes"] == stranger["cards"][0]["used_bytes"]
    assert known["cards"][3]["plannable_bytes"] == 0
    assert any("host fv-ml9 is not in the catalogue" in w for w in note_texts(view.warnings))
    assert "seats: the catalogue places none on fv-ml9" in render_ledger(view)


def test_live_through_the_nvml_replay(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # $GPUPLAN_FAKE_NVML replays a snapshot through the poller, as NVML would answer now.
    monkeypatch.setenv("GPUPLAN_FAKE_NVML", str(FV_ML1_SNAPSHOT))
    argv = ["ledger", "--catalogue", str(FV_ML1_CATALOGUE), "--live", "--json"]
    code, out, _ = _run(argv, capsys, monkeypatch)
    assert code == 0
    host = json.loads(out)["hosts"][0]
    assert host["source"] == "NVML"
    assert host["cards"][0]["free_bytes"] == 1871 * MiB
    assert host["cards"][3]["plannable_bytes"] == 0
    assert {s["seat"]: s["status"] for s in host["seats"]}["vllm-voices"] == "present"


@pytest.mark.skipif(
    ctypes.util.find_library("nvidia-ml") is not None, reason="this machine has NVML"
)
def test_live_without_nvml_exits_3(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPUPLAN_FAKE_NVML", raising=False)
    argv = ["ledger", "--catalogue", str(FV_ML1_CATALOGUE), "--live"]
    code, out, err = _run(argv, capsys, monkeypatch)
    assert code == 3
    assert out == ""
    assert err.startswith("error: no NVML")
