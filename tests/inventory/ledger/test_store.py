"""The SQLite ledger: round trips, one snapshot per host and second, ranges, faults, migration, concurrency."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest

from inventory.ledger import writes
from inventory.ledger.store import MIGRATIONS, SCHEMA_VERSION, LedgerError, open_ledger
from inventory.snapshot import Card, Snapshot
from tests.inventory.helpers import T0, make_snapshot

ROOT = Path(__file__).resolve().parents[3]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rows(path: Path, table: str) -> int:
    with sqlite3.connect(path) as connection:
        return int(connection.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


def test_round_trip_keeps_every_field(tmp_path: Path, fv_ml1_snapshot: Snapshot) -> None:
    with open_ledger(tmp_path / "l.sqlite") as ledger:
        snapshot_id = ledger.append(fv_ml1_snapshot)
        assert ledger.latest("fv-ml1") == fv_ml1_snapshot
    assert snapshot_id == 1
    assert rows(tmp_path / "l.sqlite", "cards") == 4
    assert rows(tmp_path / "l.sqlite", "processes") == sum(
        len(c.processes) for c in fv_ml1_snapshot.cards
    )


def test_error_cards_and_v1_cards_round_trip(tmp_path: Path) -> None:
    base = make_snapshot(cards=3, processes=1)
    cards = (
        base.cards[0],
        Card(index=1, error="GpuIsLost"),
        base.cards[2].model_copy(update={"reserved_bytes": None}),
    )
    snapshot = base.model_copy(update={"cards": cards})
    with open_ledger(tmp_path / "l.sqlite") as ledger:
        ledger.append(snapshot)
        back = ledger.latest(snapshot.host)
    assert back == snapshot
    assert (
        back is not None and back.card(1).free_bytes is None and back.card(2).reserved_bytes is None
    )


def test_same_host_and_second_is_stored_once(tmp_path: Path) -> None:
    snapshot = make_snapshot(minute=3)
    with open_ledger(tmp_path / "l.sqlite") as ledger:
        first = ledger.store(snapshot)
        again = ledger.store(snapshot)
        other_host = ledger.store(make_snapshot(host="fv-ml2", minute=3))
        assert ledger.count() == 2
    assert first == (1, True)
    assert again == (1, False)
    assert other_host == (2, True)
    assert rows(tmp_path / "l.sqlite", "cards") == 16


def test_append_many_skips_those_already_stored(tmp_path: Path) -> None:
    with open_ledger(tmp_path / "l.sqlite") as ledger:
        ledger.append(make_snapshot(minute=1))
        stored = ledger.append_many(make_snapshot(minute=m) for m in range(5))
        assert stored == 4
        assert ledger.count() == 5


def test_range_reads_by_host_half_open_and_ordered(tmp_path: Path) -> None:
    with open_ledger(tmp_path / "l.sqlite") as ledger:
        ledger.append_many(make_snapshot(minute=m, cards=2) for m in reversed(range(10)))
        ledger.append_many(make_snapshot(host="fv-ml2", minute=m, cards=2) for m in range(10))
        got = list(ledger.snapshots("fv-ml1", T0 + timedelta(minutes=2), T0 + timedelta(minutes=5)))
        everything = list(ledger.snapshots("fv-ml1"))
        nothing = list(ledger.snapshots("fv-ml3"))
    assert [s.taken_at for s in got] == [T0 + timedelta(minutes=m) for m in (2, 3, 4)]
    assert {s.host for s in got} == {"fv-ml1"}
    assert got[0] == make_snapshot(minute=2, cards=2)
    assert len(everything) == 10 and nothing == []


def test_latest_per_host(tmp_path: Path) -> None:
    with open_ledger(tmp_path / "l.sqlite") as ledger:
        ledger.append_many(
            [make_snapshot(minute=5), make_snapshot(minute=9), make_snapshot(minute=7)]
        )
        ledger.append(make_snapshot(host="fv-ml2", minute=1))
        latest = ledger.latest_per_host()
        assert ledger.latest("nowhere") is None
    assert [(s.host, s.taken_at) for s in latest] == [
        ("fv-ml1", T0 + timedelta(minutes=9)),
        ("fv-ml2", T0 + timedelta(minutes=1)),
    ]


def test_decisions_round_trip(tmp_path: Path) -> None:
    reasons = [
        {
            "rule": "gate",
            "card": 0,
            "need_bytes": 12,
            "room_bytes": 10,
            "short_bytes": 2,
            "text": "t",
        }
    ]
    with open_ledger(tmp_path / "l.sqlite") as ledger:
        sid = ledger.append(make_snapshot())
        did = ledger.record_decision(
            kind="check",
            host="fv-ml1",
            seat="vllm-voices",
            cards=[0],
            verdict="refuse",
            reasons=reasons,
            inputs_digest="sha256:abc",
            snapshot_id=sid,
            decided_at=T0 + timedelta(seconds=30),
        )
        with pytest.raises(ValueError, match="verdict"):
            ledger.record_decision(
                kind="check",
                host=None,
                seat=None,
                cards=None,
                verdict="maybe",
                reasons=[],
                inputs_digest="x",
                snapshot_id=None,
                decided_at=T0,
            )
        got = ledger.decisions(T0, T0 + timedelta(minutes=1))
        assert ledger.decisions(T0 + timedelta(minutes=1)) == []
    assert len(got) == 1
    assert got[0]["id"] == did
    assert got[0]["cards"] == [0] and got[0]["reasons"] == reasons
    assert got[0]["decided_at"] == "2026-09-16T14:00:30Z" and got[0]["snapshot_id"] == sid


def test_file_is_wal_and_marked_as_ours(tmp_path: Path) -> None:
    with open_ledger(tmp_path / "l.sqlite") as ledger:
        mode = ledger.connection.execute("PRAGMA journal_mode").fetchone()[0]
        version = ledger.connection.execute("PRAGMA user_version").fetchone()[0]
        app = ledger.connection.execute(
            "SELECT value FROM meta WHERE key='application'"
        ).fetchone()[0]
    assert (mode, version, app) == ("wal", SCHEMA_VERSION, "gpuplan")


# --- faults ---------------------------------------------------------------------------------


def test_missing_file_read_only_is_exit_3(tmp_path: Path) -> None:
    with (
        pytest.raises(LedgerError, match="no such file") as caught,
        open_ledger(tmp_path / "none.sqlite", readonly=True),
    ):
        pass
    assert caught.value.exit_code == 3
    assert not (tmp_path / "none.sqlite").exists()


@pytest.mark.parametrize("readonly", [False, True])
def test_foreign_sqlite_file_is_refused_and_left_unchanged(tmp_path: Path, readonly: bool) -> None:
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE invoices(id INTEGER PRIMARY KEY, amount INTEGER)")
        connection.execute("INSERT INTO invoices(amount) VALUES (42)")
    before = digest(path)
    with (
        pytest.raises(LedgerError, match="another application") as caught,
        open_ledger(path, readonly=readonly),
    ):
        pass
    assert caught.value.exit_code == 3
    assert str(path) in str(caught.value)
    assert digest(path) == before
    assert not Path(f"{path}-wal").exists()


def test_sqlite_file_whose_meta_names_another_application(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        connection.execute("INSERT INTO meta VALUES ('application', 'gpustat')")
    before = digest(path)
    with pytest.raises(LedgerError, match="another application"), open_ledger(path):
        pass
    assert digest(path) == before


@pytest.mark.parametrize(
    "content",
    [
        b"timestamp,host,free\n2026-09-16,fv-ml1,1871\n",
        b"SQLite format 3\x00" + bytes(range(256)) * 16,
    ],
    ids=["text-file", "corrupt-sqlite"],
)
def test_not_a_database_is_refused_and_left_unchanged(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "ledger.sqlite"
    path.write_bytes(content)
    with pytest.raises(LedgerError, match=r"ledger\.sqlite") as caught, open_ledger(path):
        pass
    assert caught.value.exit_code == 3
    assert path.read_bytes() == content


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    with open_ledger(path):
        pass
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA user_version = 99")
    with pytest.raises(LedgerError, match="newer"), open_ledger(path):
        pass


def test_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    with (
        pytest.raises(LedgerError, match="does not exist"),
        open_ledger(tmp_path / "no" / "l.sqlite"),
    ):
        pass


def test_unwritable_location_is_a_clear_error() -> None:
    # /proc takes no new files, even for root: the same failure as a read-only mount.
    with (
        pytest.raises(LedgerError, match="cannot") as caught,
        open_ledger("/proc/gpuplan-ledger.sqlite"),
    ):
        pass
    assert caught.value.exit_code == 3


def test_read_only_directory_is_a_clear_error(tmp_path: Path) -> None:
    # Root too: a ledger whose mode grants no write is read-only for everyone.
    path = tmp_path / "l.sqlite"
    with open_ledger(path) as ledger:
        ledger.append(make_snapshot())
    os.chmod(tmp_path, 0o555)
    os.chmod(path, 0o444)
    try:
        with pytest.raises(LedgerError, match=r"read-only|cannot"), open_ledger(path) as ledger:
            ledger.append(make_snapshot(minute=1))
    finally:
        os.chmod(tmp_path, 0o755)
        os.chmod(path, 0o644)


def test_read_only_ledger_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    with open_ledger(path) as ledger:
        ledger.append(make_snapshot())
    with open_ledger(path, readonly=True) as ledger:
        assert ledger.count() == 1
        with pytest.raises(LedgerError, match="read-only"):
            ledger.append(make_snapshot(minute=1))


# --- all or nothing -------------------------------------------------------------------------


@pytest.mark.parametrize("failure", [RuntimeError("disk gone"), KeyboardInterrupt()])
def test_failure_mid_insert_leaves_no_part_of_the_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: BaseException
) -> None:
    path = tmp_path / "l.sqlite"
    with open_ledger(path) as ledger:
        ledger.append(make_snapshot(minute=0))

        def explode(*args: object) -> None:
            raise failure

        # Snapshot and cards are written by now; the processes fail.
        monkeypatch.setattr(writes, "insert_processes", explode)
        with pytest.raises(type(failure)):
            ledger.append(make_snapshot(minute=1))
        monkeypatch.undo()
        assert ledger.count() == 1
        ledger.append(make_snapshot(minute=2))
    assert rows(path, "snapshots") == 2
    assert rows(path, "cards") == 16
    assert rows(path, "processes") == 32


@pytest.mark.slow
def test_writer_killed_mid_transaction_leaves_whole_snapshots(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    with open_ledger(path) as ledger:
        ledger.append(make_snapshot(minute=0))
    # A real process dies (os._exit: no cleanup, no rollback) after writing cards, before commit.
    script = textwrap.dedent(
        f"""
        import os
        from inventory.ledger import writes
        from inventory.ledger.store import open_ledger
        from tests.inventory.helpers import make_snapshot
        def die(*args):
            os._exit(9)
        writes.insert_processes = die
        with open_ledger({str(path)!r}) as ledger:
            ledger.append(make_snapshot(minute=1))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, timeout=60, check=False)
    assert done.returncode == 9
    with open_ledger(path) as ledger:
        assert ledger.count() == 1
        assert ledger.connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        ledger.append(make_snapshot(minute=1))
    assert rows(path, "cards") == 16


# --- migration ------------------------------------------------------------------------------


def test_migrates_a_version_1_file(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    # A ledger as version 1 wrote it: the agreed tables, no indexes, one snapshot.
    with sqlite3.connect(path) as connection:
        connection.executescript(MIGRATIONS[0])
        connection.execute("PRAGMA user_version = 1")
        connection.execute(
            "INSERT INTO snapshots(id, host, taken_at_s, taken_at, driver) VALUES (1, 'fv-ml1', ?, ?, '580')",
            (int(T0.timestamp()), "2026-09-16T14:00:00Z"),
        )
        connection.execute(
            "INSERT INTO cards(snapshot_id, idx, total_bytes, reserved_bytes, used_bytes, free_bytes)"
            " VALUES (1, 0, 100, 10, 30, 60)"
        )
        connection.execute("INSERT INTO processes VALUES (1, 0, 77, 30, 'python3 serve.py', NULL)")
    # A read-only open reads the old file as it is.
    with open_ledger(path, readonly=True) as ledger:
        old = ledger.latest("fv-ml1")
    assert old is not None and old.card(0).processes[0].pid == 77
    with open_ledger(path) as ledger:
        version = ledger.connection.execute("PRAGMA user_version").fetchone()[0]
        indexes = {
            r[0]
            for r in ledger.connection.execute("SELECT name FROM sqlite_master WHERE type='index'")
        }
        assert ledger.latest("fv-ml1") == old
        ledger.append(make_snapshot(minute=1))
    assert version == SCHEMA_VERSION == 8
    assert {"processes_by_snapshot", "decisions_by_time", "holds_open"} <= indexes


def test_empty_file_becomes_a_ledger(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    path.touch()
    with open_ledger(path) as ledger:
        ledger.append(make_snapshot())
    with open_ledger(path, readonly=True) as ledger:
        assert ledger.count() == 1


# --- two processes --------------------------------------------------------------------------

# The writer stops half-way until the reader has read a snapshot of the first half: the two
# overlap however the processes are scheduled, with no sleep to make it likely.
WRITER = """
import sys
from inventory.ledger.store import open_ledger
from tests.inventory.helpers import make_snapshot
count = int(sys.argv[2])
with open_ledger(sys.argv[1]) as ledger:
    for minute in range(count):
        if minute == count // 2:
            print("half", flush=True)
            sys.stdin.readline()
        ledger.append(make_snapshot(minute=minute))
print("wrote", flush=True)
"""

READER = """
import sys, time
from inventory.ledger.store import open_ledger
from tests.inventory.helpers import make_snapshot
reads = 0
told = False
deadline = time.monotonic() + 60
with open_ledger(sys.argv[1], readonly=True) as ledger:
    print("ready", flush=True)
    while time.monotonic() < deadline:
        latest = ledger.latest("fv-ml1")
        if latest is not None:
            minute = int((latest.taken_at.timestamp() - make_snapshot().taken_at.timestamp()) // 60)
            # Every snapshot read is whole and exactly what was written.
            assert latest == make_snapshot(minute=minute), minute
            for snapshot in ledger.snapshots("fv-ml1"):
                assert len(snapshot.cards) == 8 and all(len(c.processes) == 2 for c in snapshot.cards)
            reads += 1
            if minute >= 1 and not told:  # a snapshot the writer wrote, the writer still open
                print("read", flush=True)
                told = True
            if minute == int(sys.argv[2]) - 1:
                break
print("reads", reads, flush=True)
"""


@pytest.mark.slow
def test_a_writer_and_a_reader_process_neither_corrupt_nor_block(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    count = 80
    with open_ledger(path) as ledger:
        ledger.append(make_snapshot(minute=0))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    # The reader starts first and says when it is reading, so the two really overlap.
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(path), str(count)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert reader.stdout is not None
    assert reader.stdout.readline().strip() == "ready"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(count)],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None and writer.stdin is not None
    assert writer.stdout.readline().strip() == "half"
    assert reader.stdout.readline().strip() == "read"  # one the writer wrote, while it waits
    writer.stdin.write("go\n")
    writer.stdin.flush()
    w_out, w_err = writer.communicate(timeout=120)
    r_out, r_err = reader.communicate(timeout=120)
    assert writer.returncode == 0, w_err
    assert reader.returncode == 0, r_err
    assert w_out.strip() == "wrote"
    assert int(r_out.split()[-1]) > 1  # read in the first half, and again to the last minute
    with open_ledger(path, readonly=True) as ledger:
        assert ledger.count() == count
        assert ledger.connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
