"""Holds in the ledger: recorded in one transaction, active until seen, expired or released."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from inventory.holds import Hold, short_time
from inventory.ledger.store import MIGRATIONS, open_ledger
from inventory.snapshot import Process, Snapshot
from tests.inventory.helpers import GIB, T0, make_snapshot

ROOT = Path(__file__).resolve().parents[3]


def hold(seat: str, *, cards: tuple[int, ...] = (1,), minute: int = 0, for_min: int = 30) -> Hold:
    created = T0 + timedelta(minutes=minute)
    return Hold(
        seat=seat,
        host="fv-ml1",
        cards=cards,
        need_bytes=3 * GIB,
        created_at=created,
        expires_at=created + timedelta(minutes=for_min),
        user="ci-deploy",
    )


def record(path: Path, *holds: Hold) -> None:
    with open_ledger(path) as ledger, ledger.approving(holds[0].created_at) as approval:
        approval.hold(holds)


def with_seat_on(snapshot: Snapshot, seat: str, cards: tuple[int, ...]) -> Snapshot:
    """`snapshot` with a process of `seat` added on each of `cards`."""
    changed = []
    for card in snapshot.cards:
        if card.index in cards:
            extra = Process(pid=9000 + card.index, used_bytes=GIB, cmdline="tts", seat=seat)
            card = card.model_copy(update={"processes": (*card.processes, extra)})
        changed.append(card)
    return snapshot.model_copy(update={"cards": tuple(changed)})


def test_a_recorded_hold_is_active_until_it_expires(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    record(path, hold("tts-a", cards=(1, 2)))
    with open_ledger(path, readonly=True) as ledger:
        at_start = ledger.holds(T0)
        just_before = ledger.holds(T0 + timedelta(minutes=29, seconds=59))
        at_expiry = ledger.holds(T0 + timedelta(minutes=30))
    assert at_start == just_before == [hold("tts-a", cards=(1, 2))]
    assert at_expiry == []
    assert at_start[0].to_json() == {
        "seat": "tts-a",
        "host": "fv-ml1",
        "cards": [1, 2],
        "need_bytes": 3 * GIB,
        "requested_bytes": 0,
        "created_at": "2026-09-16T14:00:00Z",
        "expires_at": "2026-09-16T14:30:00Z",
        "user": "ci-deploy",
    }
    assert short_time(at_start[0].expires_at) == "14:30Z"


def test_seeing_the_seat_on_every_card_ends_the_hold(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    record(path, hold("tts-a", cards=(1, 2), minute=1))
    base = make_snapshot(cards=4, processes=1)
    with open_ledger(path) as ledger:
        # Before the hold: its seat on both cards does not count (it may be an older deploy).
        ledger.append(with_seat_on(base, "tts-a", (1, 2)))
        assert len(ledger.holds(T0 + timedelta(minutes=2))) == 1
        # After it, on one card of two: still starting, still held.
        later = base.model_copy(update={"taken_at": T0 + timedelta(minutes=2)})
        ledger.append(with_seat_on(later, "tts-a", (1,)))
        assert len(ledger.holds(T0 + timedelta(minutes=3))) == 1
        # On both: its bytes are now counted once, as used.
        last = base.model_copy(update={"taken_at": T0 + timedelta(minutes=3)})
        ledger.append(with_seat_on(last, "tts-a", (1, 2)))
        assert ledger.holds(T0 + timedelta(minutes=4)) == []
        assert (
            ledger.holds_expired_unseen(T0, T0 + timedelta(hours=1), T0 + timedelta(hours=1)) == []
        )


def test_a_new_check_of_the_seat_replaces_its_hold(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    record(path, hold("tts-a", cards=(1,)))
    record(path, hold("tts-a", cards=(2,), minute=5))
    with open_ledger(path, readonly=True) as ledger:
        active = ledger.holds(T0 + timedelta(minutes=6))
    assert [(h.seat, h.cards) for h in active] == [("tts-a", (2,))]


def test_release_ends_one_seat_and_says_how_many(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    record(path, hold("tts-a"), hold("tts-b", cards=(2,)))
    with open_ledger(path) as ledger:
        assert ledger.release("tts-a", T0 + timedelta(minutes=1)) == 1
        assert ledger.release("tts-a", T0 + timedelta(minutes=1)) == 0
        assert [h.seat for h in ledger.holds(T0 + timedelta(minutes=1))] == ["tts-b"]


def test_expired_unseen_lists_approvals_never_deployed(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    record(path, hold("never"), hold("deployed", cards=(2,)))
    base = make_snapshot(cards=4, processes=0)
    later = base.model_copy(update={"taken_at": T0 + timedelta(minutes=1)})
    with open_ledger(path) as ledger:
        ledger.append(with_seat_on(later, "deployed", (2,)))
        # A later approval settles the ended holds; the listing does not depend on it.
        with ledger.approving(T0 + timedelta(hours=2)) as approval:
            assert approval.holds == []
        unseen = ledger.holds_expired_unseen(T0, T0 + timedelta(days=1), T0 + timedelta(days=1))
    assert [h.seat for h in unseen] == ["never"]


def test_a_version_2_ledger_migrates_and_a_read_only_open_has_no_holds(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as connection:
        connection.executescript(MIGRATIONS[0] + MIGRATIONS[1])
        connection.execute("PRAGMA user_version = 2")
    with open_ledger(path, readonly=True) as ledger:
        assert ledger.holds(T0) == []
    record(path, hold("tts-a"))
    with open_ledger(path, readonly=True) as ledger:
        assert [h.seat for h in ledger.holds(T0)] == ["tts-a"]


_RACER = textwrap.dedent(
    """
    import sys
    from datetime import UTC, datetime, timedelta
    from inventory.holds import Hold
    from inventory.ledger.store import open_ledger

    path, seat = sys.argv[1], sys.argv[2]
    print("ready", flush=True)
    sys.stdin.readline()  # the go: every racer has started and imported by now
    now = datetime(2026, 9, 16, 14, 0, tzinfo=UTC)
    room = 5_981_102_080  # card 1's free bytes on fv-ml1: one 3 GiB seat fits, two do not
    need = 3 * 2**30
    with open_ledger(path) as ledger, ledger.approving(now) as approval:
        held = sum(h.need_bytes for h in approval.holds if 1 in h.cards)
        if held + need <= room:
            approval.hold([Hold(seat, "fv-ml1", (1,), need, now, now + timedelta(minutes=30), "ci")])
            print("pass")
        else:
            print("refuse")
    """
)


@pytest.mark.slow
def test_concurrent_approvals_serialise(tmp_path: Path) -> None:
    for round_ in range(3):
        path = tmp_path / f"race-{round_}.sqlite"
        if round_ < 2:  # the last round: eight first writers create the ledger together
            with open_ledger(path):
                pass
        racers = [
            subprocess.Popen(
                [sys.executable, "-c", _RACER, str(path), f"seat-{n}"],
                cwd=ROOT,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for n in range(8)
        ]
        # Each racer says it is ready, then waits for one line: all eight are let go together.
        assert [racer.stdout.readline() for racer in racers] == ["ready\n"] * 8  # type: ignore[union-attr]
        for racer in racers:
            racer.stdin.write("go\n")  # type: ignore[union-attr]
            racer.stdin.flush()  # type: ignore[union-attr]
        verdicts = [racer.communicate(timeout=60)[0].strip() for racer in racers]
        assert sorted(verdicts) == ["pass"] + ["refuse"] * 7


def test_a_hold_needs_cards_on_a_card_row(tmp_path: Path) -> None:
    # Cards are rows, so a listing gives them back in order whatever order they were given in.
    path = tmp_path / "l.sqlite"
    record(path, hold("tts-a", cards=(3, 0, 3)))
    with open_ledger(path, readonly=True) as ledger:
        assert ledger.holds(T0)[0].cards == (0, 3)


def test_a_hold_keeps_its_gate_request_and_a_version_4_ledger_migrates_in_place(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v4.sqlite"
    # A ledger as version 4 wrote it, with one open hold (no requested_bytes column yet).
    with sqlite3.connect(path) as connection:
        for step in MIGRATIONS[:3]:
            assert isinstance(step, str)
            connection.executescript(step)
        connection.execute("PRAGMA user_version = 4")
        connection.execute(
            "INSERT INTO holds(id, seat, host, need_bytes, created_at_s, expires_at_s, user)"
            " VALUES (1, 'old', 'fv-ml1', 100, ?, ?, 'ops')",
            (int(T0.timestamp()), int((T0 + timedelta(hours=1)).timestamp())),
        )
        connection.execute("INSERT INTO hold_cards VALUES (1, 2)")
    # Read-only, the old file reads as it is: the old hold's request is unknown, so 0.
    with open_ledger(path, readonly=True) as ledger:
        assert [(h.seat, h.requested_bytes) for h in ledger.holds(T0)] == [("old", 0)]
    new = replace(hold("svc-a"), requested_bytes=47_284_612_301)
    record(path, new)
    with open_ledger(path, readonly=True) as ledger:
        found = {h.seat: h for h in ledger.holds(T0)}
        version = ledger.connection.execute("PRAGMA user_version").fetchone()[0]
    assert version == len(MIGRATIONS)  # migrated to the newest
    assert found["old"].requested_bytes == 0 and found["old"].cards == (2,)
    assert found["svc-a"].requested_bytes == 47_284_612_301
    assert found["svc-a"].to_json()["requested_bytes"] == 47_284_612_301


def test_a_refusal_names_a_hold_ending_another_day_with_its_date() -> None:
    same_day = hold("tts-a")
    assert same_day.note() == "approved for tts-a at 14:00Z by ci-deploy, until 14:30Z"
    two_days = replace(same_day, expires_at=same_day.created_at + timedelta(days=2))
    assert two_days.note() == "approved for tts-a at 14:00Z by ci-deploy, until 2026-09-18 14:00Z"
