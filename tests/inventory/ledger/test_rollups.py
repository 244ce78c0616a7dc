"""The ledger's stored hourly rollups: written in each snapshot's transaction, built once for an
older ledger, masked again with its command lines, kept by `compact`, and always equal to
`rollup.hourly` of the moments they sum (the demo ledger and random ledgers)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inventory.history import CardHour, CommandHour
from inventory.history.ledger import LedgerHistory
from inventory.history.rollup import hourly
from inventory.ledger.store import MIGRATIONS, open_ledger
from inventory.ledger.writes import values_of
from inventory.snapshot import Card, Process, Snapshot
from placement.report.demo import plan_story, write_demo
from seats.model import Catalogue

GIB = 2**30
TOTAL = 100 * GIB
T0 = datetime(2026, 9, 16, 13, 0, tzinfo=UTC)
SERVE = "vllm serve m --port 8000"


def shot(
    minute: int, used: tuple[int, ...], *, host: str = "h1", error: int | None = None
) -> Snapshot:
    """A snapshot `minute` minutes after 13:00 whose card i holds `used[i]` GiB in one process."""
    cards = []
    for index, gib in enumerate(used):
        if index == error:
            cards.append(Card(index=index, error="GpuIsLost"))
            continue
        process = Process(pid=100 + index, used_bytes=gib * GIB, cmdline=SERVE, seat="a")
        cards.append(
            Card(
                index=index,
                total_bytes=TOTAL,
                reserved_bytes=0,
                used_bytes=gib * GIB,
                free_bytes=TOTAL - gib * GIB,
                processes=(process,) if gib else (),
            )
        )
    return Snapshot(host=host, taken_at=T0 + timedelta(minutes=minute), cards=tuple(cards))


def at(minute: int) -> datetime:
    return T0 + timedelta(minutes=minute)


def test_each_write_folds_its_snapshot_into_the_hour_in_any_order(tmp_path: Path) -> None:
    with open_ledger(tmp_path / "l.sqlite") as ledger:
        # Out of order, through three writers: one at a time, a batch, an import batch.
        ledger.store(shot(50, (30, 5)))
        ledger.append_many([shot(10, (20, 5)), shot(70, (25, 5), error=1)])
        ledger.import_rows([values_of(shot(30, (30, 7))), values_of(shot(10, (99, 99)))])
        history = LedgerHistory(ledger.connection)
        rollups = history.rollups("h1", T0, at(120))
        # The import's second 13:10 snapshot was already stored: it is not counted twice.
        assert rollups == hourly(history.moments("h1", T0, at(120)))
    fourteen = at(60)
    assert rollups.cards == (
        # 13:00: 20, 30, 30 GiB at 13:10, 13:30, 13:50: the lowest free first reached at 13:30.
        CardHour("h1", 0, T0, 3, 0, TOTAL - 30 * GIB, at(30), 30 * GIB),
        CardHour("h1", 1, T0, 3, 0, TOTAL - 7 * GIB, at(30), 7 * GIB),
        CardHour("h1", 0, fourteen, 1, 0, TOTAL - 25 * GIB, at(70), 25 * GIB),
        CardHour("h1", 1, fourteen, 0, 1, None, None, None),
    )
    assert rollups.commands == (
        CommandHour("h1", 0, T0, "a", SERVE, 3, 20 * GIB, at(10), 30 * GIB, at(30)),
        CommandHour("h1", 1, T0, "a", SERVE, 3, 5 * GIB, at(10), 7 * GIB, at(30)),
        CommandHour("h1", 0, fourteen, "a", SERVE, 1, 25 * GIB, at(70), 25 * GIB, at(70)),
    )


def test_a_window_cut_mid_hour_sums_only_its_own_moments(tmp_path: Path) -> None:
    with open_ledger(tmp_path / "l.sqlite") as ledger:
        ledger.append_many(shot(m, (m % 7 + 1,)) for m in range(0, 180, 5))
        history = LedgerHistory(ledger.connection)
        for start, end in ((17, 133), (0, 180), (61, 62), (20, 50), (60, 120), (119, 121)):
            expected = hourly(history.moments("h1", at(start), at(end)))
            assert history.rollups("h1", at(start), at(end)) == expected, (start, end)
        assert history.rollups("h1", at(40), at(40)).cards == ()


@pytest.mark.slow
def test_the_demo_ledgers_stored_rollups_equal_hourly_of_its_moments(
    tmp_path: Path, fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot
) -> None:
    story = plan_story(fv_ml1, fv_ml1_snapshot, end=fv_ml1_snapshot.taken_at, days=2)
    with open_ledger(tmp_path / "demo.sqlite") as ledger:
        write_demo(ledger, fv_ml1, fv_ml1_snapshot, story, seed=3)
        history = LedgerHistory(ledger.connection)
        end = fv_ml1_snapshot.taken_at + timedelta(minutes=1)
        start = end - timedelta(days=2, hours=1)
        stored = history.rollups("fv-ml1", start, end)
        assert stored == hourly(history.moments("fv-ml1", start, end))
    assert len(stored.cards) == 49 * 4 and len(stored.commands) > 49 * 4


# --- random ledgers --------------------------------------------------------------------------

LINES = ("vllm serve a", "python notebook.py", "ollama serve", "")
_process = st.tuples(st.sampled_from(LINES), st.sampled_from(("a", "b", None)), st.integers(0, 3))
_card = st.one_of(st.none(), st.lists(_process, max_size=3))  # None: the card is in error
_moment = st.tuples(
    st.sampled_from(("h1", "h2")), st.integers(0, 5 * 60), st.lists(_card, min_size=2, max_size=2)
)


def random_snapshot(
    host: str, minute: int, cards: list[list[tuple[str, str | None, int]] | None]
) -> Snapshot:
    built = []
    for index, processes in enumerate(cards):
        if processes is None:
            built.append(Card(index=index, error="GpuIsLost"))
            continue
        listed = tuple(
            Process(pid=10 * n + index, used_bytes=gib * GIB, cmdline=line or None, seat=seat)
            for n, (line, seat, gib) in enumerate(processes)
        )
        used = sum(p.used_bytes or 0 for p in listed)
        built.append(
            Card(index=index, total_bytes=TOTAL, reserved_bytes=0, used_bytes=used,
                 free_bytes=TOTAL - used, processes=listed)
        )  # fmt: skip
    return Snapshot(host=host, taken_at=at(minute), cards=tuple(built))


@pytest.mark.slow
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    moments=st.lists(_moment, min_size=1, max_size=25),
    writer=st.lists(st.sampled_from(("store", "batch", "import")), min_size=25, max_size=25),
    window=st.tuples(st.integers(-30, 330), st.integers(-30, 330)),
    cut=st.one_of(st.none(), st.integers(0, 5)),
)
def test_random_ledgers_store_rollups_equal_hourly_of_their_moments(
    tmp_path_factory: pytest.TempPathFactory,
    moments: list[tuple[str, int, list[list[tuple[str, str | None, int]] | None]]],
    writer: list[str],
    window: tuple[int, int],
    cut: int | None,
) -> None:
    path = tmp_path_factory.mktemp("random") / "l.sqlite"
    snapshots = [random_snapshot(*m) for m in moments]
    with open_ledger(path) as ledger:
        for snapshot, how in zip(snapshots, writer, strict=False):
            if how == "store":
                ledger.store(snapshot)
            elif how == "batch":
                ledger.append_many([snapshot])
            else:
                ledger.import_rows([values_of(snapshot)])
        history = LedgerHistory(ledger.connection)
        start, end = sorted(window)
        whole = {host: hourly(history.moments(host, at(-60), at(400))) for host in ("h1", "h2")}
        for host in ("h1", "h2"):
            assert history.rollups(host, at(-60), at(400)) == whole[host]
            assert history.rollups(host, at(start), at(end)) == hourly(
                history.moments(host, at(start), at(end))
            )
        if cut is None:
            return
        # After a compaction the whole hours keep the same rollups, the raw moments are gone.
        ledger.compact(at(cut * 60))
        history = LedgerHistory(ledger.connection)
        for host in ("h1", "h2"):
            assert history.rollups(host, at(-60), at(400)) == whole[host]
            assert all(m.taken_at >= at(cut * 60) for m in history.moments(host, at(-60), at(400)))


# --- an older ledger, re-masking, compaction ---------------------------------------------------


def old_ledger(path: Path, snapshots: list[Snapshot]) -> None:
    """A ledger at schema 6 (before rollups) holding `snapshots`."""
    with sqlite3.connect(path) as connection:
        for step in MIGRATIONS[:6]:
            if isinstance(step, str):
                connection.executescript(step)
        connection.execute("PRAGMA user_version = 6")
        connection.execute("INSERT INTO meta(key, value) VALUES ('masking', '3')")
        for sid, snapshot in enumerate(snapshots, start=1):
            connection.execute(
                "INSERT INTO snapshots(id, host, taken_at_s, taken_at) VALUES (?, ?, ?, 'x')",
                (sid, snapshot.host, int(snapshot.taken_at.timestamp())),
            )
            for card in snapshot.cards:
                connection.execute(
                    "INSERT INTO cards(snapshot_id, idx, total_bytes, reserved_bytes, used_bytes,"
                    " free_bytes, error) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (sid, card.index, card.total_bytes, card.reserved_bytes, card.used_bytes,
                     card.free_bytes, card.error),
                )  # fmt: skip
                for p in card.processes:
                    connection.execute(
                        "INSERT INTO processes(snapshot_id, card_idx, pid, used_bytes, cmdline, seat)"
                        " VALUES (?, ?, ?, ?, ?, ?)",
                        (sid, card.index, p.pid, p.used_bytes, p.cmdline, p.seat),
                    )


def test_an_older_ledger_builds_its_rollups_once_in_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "old.sqlite"
    old_ledger(path, [shot(m, (m // 10 % 5 + 1, 3)) for m in range(0, 120, 10)])
    with open_ledger(path) as ledger:
        history = LedgerHistory(ledger.connection)
        rollups = history.rollups("h1", T0, at(120))
        assert rollups == hourly(history.moments("h1", T0, at(120)))
    assert len(rollups.cards) == 4 and rollups.cards[0] == CardHour(
        "h1", 0, T0, 6, 0, TOTAL - 5 * GIB, at(40), 5 * GIB
    )
    assert capsys.readouterr().err == (
        f"ledger {path}: schema 8: built the hourly rollups of 12 stored snapshot(s): "
        "4 card-hour(s), 4 command-hour(s)\n"
    )
    with open_ledger(path):
        pass
    assert capsys.readouterr().err == ""  # once


def test_a_new_masking_rule_masks_the_rollups_command_lines_too(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    with open_ledger(path) as ledger:
        ledger.append_many(shot(m, (4,)) for m in (0, 30, 70))
        ledger.compact(at(60))  # 13:00 is rollups only, 14:00 is raw
    leaked = "vllm serve m --api-key sk-live-0123456789"
    with sqlite3.connect(path) as connection:
        # As an older rule left them: the secret in the raw rows and in both hours' rollups.
        connection.execute("UPDATE processes SET cmdline = ?", (leaked,))
        connection.execute("UPDATE command_hours SET cmdline = ?", (leaked,))
        connection.execute("UPDATE meta SET value = '2' WHERE key = 'masking'")
    with open_ledger(path) as ledger:
        lines = ledger.connection.execute(
            "SELECT hour_s, cmdline, samples FROM command_hours ORDER BY hour_s"
        ).fetchall()
    masked = "vllm serve m --api-key ***"
    assert lines == [(int(T0.timestamp()), masked, 2), (int(at(60).timestamp()), masked, 1)]


def test_compact_keeps_whole_hours_as_rollups_and_says_where_raw_begins(tmp_path: Path) -> None:
    with open_ledger(tmp_path / "l.sqlite") as ledger:
        ledger.append_many(shot(m, (m // 10 + 1,)) for m in range(0, 180, 10))
        history = LedgerHistory(ledger.connection)
        before = history.rollups("h1", T0, at(180))
        assert history.raw_since("h1") is None
        # 14:59 is rounded down to 14:00: the whole 13:00 hour loses its raw moments.
        done = ledger.compact(at(119))
        assert [(d.host, d.removed, d.kept) for d in done] == [("h1", 6, 12)]
        assert history.raw_since("h1") == at(60) == ledger.raw_since("h1")
        assert history.rollups("h1", T0, at(180)) == before
        assert [m.taken_at for m in history.moments("h1", T0, at(70))] == [at(60)]
        # A window starting mid-hour in the compacted part gets that whole hour's bounds.
        assert history.rollups("h1", at(25), at(60)).cards == before.cards[:1]
        assert ledger.compact(at(119)) == []  # nothing older left


def test_building_and_compacting_say_how_far_they_got(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from inventory.ledger import rollups

    monkeypatch.setattr(rollups, "CHUNK_SNAPSHOTS", 5)
    path = tmp_path / "old.sqlite"
    old_ledger(path, [shot(m, (2,)) for m in range(12)])
    said: list[str] = []
    with open_ledger(path) as ledger:
        prefix = f"ledger {path}: schema 8: "
        assert capsys.readouterr().err.splitlines() == [
            f"{prefix}building hourly rollups: 5 of 12 snapshots",
            f"{prefix}building hourly rollups: 10 of 12 snapshots",
            f"{prefix}built the hourly rollups of 12 stored snapshot(s): 1 card-hour(s), "
            "1 command-hour(s)",
        ]
        done = ledger.compact(at(60), said.append)
    assert [d.removed for d in done] == [12]
    assert said == [
        "h1: removed 5 of 12 raw moments",
        "h1: removed 10 of 12 raw moments",
        "giving the freed pages back to the file system (VACUUM)",
    ]
