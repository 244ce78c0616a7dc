"""`gpuplan holds`: listing active holds as a table and as DESIGN.md's JSON, and releasing one."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from inventory.holds import Hold
from inventory.ledger.store import open_ledger
from placement.cli import main as cli_main
from placement.cli import sources
from tests.inventory.helpers import GIB, T0


@pytest.fixture
def ledger_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "l.sqlite"
    monkeypatch.setattr(sources, "utc_now", lambda: T0 + timedelta(minutes=1))
    with open_ledger(path) as ledger, ledger.approving(T0) as approval:
        approval.hold(
            [Hold("tts-a", "fv-ml1", (1,), 3 * GIB, T0, T0 + timedelta(minutes=30), "ci-deploy")]
        )
    return path


def test_lists_active_holds(ledger_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main.main(["holds", "--ledger", str(ledger_path)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].split() == [
        "tts-a", "fv-ml1", "1", "3.00", "GiB", "ci-deploy", "14:00Z", "14:30Z"
    ]  # fmt: skip


def test_a_time_on_another_day_shows_its_date(
    ledger_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # T0 is 14:00Z: a two-day hold made now ends on the day after tomorrow, at the same time.
    monkeypatch.setattr(sources, "utc_now", lambda: T0 + timedelta(minutes=1))
    with open_ledger(ledger_path) as ledger, ledger.approving(T0) as approval:
        approval.hold([Hold("tts-b", "fv-ml1", (2,), GIB, T0, T0 + timedelta(days=2), "ops")])
    assert cli_main.main(["holds", "--ledger", str(ledger_path)]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[1:]}
    later = (T0 + timedelta(days=2)).strftime("%Y-%m-%d")
    assert rows["tts-b"][-3:] == ["14:00Z", later, "14:00Z"]
    assert rows["tts-a"][-2:] == ["14:00Z", "14:30Z"]  # today's times stay short
    # Seen the next day, the hold made yesterday shows its date too.
    monkeypatch.setattr(sources, "utc_now", lambda: T0 + timedelta(days=1))
    assert cli_main.main(["holds", "--ledger", str(ledger_path)]) == 0
    row = capsys.readouterr().out.splitlines()[1].split()
    assert row[0] == "tts-b"
    assert row[-4:] == [T0.strftime("%Y-%m-%d"), "14:00Z", later, "14:00Z"]


def test_json_is_the_design_shape(ledger_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main.main(["holds", "--ledger", str(ledger_path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data == {
        "schema": 1,
        "holds": [
            {
                "seat": "tts-a",
                "host": "fv-ml1",
                "cards": [1],
                "need_bytes": 3 * GIB,
                "requested_bytes": 0,
                "created_at": "2026-09-16T14:00:00Z",
                "expires_at": "2026-09-16T14:30:00Z",
                "user": "ci-deploy",
            }
        ],
    }


def test_release_ends_it_and_a_second_release_is_exit_2(
    ledger_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main.main(["holds", "--ledger", str(ledger_path), "--release", "tts-a"]) == 0
    assert cli_main.main(["holds", "--ledger", str(ledger_path), "--release", "tts-a"]) == 2
    assert "tts-a has no active hold" in capsys.readouterr().err
    assert cli_main.main(["holds", "--ledger", str(ledger_path)]) == 0
    assert "no active holds" in capsys.readouterr().out


def test_a_missing_ledger_is_exit_3_and_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "none.sqlite"
    assert cli_main.main(["holds", "--ledger", str(missing), "--release", "x"]) == 3
    assert not missing.exists()


def test_release_of_a_misspelt_seat_says_which_it_might_mean(
    ledger_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main.main(["holds", "--ledger", str(ledger_path), "--release", "tts-b"]) == 2
    assert "seat tts-b has no active hold; did you mean tts-a?" in capsys.readouterr().err
