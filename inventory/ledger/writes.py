"""Everything that writes the ledger: a snapshot, a decision, the demo's bulk rows, and meta labels.

One transaction per call (BEGIN IMMEDIATE), so a crash leaves a whole snapshot or none of it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, NamedTuple

from inventory.ledger.rollups import HourRollups
from inventory.ledger.schema import BUSY_TIMEOUT_MS, operational
from inventory.snapshot import Snapshot, format_utc

DECISION_KINDS = ("plan", "check")
VERDICTS = ("pass", "refuse", "unknown")


def seconds(moment: datetime) -> int:
    """Unix seconds of an aware time: the ledger's key for snapshots and decisions."""
    if moment.tzinfo is None:
        raise ValueError("ledger times need a timezone (UTC)")
    return int(moment.timestamp())


@contextmanager
def transaction(
    connection: sqlite3.Connection, path: str, busy_ms: int = BUSY_TIMEOUT_MS
) -> Iterator[sqlite3.Cursor]:
    """A cursor inside BEGIN IMMEDIATE … COMMIT; any exception rolls the whole of it back.

    `busy_ms`: how long BEGIN waits for another writer before the ledger is called busy.
    """
    # BEGIN IMMEDIATE takes the write lock up front (waiting up to busy_timeout), so a
    # snapshot is never half-written and readers in WAL mode keep reading meanwhile.
    cursor = connection.cursor()
    try:
        if busy_ms != BUSY_TIMEOUT_MS:
            cursor.execute(f"PRAGMA busy_timeout = {int(busy_ms)}")
        cursor.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        raise operational(path, exc, busy_ms) from exc
    finally:
        if busy_ms != BUSY_TIMEOUT_MS:
            cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    try:
        yield cursor
    except sqlite3.OperationalError as exc:
        # A full disk can strike at any insert, not only at COMMIT: still exit 3, said plainly.
        connection.rollback()
        raise operational(path, exc) from exc
    except BaseException:
        # KeyboardInterrupt too: the snapshot in flight is discarded, never half-stored.
        connection.rollback()
        raise
    try:
        cursor.execute("COMMIT")
    except sqlite3.OperationalError as exc:
        connection.rollback()
        raise operational(path, exc) from exc


def existing_snapshot(cursor: sqlite3.Cursor, snapshot: Snapshot) -> int | None:
    """The id of the stored snapshot of the same host and second, None when there is none."""
    row = cursor.execute(
        "SELECT id FROM snapshots WHERE host = ? AND taken_at_s = ?",
        (snapshot.host, seconds(snapshot.taken_at)),
    ).fetchone()
    return None if row is None else int(row[0])


def insert_snapshot(
    cursor: sqlite3.Cursor, snapshot: Snapshot, arrived_at: datetime | None = None
) -> int:
    """Insert one snapshot with its cards and processes, and fold it into the hourly rollups
    (`insert_bulk` of its rows); return its new id. `arrived_at`: when it reached the ledger,
    for a live reading (None for an imported file)."""
    return _insert_rows(cursor, [values_of(snapshot, arrived_at)]).start


def insert_processes(cursor: sqlite3.Cursor, rows: list[tuple[object, ...]]) -> None:
    """Process rows, each led by its snapshot's id (after the snapshot and card rows, before the
    rollups)."""
    cursor.executemany(_PROCESS_INSERT, rows)


_CARD_INSERT = (
    "INSERT INTO cards(snapshot_id, idx, uuid, name, total_bytes, reserved_bytes, used_bytes,"
    " free_bytes, utilization_percent, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_PROCESS_INSERT = (
    "INSERT INTO processes(snapshot_id, card_idx, pid, used_bytes, cmdline, seat, parents)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)"
)


def parents_text(parents: Sequence[str]) -> str | None:
    """A process's ancestors' lines as the `parents` column stores them: a JSON list, or NULL."""
    return json.dumps(list(parents)) if parents else None


def parents_from_text(text: str | None) -> tuple[str, ...]:
    """The ancestors' lines a `parents` column holds (`parents_text`'s JSON list); () for NULL or ''."""
    return tuple(json.loads(text)) if text else ()


def insert_decision(
    cursor: sqlite3.Cursor,
    *,
    kind: str,
    host: str | None,
    seat: str | None,
    cards: Sequence[int] | None,
    verdict: str,
    reasons: Sequence[dict[str, Any]],
    inputs_digest: str,
    snapshot_id: int | None,
    decided_at: datetime,
) -> int:
    """Insert one plan/check verdict with its reasons (DESIGN.md reason objects); return its id."""
    if kind not in DECISION_KINDS:
        raise ValueError(f"decision kind {kind!r} is not one of {DECISION_KINDS}")
    if verdict not in VERDICTS:
        raise ValueError(f"verdict {verdict!r} is not one of {VERDICTS}")
    cursor.execute(
        "INSERT INTO decisions(decided_at_s, decided_at, kind, host, seat, cards, verdict, reasons,"
        " inputs_digest, snapshot_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            seconds(decided_at),
            format_utc(decided_at),
            kind,
            host,
            seat,
            None if cards is None else json.dumps(list(cards)),
            verdict,
            json.dumps(list(reasons)),
            inputs_digest,
            snapshot_id,
        ),
    )
    return int(cursor.lastrowid or 0)


# --- bulk rows ---------------------------------------------------------------------------


class CardValues(NamedTuple):
    """One card reading as the `cards` table stores it, without its snapshot id."""

    idx: int
    uuid: str | None
    name: str | None
    total_bytes: int | None
    reserved_bytes: int | None
    used_bytes: int | None
    free_bytes: int | None
    utilization_percent: int | None
    error: str | None


class ProcessValues(NamedTuple):
    """One process reading as the `processes` table stores it, without its snapshot id."""

    card_idx: int
    pid: int
    used_bytes: int | None
    cmdline: str | None
    seat: str | None
    parents: str | None = None  # parents_text() of the ancestors' lines


class SnapshotValues(NamedTuple):
    """One snapshot's rows, ready to insert: what a generator of many snapshots yields."""

    host: str
    taken_at: datetime
    driver: str | None
    nvml_version: str | None
    cards: Sequence[CardValues]
    processes: Sequence[ProcessValues]
    arrived_at: datetime | None = None  # a live reading's arrival; None: generated or imported


def values_of(snapshot: Snapshot, arrived_at: datetime | None = None) -> SnapshotValues:
    """A validated snapshot as the plain rows `insert_bulk` takes."""
    return SnapshotValues(
        snapshot.host,
        snapshot.taken_at,
        snapshot.driver,
        snapshot.nvml_version,
        [
            CardValues(
                c.index,
                c.uuid,
                c.name,
                c.total_bytes,
                c.reserved_bytes,
                c.used_bytes,
                c.free_bytes,
                c.utilization_percent,
                c.error,
            )
            for c in snapshot.cards
        ],
        [
            ProcessValues(c.index, p.pid, p.used_bytes, p.cmdline, p.seat, parents_text(p.parents))
            for c in snapshot.cards
            for p in c.processes
        ],
        arrived_at,
    )


def insert_bulk(cursor: sqlite3.Cursor, readings: Iterable[SnapshotValues]) -> int:
    """Insert many snapshots as plain rows into a ledger that holds none of their (host, second),
    and fold them into the hourly rollups.

    Three `executemany` calls in all, and one upsert per rollup row: building a pydantic
    snapshot per minute of a generated week would cost more than the whole insert. Returns how
    many snapshots went in.
    """
    return len(_insert_rows(cursor, readings))


def _insert_rows(cursor: sqlite3.Cursor, readings: Iterable[SnapshotValues]) -> range:
    """`insert_bulk`'s inserts; the ids the snapshots were given, in order."""
    next_id = int(cursor.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM snapshots").fetchone()[0])
    first = next_id
    snapshot_rows: list[tuple[object, ...]] = []
    card_rows: list[tuple[object, ...]] = []
    process_rows: list[tuple[object, ...]] = []
    rollups = HourRollups.empty()
    for reading in readings:
        sid = next_id
        next_id += 1
        moment = reading.taken_at
        taken_s = seconds(moment)
        arrived = None if reading.arrived_at is None else seconds(reading.arrived_at)
        snapshot_rows.append(
            (
                sid,
                reading.host,
                taken_s,
                format_utc(moment),
                reading.driver,
                reading.nvml_version,
                arrived,
            )
        )
        card_rows += [(sid, *card) for card in reading.cards]
        process_rows += [(sid, *process) for process in reading.processes]
        rollups.add(
            reading.host,
            taken_s,
            ((c.idx, c.used_bytes, c.free_bytes, c.error) for c in reading.cards),
            ((p.card_idx, p.used_bytes, p.cmdline, p.seat) for p in reading.processes),
        )
    cursor.executemany(
        "INSERT INTO snapshots(id, host, taken_at_s, taken_at, driver, nvml_version, arrived_at_s)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        snapshot_rows,
    )
    cursor.executemany(_CARD_INSERT, card_rows)
    insert_processes(cursor, process_rows)
    rollups.write(cursor)
    return range(first, next_id)


def insert_new(cursor: sqlite3.Cursor, readings: Sequence[SnapshotValues]) -> int:
    """`insert_bulk` of those `readings` whose (host, second) the ledger does not hold yet (the
    first of equals in `readings`); return how many went in."""
    stored: set[tuple[str, int]] = set()
    by_host: dict[str, list[int]] = {}
    for reading in readings:
        by_host.setdefault(reading.host, []).append(seconds(reading.taken_at))
    for host, times in by_host.items():
        stored.update(
            (host, int(t))
            for (t,) in cursor.execute(
                "SELECT taken_at_s FROM snapshots WHERE host = ? AND taken_at_s BETWEEN ? AND ?",
                (host, min(times), max(times)),
            )
        )
    fresh: list[SnapshotValues] = []
    for reading in readings:
        key = (reading.host, seconds(reading.taken_at))
        if key not in stored:
            stored.add(key)
            fresh.append(reading)
    return insert_bulk(cursor, fresh)


# --- meta and file housekeeping ----------------------------------------------------------


def set_meta(connection: sqlite3.Connection, key: str, value: str) -> None:
    """Set one `meta` entry (e.g. `demo`, the label of a ledger of invented data)."""
    connection.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))


def fold_wal(connection: sqlite3.Connection) -> None:
    """Fold the write-ahead log into the file and leave WAL mode: one file holds the whole ledger."""
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.execute("PRAGMA journal_mode = DELETE")
