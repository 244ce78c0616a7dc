"""A damaged ledger is never written to, and nothing is decided on it (DESIGN.md "Never yes by accident").

A real SQLite ledger with one page overwritten in the middle of the file (the header intact):
`snapshot`, `check`, `plan` and `report` each exit 3 with a message and leave the file's bytes
as they were. Before, `snapshot` and `check` wrote into it with exit 0 and `report` crashed.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from inventory.ledger.store import LedgerError, open_ledger
from inventory.snapshot import Snapshot, load_snapshot
from placement.cli.main import main
from seats.errors import Exit
from tests.conftest import FV_ML1_CATALOGUE, FV_ML1_SNAPSHOT

SNAPSHOTS = 400


def _filled(path: Path) -> Snapshot:
    base = load_snapshot(FV_ML1_SNAPSHOT)
    with open_ledger(path) as ledger:
        ledger.append_many(
            base.model_copy(update={"taken_at": base.taken_at + timedelta(minutes=n)})
            for n in range(SNAPSHOTS)
        )
        ledger.fold_wal()
    return base


def _damage_one_page(path: Path) -> int:
    """Overwrite one page in the middle of the file with a pattern; return its number (1-based)."""
    raw = path.read_bytes()
    size = int.from_bytes(raw[16:18], "big")
    page_size = 65536 if size == 1 else size
    pages = len(raw) // page_size
    assert pages > 20, "the ledger should span many pages"
    middle = pages // 2
    start = (middle - 1) * page_size
    damaged = raw[:start] + b"\xde\xad\xbe\xef" * (page_size // 4) + raw[start + page_size :]
    path.write_bytes(damaged)
    assert damaged[:16] == b"SQLite format 3\x00"
    return middle


@pytest.fixture
def damaged(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.sqlite"
    _filled(path)
    _damage_one_page(path)
    return path


def _catalogue() -> list[str]:
    return ["--catalogue", str(FV_ML1_CATALOGUE)]


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [
        ["snapshot", "--from", str(FV_ML1_SNAPSHOT)],
        ["check", "vllm-voices", "--gpu", "0", *_catalogue(), "--max-age", "10000d"],
        ["check", "vllm-voices", "--gpu", "0", *_catalogue(), "--snapshot", str(FV_ML1_SNAPSHOT)],
        ["plan", *_catalogue(), "--max-age", "10000d"],
        ["report", *_catalogue(), "--format", "md"],
    ],
    ids=["snapshot", "check", "check-holds", "plan", "report"],
)
def test_a_damaged_ledger_is_exit_3_and_left_as_it_was(
    damaged: Path, tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    before = damaged.read_bytes()
    extra = ["--out", str(tmp_path / "report")] if command[0] == "report" else []
    code = main([*command, "--ledger", str(damaged), *extra])
    err = capsys.readouterr().err
    assert code == Exit.CANNOT_DECIDE, err
    assert f"ledger {damaged}: damaged: SQLite's quick_check" in err
    assert "Traceback" not in err
    assert damaged.read_bytes() == before
    assert not (tmp_path / "report").exists()


def test_an_intact_ledger_passes_the_check(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    base = _filled(path)
    with open_ledger(path) as ledger:
        assert ledger.count() == SNAPSHOTS
        assert ledger.latest(base.host) is not None


def test_opening_names_the_damage(damaged: Path) -> None:
    with (
        pytest.raises(LedgerError, match=r"damaged: SQLite's quick_check") as caught,
        open_ledger(damaged, readonly=True),
    ):
        pass
    assert caught.value.exit_code == Exit.CANNOT_DECIDE
    assert "sqlite3 FILE .recover" in str(caught.value)
