"""Durations from the command line (issue 24 item 8): too large or negative is exit 2, never a traceback.

`--hold-for 100000000d` fits a timedelta but not `now + it`; `--max-age 10000000000d` fits
neither; `--max-age -5m` used to be read by argparse as an unknown option.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from placement.cli.main import main
from placement.cli.sources import MAX_AGE, parse_age
from tests.conftest import FV_ML1_CATALOGUE, FV_ML1_SNAPSHOT, ROOT

SOURCE = ["--catalogue", str(FV_ML1_CATALOGUE), "--snapshot", str(FV_ML1_SNAPSHOT)]


def _check(ledger: Path, *extra: str) -> list[str]:
    seat = str(ROOT / "examples" / "new-4gib.yaml")
    return [
        "check",
        "new-4gib",
        "--gpu",
        "1",
        *SOURCE,
        "--add",
        seat,
        "--ledger",
        str(ledger),
        *extra,
    ]


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--hold-for", "100000000d", "longer than 365000d"),
        ("--max-age", "10000000000d", "longer than 365000d"),
        ("--max-age", "1e400d", "longer than 365000d"),
        ("--max-age", "inf", "longer than 365000d"),
        ("--max-age", "-5m", "'-5m' is negative"),
        ("--hold-for", "-1h", "'-1h' is negative"),
        ("--max-age", "nan", "cannot read 'nan' as an age"),
    ],
)
def test_a_duration_out_of_range_is_bad_input_naming_the_option(
    option: str, value: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = tmp_path / "l.sqlite"
    assert main(_check(ledger, option, value)) == 2
    err = capsys.readouterr().err
    assert f"argument {option}: " in err and says in err
    assert not ledger.exists()  # refused before anything was judged or held


def test_report_since_out_of_range_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--since", "-7d", "--catalogue", str(FV_ML1_CATALOGUE)]) == 2
    assert "argument --since: '-7d' is negative" in capsys.readouterr().err


def test_with_json_the_duration_error_is_an_error_object_on_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*_check(tmp_path / "l.sqlite", "--max-age", "-5m"), "--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["exit"] == 2 and "'-5m' is negative" in error["message"]


def test_the_longest_duration_still_holds_and_expires(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # At the cap itself `now + hold_for` is a date: the hold is written, nothing overflows.
    ledger = tmp_path / "l.sqlite"
    assert main(_check(ledger, "--hold-for", f"{MAX_AGE.days}d")) == 0
    capsys.readouterr()
    assert main(["holds", "--ledger", str(ledger), "--json"]) == 0
    (hold,) = json.loads(capsys.readouterr().out)["holds"]
    created, expires = (datetime.fromisoformat(hold[k]) for k in ("created_at", "expires_at"))
    assert hold["seat"] == "new-4gib" and expires - created == MAX_AGE


@pytest.mark.parametrize(
    ("text", "age"),
    [("15m", timedelta(minutes=15)), ("90s", timedelta(seconds=90)), ("0", timedelta(0))],
)
def test_ordinary_ages_read_as_before(text: str, age: timedelta) -> None:
    assert parse_age(text) == age
