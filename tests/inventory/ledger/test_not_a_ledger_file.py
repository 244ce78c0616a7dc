"""A ledger path that is not a regular file, or a ledger missing a table, is exit 3 (issue 32 item 6).

DESIGN.md "Never yes by accident": a FIFO at the `--ledger` path hung every command (reading its
header waits for a writer that never comes), and a ledger whose `snapshots` table was dropped
made `holds` and `report` end in a traceback, exit 1. Now each command answers exit 3 at once,
in one line, and leaves the path as it was.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from inventory.ledger.store import SCHEMA_VERSION, LedgerError, open_ledger
from placement.cli.main import main
from tests.conftest import FV_ML1_CATALOGUE, FV_ML1_SNAPSHOT, ROOT

CATALOGUE = ["--catalogue", str(FV_ML1_CATALOGUE)]


def _commands(ledger: str) -> dict[str, list[str]]:
    """Every command that reads or writes a ledger, pointed at `ledger`."""
    return {
        "snapshot": ["snapshot", "--from", str(FV_ML1_SNAPSHOT), *CATALOGUE, "--ledger", ledger],
        "check": ["check", "vllm-voices", "--gpu", "0", *CATALOGUE, "--ledger", ledger],
        "plan": ["plan", *CATALOGUE, "--ledger", ledger],
        "ledger": ["ledger", *CATALOGUE, "--ledger", ledger],
        "holds": ["holds", "--ledger", ledger],
        "report": ["report", "--ledger", ledger, *CATALOGUE],
    }


def _run(words: list[str]) -> subprocess.CompletedProcess[str]:
    # A real process with a deadline: a command that blocks on the path fails here, not hangs.
    return subprocess.run(
        [sys.executable, "-m", "placement", *words],
        capture_output=True, text=True, cwd=ROOT, timeout=60, check=False,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.sqlite"
    os.mkfifo(path)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("command", list(_commands("L")))
def test_a_fifo_at_the_ledger_path_is_exit_3_without_blocking(command: str, fifo: Path) -> None:
    done = _run(_commands(str(fifo))[command])
    assert done.returncode == 3, done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"error: ledger {fifo}: is a FIFO (named pipe), not a ledger file; left unchanged"
    )
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_a_device_at_the_ledger_path_is_exit_3_without_reading_it() -> None:
    # /dev/zero would be read forever as a header of zeros; /dev/null is empty, and would be
    # taken for a new ledger to create.
    for device in ("/dev/zero", "/dev/null"):
        refused = pytest.raises(LedgerError, match=rf"ledger {device}: is a device, not a ledger")
        with refused, open_ledger(device, readonly=True):
            pass
        done = _run(_commands(device)["holds"])
        assert (done.returncode, done.stderr.count("\n")) == (3, 1), done.stderr


def _ledger_without(path: Path, table: str) -> Path:
    assert (
        main(["snapshot", "--from", str(FV_ML1_SNAPSHOT), *CATALOGUE, "--ledger", str(path)]) == 0
    )
    connection = sqlite3.connect(path)
    connection.execute(f"DROP TABLE {table}")
    connection.commit()
    connection.close()
    return path


@pytest.mark.parametrize("table", ["snapshots", "holds", "decisions"])
def test_a_ledger_missing_a_table_is_exit_3_for_every_command(
    table: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPUPLAN_CATALOGUE", raising=False)
    path = _ledger_without(tmp_path / "ledger.sqlite", table)
    capsys.readouterr()
    before = path.read_bytes()
    for command, words in _commands(str(path)).items():
        assert main(words) == 3, command
        err = capsys.readouterr().err
        assert err.splitlines()[-1] == (
            f"error: ledger {path}: schema {SCHEMA_VERSION} but its table {table} is missing "
            "(damaged or edited by hand); left unchanged"
        ), command
    assert path.read_bytes() == before


@pytest.mark.slow
def test_holds_and_report_on_a_ledger_missing_snapshots_print_no_traceback(tmp_path: Path) -> None:
    # The reproduction as a user ran it: the real entry point, exit 3 and one line.
    path = _ledger_without(tmp_path / "ledger.sqlite", "snapshots")
    for command in ("holds", "report"):
        done = _run(_commands(str(path))[command])
        assert done.returncode == 3 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1
