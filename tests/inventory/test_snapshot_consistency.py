"""Impossible figures never decide: the consistency rules, for a file, NVML and Prometheus alike.

DESIGN.md "Never yes by accident": used + free + reserved within 4 MiB of the total, processes
within 4 MiB of used, byte counts at most 2**60, `taken_at` at most 5 minutes ahead; each is
exit 2 naming the file or the host. Duplicate card UUIDs only warn.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from inventory.ledger.store import open_ledger
from inventory.snapshot import Snapshot, SnapshotError, check_consistency, format_utc
from placement.cli.main import main
from seats.errors import Exit
from tests.conftest import FV_ML1_CATALOGUE, FV_ML1_SNAPSHOT
from tests.inventory.prometheus.test_reader import NOW, FakePrometheus, fake_prometheus, fleet_of

__all__ = ["fake_prometheus"]  # the fixture, used by name below

MIB = 2**20
GIB = 2**30
SOURCE = "fv-ml1.snapshot.json"


def _data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FV_ML1_SNAPSHOT.read_text())
    return data


def _write(tmp_path: Path, data: dict[str, Any], name: str = "s.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _card(snapshot: Snapshot, index: int, **changes: object) -> Snapshot:
    cards = list(snapshot.cards)
    cards[index] = cards[index].model_copy(update=changes)
    return snapshot.model_copy(update={"cards": tuple(cards)})


def test_the_example_is_consistent(fv_ml1_snapshot: Snapshot) -> None:
    assert check_consistency(fv_ml1_snapshot, SOURCE, fv_ml1_snapshot.taken_at) == []


def test_dcgm_rounding_of_4_mib_passes_and_one_byte_more_does_not(
    fv_ml1_snapshot: Snapshot,
) -> None:
    card = fv_ml1_snapshot.cards[1]
    assert card.free_bytes is not None
    now = fv_ml1_snapshot.taken_at
    within = _card(fv_ml1_snapshot, 1, free_bytes=card.free_bytes + 4 * MIB)
    assert check_consistency(within, SOURCE, now) == []
    over = _card(fv_ml1_snapshot, 1, free_bytes=card.free_bytes + 4 * MIB + 1)
    with pytest.raises(
        SnapshotError, match=r"^fv-ml1\.snapshot\.json: cards\[1\]: card fv-ml1:1"
    ) as caught:
        check_consistency(over, SOURCE, now)
    assert f"{4 * MIB + 1} B over" in str(caught.value)
    assert caught.value.exit_code == Exit.BAD_INPUT
    under = _card(fv_ml1_snapshot, 1, used_bytes=(card.used_bytes or 0) - 5 * MIB)
    with pytest.raises(SnapshotError, match=f"{5 * MIB} B under"):
        check_consistency(under, SOURCE, now)


def test_processes_over_used_are_refused(fv_ml1_snapshot: Snapshot) -> None:
    card = fv_ml1_snapshot.cards[0]
    first = card.processes[0].model_copy(
        update={"used_bytes": (card.processes[0].used_bytes or 0) + 5 * MIB}
    )
    changed = _card(fv_ml1_snapshot, 0, processes=(first, *card.processes[1:]))
    with pytest.raises(
        SnapshotError, match=r"cards\[0\]\.processes: card fv-ml1:0: its processes hold"
    ):
        check_consistency(changed, SOURCE, fv_ml1_snapshot.taken_at)


@pytest.mark.parametrize("key", ["total_bytes", "used_bytes", "free_bytes", "reserved_bytes"])
def test_a_byte_count_over_2_60_is_refused(fv_ml1_snapshot: Snapshot, key: str) -> None:
    changed = _card(fv_ml1_snapshot, 2, **{key: 2**60 + 1})
    with pytest.raises(SnapshotError, match=rf"cards\[2\]\.{key}: .*more than 2\*\*60"):
        check_consistency(changed, SOURCE, fv_ml1_snapshot.taken_at)


def test_taken_at_more_than_5_minutes_ahead_is_refused(fv_ml1_snapshot: Snapshot) -> None:
    taken = fv_ml1_snapshot.taken_at
    assert check_consistency(fv_ml1_snapshot, SOURCE, taken - timedelta(minutes=5)) == []
    with pytest.raises(SnapshotError, match=r"taken_at: .* is 5 min in the future"):
        check_consistency(fv_ml1_snapshot, SOURCE, taken - timedelta(minutes=5, seconds=1))


def test_duplicate_uuids_warn(fv_ml1_snapshot: Snapshot) -> None:
    copied = _card(fv_ml1_snapshot, 3, uuid=fv_ml1_snapshot.cards[1].uuid)
    (warning,) = check_consistency(copied, SOURCE, fv_ml1_snapshot.taken_at)
    assert "fv-ml1:1 and fv-ml1:3 have the same UUID" in warning


# Through the commands: each of these decided before (exit 0, or a traceback).


def _check(*args: str) -> list[str]:
    return ["check", "--catalogue", str(FV_ML1_CATALOGUE), *args]


def test_a_free_of_10_30_is_exit_2_not_a_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _data()
    data["cards"][1]["free_bytes"] = 10**30
    path = _write(tmp_path, data)
    assert main(_check("vllm-voices", "--gpu", "1", "--snapshot", str(path))) == Exit.BAD_INPUT
    err = capsys.readouterr().err
    assert f"{path}: cards[1].free_bytes: card fv-ml1:1" in err and "Traceback" not in err
    db = tmp_path / "l.sqlite"
    assert main(["snapshot", "--from", str(path), "--ledger", str(db)]) == Exit.BAD_INPUT
    assert not db.exists() or sqlite3.connect(db).execute(
        "SELECT count(*) FROM sqlite_master WHERE name = 'snapshots'"
    ).fetchone() == (0,)


def _seat_50gib(tmp_path: Path) -> Path:
    path = tmp_path / "big.yaml"
    path.write_text("name: big\nhost: fv-ml1\ngpus: [3]\nresident: 50 GiB\n")
    return path


def test_used_plus_free_past_the_card_does_not_pass_a_seat(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Card 1 truly has some 26 GiB free; the forged free says 76 GiB without lowering used.
    data = _data()
    data["cards"][1]["free_bytes"] += 50 * GIB
    path = _write(tmp_path, data)
    seat = tmp_path / "big.yaml"
    seat.write_text("name: big\nresident: 50 GiB\n")
    code = main(_check("big", "--add", str(seat), "--gpu", "1", "--snapshot", str(path)))
    assert code == Exit.BAD_INPUT
    assert "figures that cannot all be true decide nothing" in capsys.readouterr().err
    assert (
        main(_check("big", "--add", str(seat), "--gpu", "1", "--snapshot", str(FV_ML1_SNAPSHOT)))
        == 1
    )


def test_a_future_snapshot_is_refused_before_the_ledger_stores_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    db = tmp_path / "l.sqlite"
    future = _data()
    future["taken_at"] = format_utc(now + timedelta(days=1))
    path = _write(tmp_path, future, "future.json")
    assert main(["snapshot", "--from", str(path), "--ledger", str(db)]) == Exit.BAD_INPUT
    assert "h in the future" in capsys.readouterr().err
    real = _data()
    real["taken_at"] = format_utc(now)
    assert main(["snapshot", "--from", str(_write(tmp_path, real)), "--ledger", str(db)]) == 0
    with open_ledger(db, readonly=True) as ledger:
        assert ledger.count() == 1
        latest = ledger.latest("fv-ml1")
    assert latest is not None and latest.taken_at == now
    # And a check with --max-age never sees it as fresh.
    assert (
        main(_check("vllm-voices", "--gpu", "0", "--snapshot", str(path), "--max-age", "15m")) == 2
    )


def test_prometheus_figures_are_checked_naming_the_host(
    fake_prometheus: FakePrometheus, fv_ml1_snapshot: Snapshot, capsys: pytest.CaptureFixture[str]
) -> None:
    card = fv_ml1_snapshot.cards[2]
    forged = _card(
        fv_ml1_snapshot.model_copy(update={"taken_at": NOW}),
        2,
        free_bytes=(card.free_bytes or 0) + 60 * GIB,
    )
    fake_prometheus.serve(fleet_of(forged))
    from inventory.prometheus.reader import read_fleet

    with pytest.raises(
        SnapshotError, match=r"Prometheus at http://127\.0\.0\.1:\d+: host fv-ml1: cards\[2\]"
    ):
        read_fleet(fake_prometheus.url, now=NOW, max_age=timedelta(minutes=15))


def test_pack_takes_no_card_size_from_impossible_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _data()
    for card in data["cards"]:
        card["total_bytes"] = 2**61
    path = _write(tmp_path, data)
    code = main(["pack", "--catalogue", str(FV_ML1_CATALOGUE), "--snapshot", str(path)])
    assert code == Exit.BAD_INPUT
    assert "more than 2**60" in capsys.readouterr().err
