"""Faults around the ledger met through the real CLI: a disk that fills mid-write, many writers at once.

The disk fills by RLIMIT_FSIZE in a child process (a write past it fails with EFBIG, SIGXFSZ
ignored), so no loop-mounted filesystem or root is needed.
"""

from __future__ import annotations

import os
import resource
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from inventory.ledger import writes
from inventory.ledger.store import LedgerError, open_ledger
from inventory.snapshot import Process, Snapshot, load_snapshot, save_snapshot
from tests.inventory.helpers import MIB, make_snapshot

ROOT = Path(__file__).resolve().parents[3]
CATALOGUE = ROOT / "seats/catalogue/fv-ml1.yaml"
SNAPSHOT = ROOT / "seats/catalogue/fv-ml1.snapshot.json"
KIB = 1024
PROCESSES = 300


def env() -> dict[str, str]:
    # No .pyc writes: the child's file size limit is for the ledger alone.
    return dict(os.environ, PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")


def gpuplan(*argv: str, fsize_bytes: int | None = None) -> subprocess.CompletedProcess[str]:
    """`gpuplan ARGV` in a child process, its files limited to `fsize_bytes` when given."""

    def limit() -> None:
        # Ignored, SIGXFSZ no longer kills the child: the write fails with EFBIG instead.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        if fsize_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize_bytes, fsize_bytes))

    return subprocess.run(
        [sys.executable, "-m", "placement", *argv],
        cwd=ROOT,
        env=env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        preexec_fn=limit,
    )


def integrity(path: Path) -> tuple[str, int, int, int]:
    """PRAGMA integrity_check, and the snapshot, card and process row counts."""
    with sqlite3.connect(path) as connection:
        check = connection.execute("PRAGMA integrity_check").fetchone()[0]
        counts = [
            int(connection.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
            for table in ("snapshots", "cards", "processes")
        ]
    connection.close()
    return check, counts[0], counts[1], counts[2]


def large_snapshot() -> Snapshot:
    """A snapshot of ~400 KB of rows: its write spans many pages, so a full disk cuts it midway."""
    small = make_snapshot(minute=5)
    cards = []
    for card in small.cards:
        processes = tuple(
            Process(
                pid=10_000 + card.index * 1000 + n,
                used_bytes=MIB,
                cmdline=f"python3 worker.py --shard {n} " + "x" * 150,
                seat=None,
            )
            for n in range(PROCESSES)
        )
        used = PROCESSES * MIB
        free = (card.total_bytes or 0) - (card.reserved_bytes or 0) - used
        cards.append(
            card.model_copy(update={"processes": processes, "used_bytes": used, "free_bytes": free})
        )
    return small.model_copy(update={"cards": tuple(cards)})


# The shm file alone takes 32 KiB: a limit under it fails on opening the ledger, the others
# fail while the snapshot's pages are written.
@pytest.mark.slow
@pytest.mark.parametrize("fsize_bytes", [16 * KIB, 48 * KIB, 160 * KIB])
def test_a_disk_that_fills_mid_write_is_exit_3_and_stores_nothing_half(
    tmp_path: Path, fsize_bytes: int
) -> None:
    db = tmp_path / "ledger.sqlite"
    first = make_snapshot(minute=0)
    with open_ledger(db) as ledger:
        ledger.store(first)
    big = tmp_path / "big.json"
    save_snapshot(large_snapshot(), big)

    done = gpuplan("snapshot", "--from", str(big), "--ledger", str(db), fsize_bytes=fsize_bytes)

    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    assert f"error: ledger {db}: cannot write" in done.stderr
    assert "nothing of this write was stored" in done.stderr
    # The last whole snapshot is still there and readable; nothing of the new one is.
    assert integrity(db) == ("ok", 1, 8, 16)
    with open_ledger(db, readonly=True) as ledger:
        assert ledger.latest("fv-ml1") == first
    # With room again the same write succeeds.
    again = gpuplan("snapshot", "--from", str(big), "--ledger", str(db))
    assert again.returncode == 0, again.stderr
    assert integrity(db) == ("ok", 2, 16, 16 + 8 * PROCESSES)


@pytest.mark.parametrize(
    ("sqlite_says", "words"),
    [("database or disk is full", "the disk is full"), ("disk I/O error", "disk I/O error")],
)
def test_a_full_disk_at_any_insert_is_a_ledger_error_and_rolls_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sqlite_says: str, words: str
) -> None:
    # SQLite writes pages before COMMIT when its cache spills: the insert itself fails then.
    path = tmp_path / "l.sqlite"

    def full(*args: object) -> None:
        raise sqlite3.OperationalError(sqlite_says)

    with open_ledger(path) as ledger:
        ledger.store(make_snapshot(minute=0))
        monkeypatch.setattr(writes, "insert_processes", full)
        with pytest.raises(LedgerError) as caught:
            ledger.store(make_snapshot(minute=1))
        monkeypatch.undo()
        assert ledger.count() == 1
    assert caught.value.exit_code == 3
    assert f"cannot write: {words}" in str(caught.value)
    assert "nothing of this write was stored" in str(caught.value)
    assert integrity(path) == ("ok", 1, 8, 16)


WRITER = """
import contextlib, io, sys, time
from placement.cli.main import main
db, deadline, files = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
codes = []
# Every file at least once, then again and again until the deadline.
while not codes or time.time() < deadline:
    for name in files:
        with contextlib.redirect_stdout(io.StringIO()):
            codes.append(main(["snapshot", "--from", name, "--ledger", db]))
bad = [c for c in codes if c != 0]
print(len(codes), len(bad), flush=True)
sys.exit(1 if bad else 0)
"""

READER = """
import contextlib, io, sys, time
from placement.cli.main import main
db, catalogue, deadline = sys.argv[1], sys.argv[2], float(sys.argv[3])
runs = 0
while time.time() < deadline:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["report", "--catalogue", catalogue, "--ledger", db, "--format", "json"])
    if code != 0 or '"schema": 1' not in out.getvalue():
        print("report failed with", code, out.getvalue()[:400], flush=True)
        sys.exit(1)
    runs += 1
print(runs, flush=True)
"""


@pytest.mark.slow
def test_ten_snapshot_writers_and_a_report_reader_at_once(tmp_path: Path) -> None:
    db = tmp_path / "ledger.sqlite"
    base = load_snapshot(SNAPSHOT)
    with open_ledger(db) as ledger:
        ledger.store(base)
    # 10 writers over 200 distinct snapshots; each file is given to two writers, so the same
    # snapshot arrives twice at about the same time and must still be stored once.
    files = []
    for n in range(1, 201):
        path = tmp_path / f"s{n:03d}.json"
        moved = base.model_copy(update={"taken_at": base.taken_at + timedelta(seconds=n)})
        save_snapshot(moved, path)
        files.append(str(path))

    def mine(w: int) -> list[str]:
        return files[(w % 10) * 20 : (w % 10 + 1) * 20]

    deadline = time.time() + 10
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db), str(deadline), *mine(w), *mine(w + 1)],
            cwd=ROOT,
            env=env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(10)
    ]
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(db), str(CATALOGUE), str(deadline)],
        cwd=ROOT,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    results = [writer.communicate(timeout=120) for writer in writers]
    r_out, r_err = reader.communicate(timeout=120)

    for writer, (out, err) in zip(writers, results, strict=True):
        assert writer.returncode == 0, (out, err[-2000:])
    assert reader.returncode == 0, (r_out, r_err[-2000:])
    assert int(r_out.split()[-1]) >= 1
    written = sum(int(out.split()[0]) for out, _ in results)
    assert written >= 400  # each file by two writers, at least once each
    check, snapshots, cards, _ = integrity(db)
    assert check == "ok"
    assert snapshots == 201  # every snapshot once, however many times it arrived
    assert cards == 201 * len(base.cards)
