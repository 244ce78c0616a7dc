"""`check --ledger` judges on the snapshot it reads inside its write transaction.

fv-ml1's card 1 has 5,704 MiB free: one 3 GiB seat fits, two do not. tts-0 is approved (a hold
on card 1); then, while a second process holds the ledger's write lock, a snapshot that shows
tts-0 running there is stored (ending its hold). A check of tts-1 that read the older snapshot
before it waited for the lock judged on bytes that were free there, with the hold gone: a
second approval of the same bytes. Deterministic: the check tells the lock holder to store the
snapshot only once it has read the older one and is about to ask for the lock.
"""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from inventory.ledger.store import Approval, Ledger, open_ledger
from inventory.snapshot import Process, Snapshot, format_utc, load_snapshot, save_snapshot
from placement.cli.main import main
from seats.errors import Exit
from tests.placement.cli.test_check_holds import TAKEN, at, catalogue

__all__ = ["catalogue"]  # the fixture, used by name below

ROOT = Path(__file__).resolve().parents[3]
SNAPSHOT = ROOT / "seats/catalogue/fv-ml1.snapshot.json"
GIB = 2**30

HOLDER = """
import sys
from inventory.ledger.store import open_ledger
from inventory.snapshot import load_snapshot

started = load_snapshot(sys.argv[2])
with open_ledger(sys.argv[1]) as ledger, ledger.approving(started.taken_at) as approval:
    print("locked", flush=True)
    sys.stdin.readline()
    approval.append(started)
print("stored", flush=True)
"""


def _started(seat: str, minutes: int) -> Snapshot:
    """The example `minutes` after it was taken, with `seat` running on card 1 (3 GiB)."""
    base = load_snapshot(SNAPSHOT)
    cards = list(base.cards)
    card = cards[1]
    assert card.used_bytes is not None and card.free_bytes is not None
    process = Process(pid=9001, used_bytes=3 * GIB, cmdline=f"{seat}-server", seat=seat)
    cards[1] = card.model_copy(
        update={
            "used_bytes": card.used_bytes + 3 * GIB,
            "free_bytes": card.free_bytes - 3 * GIB,
            "processes": (*card.processes, process),
        }
    )
    return base.model_copy(
        update={"taken_at": base.taken_at + timedelta(minutes=minutes), "cards": tuple(cards)}
    )


def _check(catalogue: Path, db: Path, seat: str) -> list[str]:
    return [
        "check",
        seat,
        "--gpu",
        "1",
        "--catalogue",
        str(catalogue),
        "--ledger",
        str(db),
        "--json",
    ]


@pytest.mark.slow
def test_a_snapshot_stored_while_the_check_waits_is_the_one_judged(
    catalogue: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = tmp_path / "ledger.sqlite"
    started = tmp_path / "started.json"
    save_snapshot(_started("tts-0", 2), started)
    assert main(["snapshot", "--from", str(SNAPSHOT), "--ledger", str(db)]) == 0
    assert main(_check(catalogue, db, "tts-0")) == Exit.OK  # approved: a hold on card 1
    capsys.readouterr()

    lock = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db), str(started)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert lock.stdout is not None and lock.stdin is not None
        assert lock.stdout.readline().strip() == "locked"
        original = Ledger.approving
        asked: list[datetime] = []

        def approving(self: Ledger, now: datetime) -> AbstractContextManager[Approval]:
            # The check has read its snapshot and now asks for the lock: the snapshot that
            # shows tts-0 started is stored while it waits.
            if not asked:
                assert lock.stdin is not None
                lock.stdin.write("go\n")
                lock.stdin.flush()
            asked.append(now)
            return original(self, now)

        monkeypatch.setattr(Ledger, "approving", approving)
        at(monkeypatch, minutes=3)
        code = main(_check(catalogue, db, "tts-1"))
        assert lock.wait(timeout=30) == 0
        assert lock.stdout.readline().strip() == "stored"
    finally:
        if lock.poll() is None:
            lock.kill()
            lock.wait()
    out = capsys.readouterr().out
    assert asked, "the check never asked for the write lock"
    assert code == Exit.REFUSED, out
    assert '"verdict": "refuse"' in out
    assert TAKEN + timedelta(minutes=2) == load_snapshot(started).taken_at
    # Judged on that snapshot, the one stored while it waited, not the one it read first.
    assert json.loads(out)["snapshot"]["taken_at"] == format_utc(TAKEN + timedelta(minutes=2))
    with open_ledger(db, readonly=True) as ledger:
        holds = ledger.holds(TAKEN + timedelta(minutes=3))
        decisions = ledger.decisions()
    assert [h.seat for h in holds] == []  # tts-0 was seen; tts-1 holds nothing
    assert [d["verdict"] for d in decisions] == ["pass", "refuse"]
