"""A ledger behaves predictably: a later decision never moves the report's window, and `plan`
reads a ledger it cannot write (mode 0444, a read-only mount) and says it recorded nothing."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import pytest

from placement.cli.main import main
from tests.conftest import FV_ML1_CATALOGUE, FV_ML1_SNAPSHOT, ROOT

CATALOGUE = ["--catalogue", str(FV_ML1_CATALOGUE)]


def decisions(path: Path) -> int:
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as connection:
        return int(connection.execute("SELECT COUNT(*) FROM decisions").fetchone()[0])


def snapshot_ledger(path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A WAL ledger holding the fv-ml1 snapshot, closed (no -wal or -shm file beside it)."""
    assert main(["snapshot", "--from", str(FV_ML1_SNAPSHOT), "--ledger", str(path)]) == 0
    capsys.readouterr()
    with closing(sqlite3.connect(path)) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert not path.with_name(path.name + "-shm").exists()
    return path


@pytest.mark.slow
def test_a_plan_after_the_report_never_moves_its_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The issue's steps: `make report`'s demo ledger, then `plan --ledger` on it (a decision
    # dated now, 78 days after its newest snapshot), then the report again.
    monkeypatch.delenv("GPUPLAN_CATALOGUE", raising=False)
    db = tmp_path / "demo.sqlite"
    argv = ["demo-ledger", *CATALOGUE, "--snapshot", str(FV_ML1_SNAPSHOT), "--out", str(db)]
    assert main([*argv, "--days", "1"]) == 0
    assert decisions(db) == 2
    main(["plan", *CATALOGUE, "--ledger", str(db), "--max-age", "1000d"])
    assert decisions(db) == 3  # the plan was recorded
    capsys.readouterr()
    assert main(["report", *CATALOGUE, "--ledger", str(db), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    newest = datetime.fromisoformat(json.loads(FV_ML1_SNAPSHOT.read_text())["taken_at"])
    end = datetime.fromisoformat(data["window"]["end"])
    # The window ends one second after the newest snapshot (to the minute: demo data).
    assert end.astimezone(UTC).replace(second=0) == newest.replace(second=0)
    assert end < datetime.now(UTC)
    # The plan recorded after it is still listed, with the demo's two checks.
    assert [d["kind"] for d in data["decisions"]] == ["check", "check", "plan"]
    # An explicit --until window lists only its own decisions.
    until = ["--until", data["window"]["end"]]
    assert main(["report", *CATALOGUE, "--ledger", str(db), "--json", *until]) == 0
    assert [d["kind"] for d in json.loads(capsys.readouterr().out)["decisions"]] == [
        "check",
        "check",
    ]


def test_plan_reads_a_0444_ledger_and_records_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Root writes through file modes; gpuplan does not: a ledger marked 0444 stays as it is.
    db = snapshot_ledger(tmp_path / "l.sqlite", capsys)
    os.chmod(db, 0o444)
    before = db.read_bytes()
    code = main(["plan", *CATALOGUE, "--ledger", str(db), "--max-age", "1000d"])
    out, err = capsys.readouterr()
    assert code == 0
    assert "PLACED   flash-next → fv-ml1 card 3" in out
    assert f"note: ledger {db}: cannot write: its mode is 0444" in err
    assert "this plan recorded nothing" in err
    assert db.read_bytes() == before
    assert decisions(db) == 0
    os.chmod(db, 0o644)  # writable again: the same plan is recorded
    assert main(["plan", *CATALOGUE, "--ledger", str(db), "--max-age", "1000d"]) == 0
    assert "recorded nothing" not in capsys.readouterr().err
    assert decisions(db) == 1


def _read_only_mount_works() -> bool:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount --bind / /mnt 2>/dev/null || mount --bind /tmp /tmp"],
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(
    not _read_only_mount_works(), reason="no user and mount namespaces here (unshare -rm)"
)
def test_plan_and_ledger_read_a_wal_ledger_on_a_read_only_mount(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A read-only bind mount in a namespace of its own: even root cannot write there, and
    # SQLite cannot create the -shm file a WAL ledger needs to be read (it is read immutable).
    folder = tmp_path / "replica"
    folder.mkdir()
    db = snapshot_ledger(folder / "l.sqlite", capsys)
    before = db.read_bytes()
    gpuplan = f"{sys.executable} -m placement"
    script = (
        f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} && "
        f"{gpuplan} plan --catalogue {FV_ML1_CATALOGUE} --ledger {db} --max-age 1000d && "
        f"{gpuplan} ledger --catalogue {FV_ML1_CATALOGUE} --ledger {db} --max-age 1000d --json"
    )
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "PLACED   flash-next → fv-ml1 card 3" in done.stdout
    assert "cannot write: it is on a read-only file system" in done.stderr
    assert "this plan recorded nothing" in done.stderr
    shown = json.loads(done.stdout[done.stdout.index("{") :])
    assert [c["index"] for c in shown["hosts"][0]["cards"]] == [0, 1, 2, 3]
    assert db.read_bytes() == before
    assert decisions(db) == 0
