"""`gpuplan snapshot --from FILE` with JSON Lines: every line stored in order with its rollups, a
bad line refused by number with nothing stored, arrival times only for live readings; and
`gpuplan compact`."""

from __future__ import annotations

import io
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bench import weekfile
from inventory.history.ledger import LedgerHistory
from inventory.history.rollup import hourly
from inventory.ledger.store import open_ledger
from placement.cli.main import main
from tests.conftest import FV_ML1_SNAPSHOT

START = weekfile.START


def week_lines(minutes: int, cards: int = 2) -> list[str]:
    return list(weekfile.lines(minutes, cards))


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_json_lines_are_stored_in_order_with_their_rollups(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "l.sqlite"
    lines = week_lines(150)
    source = write_lines(tmp_path / "week.jsonl", [*lines[:100], "", "  ", *lines[100:]])
    assert main(["snapshot", "--from", str(source), "--ledger", str(db)]) == 0
    out = capsys.readouterr().out
    assert out == (
        f"stored 150 snapshot(s) of bench-h1 (2026-09-14T03:00:00Z → 2026-09-14T05:29:00Z) "
        f"in ledger {db}\n"
    )
    # Again: every line is already there, none is stored twice.
    assert main(["snapshot", "--from", str(source), "--ledger", str(db)]) == 0
    assert "stored 0 snapshot(s)" in capsys.readouterr().out
    with open_ledger(db, readonly=True) as ledger:
        assert ledger.count() == 150
        history = LedgerHistory(ledger.connection)
        moments = list(history.moments("bench-h1", START, START + timedelta(hours=3)))
        rollups = history.rollups("bench-h1", START, START + timedelta(hours=3))
    assert [m.taken_at for m in moments] == [START + timedelta(minutes=m) for m in range(150)]
    assert {m.arrived_at for m in moments} == {None}  # an imported file keeps no arrival time
    assert rollups == hourly(moments)
    assert [c.samples for c in rollups.cards] == [60, 60, 60, 60, 30, 30]
    first = json.loads(lines[0])["cards"][1]
    assert (
        rollups.cards[1].max_used_bytes
        == max(json.loads(line)["cards"][1]["used_bytes"] for line in lines[:60])
        and first["used_bytes"] <= rollups.cards[1].max_used_bytes
    )


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ('{"schema": 1, "host": "bench-h1"', "not valid JSON"),
        ('{"schema": 1, "host": "bench-h1", "cards": []}', "taken_at: required key is missing"),
    ],
    ids=["broken-json", "missing-key"],
)
@pytest.mark.slow
def test_a_bad_line_is_exit_2_naming_it_and_nothing_of_the_file_is_stored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str, says: str
) -> None:
    db = tmp_path / "l.sqlite"
    lines = week_lines(1500)  # more than one transaction's thousand before the bad line
    source = write_lines(tmp_path / "week.jsonl", [*lines[:1400], bad, *lines[1400:]])
    assert main(["snapshot", "--from", str(source), "--ledger", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {source} line 1,401: ") and says in err
    assert len(err.splitlines()) == 1
    assert not db.exists()  # not even created
    # A ledger that held some before holds the same after.
    assert main(["snapshot", "--from", str(FV_ML1_SNAPSHOT), "--ledger", str(db)]) == 0
    assert main(["snapshot", "--from", str(source), "--ledger", str(db)]) == 2
    with open_ledger(db, readonly=True) as ledger:
        assert ledger.count() == 1


def test_a_line_of_another_host_than_host_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write_lines(tmp_path / "w.jsonl", week_lines(3))
    code = main(
        ["snapshot", "--from", str(source), "--host", "other", "--ledger", str(tmp_path / "l")]
    )
    assert code == 2
    assert capsys.readouterr().err == (
        f"error: {source} line 1: host: the snapshot is of 'bench-h1', not --host 'other'\n"
    )


def test_json_lines_on_stdin_with_json_out_and_the_newest_to_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = week_lines(5)
    data = "".join(line + "\n" for line in lines).encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    out, db = tmp_path / "newest.json", tmp_path / "l.sqlite"
    args = ["snapshot", "--from", "-", "--ledger", str(db), "--json", "--out", str(out)]
    assert main(args) == 0
    captured = capsys.readouterr()
    printed = [json.loads(line) for line in captured.out.splitlines()]
    assert [p["taken_at"] for p in printed] == [json.loads(line)["taken_at"] for line in lines]
    assert json.loads(out.read_text())["taken_at"] == "2026-09-14T03:04:00Z"
    assert captured.err.startswith("stored 5 snapshot(s) of bench-h1")
    with open_ledger(db, readonly=True) as ledger:
        moments = list(
            LedgerHistory(ledger.connection).moments("bench-h1", START, START + timedelta(hours=1))
        )
    assert len(moments) == 5 and {m.arrived_at for m in moments} == {None}


def test_one_snapshot_on_stdin_is_live_and_records_its_arrival(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    arrived = datetime(2026, 9, 16, 14, 9, 30, tzinfo=UTC)
    monkeypatch.setattr("placement.cli.sources.utc_now", lambda: arrived)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(FV_ML1_SNAPSHOT.read_bytes())))
    db = tmp_path / "l.sqlite"
    assert main(["snapshot", "--from", "-", "--ledger", str(db)]) == 0
    # The same file by name is an import: stored once already, and a file keeps no arrival.
    assert main(["snapshot", "--from", str(FV_ML1_SNAPSHOT), "--ledger", str(tmp_path / "f")]) == 0
    capsys.readouterr()
    taken = datetime(2026, 9, 16, 14, 2, 11, tzinfo=UTC)
    for path, expected in ((db, arrived), (tmp_path / "f", None)):
        with open_ledger(path, readonly=True) as ledger:
            history = LedgerHistory(ledger.connection)
            (moment,) = history.moments("fv-ml1", taken, taken + timedelta(seconds=1))
        assert moment.arrived_at == expected


# --- compact ---------------------------------------------------------------------------------


def imported(tmp_path: Path, minutes: int) -> Path:
    db = tmp_path / "l.sqlite"
    source = write_lines(tmp_path / "w.jsonl", week_lines(minutes))
    assert main(["snapshot", "--from", str(source), "--ledger", str(db)]) == 0
    return db


def test_compact_removes_only_with_keep_raw_and_keeps_the_rollups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = imported(tmp_path, 300)  # 03:00 → 07:59
    capsys.readouterr()
    with open_ledger(db, readonly=True) as ledger:
        before = LedgerHistory(ledger.connection).rollups(
            "bench-h1", START, START + timedelta(hours=5)
        )
    assert main(["compact", "--ledger", str(db)]) == 0
    assert capsys.readouterr().out == (
        "bench-h1: 300 raw moment(s), 2026-09-14T03:00:00Z → 2026-09-14T07:59:00Z\n"
        "nothing removed: give --keep-raw D (e.g. 35d) to keep only the last D raw\n"
    )
    # Now is 09:59:30: keeping 3 h of raw keeps the hours from 06:00 on.
    now = START + timedelta(hours=6, minutes=59, seconds=30)
    monkeypatch.setattr("placement.cli.sources.utc_now", lambda: now)
    assert main(["compact", "--ledger", str(db), "--keep-raw", "3h"]) == 0
    captured = capsys.readouterr()
    assert captured.out == (
        "bench-h1: removed 180 raw moment(s) taken before 2026-09-14T06:00:00Z "
        "(kept as hourly rollups); 120 kept\n"
    )
    assert "VACUUM" in captured.err
    with open_ledger(db, readonly=True) as ledger:
        history = LedgerHistory(ledger.connection)
        assert ledger.count() == 120
        assert history.raw_since("bench-h1") == START + timedelta(hours=3)
        assert history.rollups("bench-h1", START, START + timedelta(hours=5)) == before
    assert main(["compact", "--ledger", str(db), "--keep-raw", "3h"]) == 0
    assert capsys.readouterr().out == (
        f"nothing to remove: ledger {db} holds no raw moment older than 3h\n"
    )
    assert main(["compact", "--ledger", str(db)]) == 0
    assert capsys.readouterr().out.startswith(
        "bench-h1: 120 raw moment(s), 2026-09-14T06:00:00Z → 2026-09-14T07:59:00Z; "
        "before 2026-09-14T06:00:00Z rollups only\n"
    )


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        (["--keep-raw", "30m"], 2, "--keep-raw 30m: at least 1h"),
        (["--keep-raw", "soon"], 2, "cannot read 'soon' as an age"),
        ([], 3, "no such file"),
    ],
    ids=["too-short", "not-an-age", "no-ledger"],
)
def test_compact_exit_codes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], code: int, says: str
) -> None:
    missing = tmp_path / "missing.sqlite"
    assert main(["compact", "--ledger", str(missing), *argv]) == code
    assert says in capsys.readouterr().err
    assert not missing.exists()


def test_card_uuids_that_change_within_the_file_or_from_the_ledger_are_warned_of(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "l.sqlite"
    lines = week_lines(4)
    assert (
        main(
            [
                "snapshot",
                "--from",
                str(write_lines(tmp_path / "a.jsonl", lines[:2])),
                "--ledger",
                str(db),
            ]
        )
        == 0
    )
    capsys.readouterr()
    swapped = [json.loads(line) for line in lines[2:]]
    swapped[1]["cards"][1]["uuid"] = "GPU-other-0001"
    source = write_lines(tmp_path / "b.jsonl", [json.dumps(d) for d in swapped])
    assert main(["snapshot", "--from", str(source), "--ledger", str(db)]) == 0
    warnings = [
        line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")
    ]
    assert warnings == [
        "warning: host bench-h1: card UUIDs differ from its previous snapshot in the ledger "
        "(2026-09-14T03:02:00Z): new GPU-other-0001; gone GPU-bench-0001. a card replaced, or "
        "another machine under the same host name? Stored anyway; give each machine its own --host"
    ]
    with open_ledger(db, readonly=True) as ledger:
        assert ledger.count() == 4
