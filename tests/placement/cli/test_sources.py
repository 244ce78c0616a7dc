"""The one snapshot-source resolver: explicit options in, (snapshots, origin per host, unusable hosts) out."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from inventory.ledger.store import open_ledger
from inventory.snapshot import Snapshot
from placement.cli.main import build_parser
from placement.cli.sources import SourceOptions, resolve_snapshots, source_options
from seats.errors import BadInputError, CannotDecideError
from tests.conftest import FV_ML1_SNAPSHOT

TAKEN = datetime(2026, 9, 16, 14, 2, 11, tzinfo=UTC)  # fv-ml1.snapshot.json


def _copy_as(folder: Path, host: str) -> Path:
    data = json.loads(FV_ML1_SNAPSHOT.read_text())
    data["host"] = host
    path = folder / f"{host}.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("command", ["plan", "check", "ledger"])
def test_options_are_read_without_writing_into_args(command: str) -> None:
    extra = ["x", "--gpu", "0"] if command == "check" else []
    args = build_parser().parse_args(
        [command, *extra, "--snapshot", str(FV_ML1_SNAPSHOT), "--max-age", "2h"]
    )
    before = dict(vars(args))
    source = source_options(args)
    resolve_snapshots(source, None, TAKEN)
    assert vars(args) == before
    assert source == SourceOptions(snapshots=(str(FV_ML1_SNAPSHOT),), max_age=timedelta(hours=2))


def test_each_file_labels_its_own_host_even_inside_a_directory(tmp_path: Path) -> None:
    folder = tmp_path / "fleet"
    folder.mkdir()
    one, two = _copy_as(folder, "fv-ml1"), _copy_as(folder, "fv-ml2")
    three = _copy_as(tmp_path, "fv-ml3")
    source = SourceOptions(snapshots=(str(folder), str(three)))
    cards = resolve_snapshots(source, None, TAKEN)
    assert [s.host for s in cards.snapshots] == ["fv-ml1", "fv-ml2", "fv-ml3"]
    assert dict(cards.origins) == {"fv-ml1": str(one), "fv-ml2": str(two), "fv-ml3": str(three)}
    assert cards.unusable == {}


def test_one_snapshot_per_host(tmp_path: Path) -> None:
    twice = SourceOptions(snapshots=(str(FV_ML1_SNAPSHOT), str(_copy_as(tmp_path, "fv-ml1"))))
    with pytest.raises(BadInputError, match="one snapshot per host: fv-ml1 given more than once"):
        resolve_snapshots(twice, None, TAKEN)


def test_no_source_is_bad_input() -> None:
    with pytest.raises(BadInputError, match="no cards to read"):
        resolve_snapshots(SourceOptions(), None, TAKEN)


def test_an_old_file_warns_and_is_refused_only_with_max_age(
    capsys: pytest.CaptureFixture[str],
) -> None:
    later = TAKEN + timedelta(hours=2)
    resolve_snapshots(SourceOptions(snapshots=(str(FV_ML1_SNAPSHOT),)), None, later)
    assert "is 2.0 h old; deciding on it anyway" in capsys.readouterr().err
    strict = SourceOptions(snapshots=(str(FV_ML1_SNAPSHOT),), max_age=timedelta(minutes=15))
    with pytest.raises(CannotDecideError, match="older than --max-age 15 min"):
        resolve_snapshots(strict, None, later)


def test_ledger_labels_every_host_with_the_ledger(
    tmp_path: Path, fv_ml1_snapshot: Snapshot
) -> None:
    db = tmp_path / "l.sqlite"
    with open_ledger(db) as ledger:
        ledger.append(fv_ml1_snapshot)
        ledger.append(fv_ml1_snapshot.model_copy(update={"host": "fv-ml2"}))
    source = SourceOptions(ledger=str(db))
    cards = resolve_snapshots(source, None, TAKEN + timedelta(minutes=1))
    assert sorted(cards.origins.items()) == [
        ("fv-ml1", f"ledger {db}"),
        ("fv-ml2", f"ledger {db}"),
    ]
    with pytest.raises(CannotDecideError, match="older than --max-age 15 min"):
        resolve_snapshots(source, None, TAKEN + timedelta(minutes=16))


def test_old_files_of_many_hosts_warn_in_one_line_naming_each(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    paths = tuple(str(_copy_as(tmp_path, f"host-{i:03d}")) for i in range(3))
    resolve_snapshots(SourceOptions(snapshots=paths), None, TAKEN + timedelta(hours=2))
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "warning: 3 snapshots older than 15 min: host-000 (2.0 h), host-001 (2.0 h), "
        "host-002 (2.0 h); deciding on them anyway (pass --max-age to refuse)"
    ]
