"""The ledger: an SQLite history of snapshots and of every plan/check decision.

WAL mode so a poller and readers never block each other beyond a short retry; one
transaction per snapshot so a crash leaves the whole snapshot or none of it.
"""

from __future__ import annotations

import gc
import json
import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from pydantic import BaseModel

from inventory.snapshot import SCHEMA_VERSION as SNAPSHOT_SCHEMA
from inventory.snapshot import Card, Process, Snapshot, format_utc
from seats.errors import CannotDecideError

APPLICATION = "gpuplan"
SQLITE_HEADER = b"SQLite format 3\x00"
BUSY_TIMEOUT_MS = 5000
DECISION_KINDS = ("plan", "check")
VERDICTS = ("pass", "refuse", "unknown")

# MIGRATIONS[n] takes a file at `PRAGMA user_version` n to n + 1. Never edit a released step:
# add one. Version 1 is the schema the ledger, report and exporter agreed on; version 2 adds
# the indexes that range reads and the report's decision queries need.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
    INSERT INTO meta(key, value) VALUES ('application', 'gpuplan');
    CREATE TABLE snapshots(id INTEGER PRIMARY KEY, host TEXT NOT NULL, taken_at_s INTEGER NOT NULL,
                           taken_at TEXT NOT NULL, driver TEXT, nvml_version TEXT,
                           UNIQUE(host, taken_at_s));
    CREATE TABLE cards(snapshot_id INTEGER NOT NULL REFERENCES snapshots(id), idx INTEGER NOT NULL,
                       uuid TEXT, name TEXT, total_bytes INTEGER, reserved_bytes INTEGER,
                       used_bytes INTEGER, free_bytes INTEGER, utilization_percent INTEGER, error TEXT,
                       PRIMARY KEY(snapshot_id, idx)) WITHOUT ROWID;
    CREATE TABLE processes(snapshot_id INTEGER NOT NULL REFERENCES snapshots(id),
                           card_idx INTEGER NOT NULL, pid INTEGER NOT NULL, used_bytes INTEGER,
                           cmdline TEXT, seat TEXT);
    CREATE TABLE decisions(id INTEGER PRIMARY KEY, decided_at_s INTEGER NOT NULL,
                           decided_at TEXT NOT NULL, kind TEXT NOT NULL, host TEXT, seat TEXT,
                           cards TEXT, verdict TEXT NOT NULL, reasons TEXT NOT NULL,
                           inputs_digest TEXT NOT NULL, snapshot_id INTEGER);
    """,
    """
    CREATE INDEX processes_by_snapshot ON processes(snapshot_id, card_idx);
    CREATE INDEX decisions_by_time ON decisions(decided_at_s);
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)


class LedgerError(CannotDecideError):
    """A ledger file that cannot be used: missing, foreign, corrupt, newer, busy or not writable."""

    def __init__(self, path: str | Path, msg: str) -> None:
        self.path = str(path)
        super().__init__(f"ledger {path}: {msg}")


def _seconds(moment: datetime) -> int:
    if moment.tzinfo is None:
        raise ValueError("ledger times need a timezone (UTC)")
    return int(moment.timestamp())


def _from_seconds(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


class Ledger:
    """An open ledger file. Use `open_ledger`, not this constructor."""

    def __init__(self, connection: sqlite3.Connection, path: str, *, readonly: bool) -> None:
        self.connection = connection
        self.path = path
        self.readonly = readonly

    # --- writing -------------------------------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Cursor]:
        # BEGIN IMMEDIATE takes the write lock up front (waiting up to busy_timeout), so a
        # snapshot is never half-written and readers in WAL mode keep reading meanwhile.
        if self.readonly:
            raise LedgerError(self.path, "opened read-only; cannot write")
        cursor = self.connection.cursor()
        try:
            cursor.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise _operational(self.path, exc) from exc
        try:
            yield cursor
        except BaseException:
            # KeyboardInterrupt too: the snapshot in flight is discarded, never half-stored.
            self.connection.rollback()
            raise
        try:
            cursor.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            self.connection.rollback()
            raise _operational(self.path, exc) from exc

    def append(self, snapshot: Snapshot) -> int:
        """Store one snapshot in one transaction; return its id (the existing id if already stored)."""
        return self.store(snapshot)[0]

    def store(self, snapshot: Snapshot) -> tuple[int, bool]:
        """Like `append`, and say whether the snapshot was new (False: same host and second stored)."""
        with self._transaction() as cursor:
            found = self._existing(cursor, snapshot)
            if found is not None:
                return found, False
            return self._insert(cursor, snapshot), True

    def append_many(self, snapshots: Iterable[Snapshot]) -> int:
        """Store many snapshots in one transaction (for generators); return how many were new."""
        stored = 0
        with self._transaction() as cursor:
            for snapshot in snapshots:
                if self._existing(cursor, snapshot) is None:
                    self._insert(cursor, snapshot)
                    stored += 1
        return stored

    @staticmethod
    def _existing(cursor: sqlite3.Cursor, snapshot: Snapshot) -> int | None:
        row = cursor.execute(
            "SELECT id FROM snapshots WHERE host = ? AND taken_at_s = ?",
            (snapshot.host, _seconds(snapshot.taken_at)),
        ).fetchone()
        return None if row is None else int(row[0])

    def _insert(self, cursor: sqlite3.Cursor, snapshot: Snapshot) -> int:
        cursor.execute(
            "INSERT INTO snapshots(host, taken_at_s, taken_at, driver, nvml_version) VALUES (?, ?, ?, ?, ?)",
            (
                snapshot.host,
                _seconds(snapshot.taken_at),
                format_utc(snapshot.taken_at),
                snapshot.driver,
                snapshot.nvml_version,
            ),
        )
        snapshot_id = cursor.lastrowid
        if snapshot_id is None:  # pragma: no cover - sqlite3 always sets it after an INSERT
            raise LedgerError(self.path, "SQLite returned no id for the new snapshot")
        self._insert_cards(cursor, snapshot_id, snapshot)
        self._insert_processes(cursor, snapshot_id, snapshot)
        return snapshot_id

    @staticmethod
    def _insert_cards(cursor: sqlite3.Cursor, snapshot_id: int, snapshot: Snapshot) -> None:
        cursor.executemany(
            "INSERT INTO cards(snapshot_id, idx, uuid, name, total_bytes, reserved_bytes, used_bytes,"
            " free_bytes, utilization_percent, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    snapshot_id,
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
        )

    @staticmethod
    def _insert_processes(cursor: sqlite3.Cursor, snapshot_id: int, snapshot: Snapshot) -> None:
        cursor.executemany(
            "INSERT INTO processes(snapshot_id, card_idx, pid, used_bytes, cmdline, seat)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [
                (snapshot_id, c.index, p.pid, p.used_bytes, p.cmdline, p.seat)
                for c in snapshot.cards
                for p in c.processes
            ],
        )

    def record_decision(
        self,
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
        """Store one plan/check verdict with its reasons (DESIGN.md reason objects); return its id."""
        if kind not in DECISION_KINDS:
            raise ValueError(f"decision kind {kind!r} is not one of {DECISION_KINDS}")
        if verdict not in VERDICTS:
            raise ValueError(f"verdict {verdict!r} is not one of {VERDICTS}")
        with self._transaction() as cursor:
            cursor.execute(
                "INSERT INTO decisions(decided_at_s, decided_at, kind, host, seat, cards, verdict, reasons,"
                " inputs_digest, snapshot_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    _seconds(decided_at),
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

    # --- reading -------------------------------------------------------------------------

    def hosts(self) -> list[str]:
        """Every host with at least one snapshot, sorted."""
        # A skip-scan over the (host, taken_at_s) index: one probe per host, not one per row
        # (DISTINCT walks all 525,600 entries of a year-long ledger).
        return [
            row[0]
            for row in self._read(
                "WITH RECURSIVE h(host) AS (SELECT MIN(host) FROM snapshots UNION ALL"
                " SELECT (SELECT MIN(host) FROM snapshots WHERE host > h.host) FROM h"
                " WHERE h.host IS NOT NULL) SELECT host FROM h WHERE host IS NOT NULL",
                (),
            )
        ]

    def latest(self, host: str) -> Snapshot | None:
        """The newest snapshot of `host`, or None."""
        rows = self._read(
            "SELECT id, host, taken_at_s, driver, nvml_version FROM snapshots"
            " WHERE host = ? ORDER BY taken_at_s DESC LIMIT 1",
            (host,),
        )
        return next(iter(self._build(rows)), None)

    def latest_per_host(self) -> list[Snapshot]:
        """The newest snapshot of every host, sorted by host."""
        out: list[Snapshot] = []
        for host in self.hosts():
            snapshot = self.latest(host)
            if snapshot is not None:
                out.append(snapshot)
        return out

    def snapshots(
        self, host: str, since: datetime | None = None, until: datetime | None = None
    ) -> Iterator[Snapshot]:
        """Snapshots of `host` taken in [since, until), oldest first (None: unbounded)."""
        low = -(2**62) if since is None else _seconds(since)
        high = 2**62 if until is None else _seconds(until)
        rows = self._read(
            "SELECT id, host, taken_at_s, driver, nvml_version FROM snapshots"
            " WHERE host = ? AND taken_at_s >= ? AND taken_at_s < ? ORDER BY taken_at_s",
            (host, low, high),
        )
        # Read in chunks so a year-long range does not hold every row in memory at once.
        for start in range(0, len(rows), 2000):
            yield from self._build(rows[start : start + 2000])

    def count(self) -> int:
        """How many snapshots the ledger holds."""
        return int(self._read("SELECT COUNT(*) FROM snapshots", ())[0][0])

    def decisions(
        self, since: datetime | None = None, until: datetime | None = None
    ) -> list[dict[str, Any]]:
        """Decisions taken in [since, until), oldest first, with `cards` and `reasons` decoded."""
        low = -(2**62) if since is None else _seconds(since)
        high = 2**62 if until is None else _seconds(until)
        rows = self._read(
            "SELECT id, decided_at_s, decided_at, kind, host, seat, cards, verdict, reasons,"
            " inputs_digest, snapshot_id FROM decisions WHERE decided_at_s >= ? AND decided_at_s < ?"
            " ORDER BY decided_at_s, id",
            (low, high),
        )
        keys = (
            "id",
            "decided_at_s",
            "decided_at",
            "kind",
            "host",
            "seat",
            "cards",
            "verdict",
            "reasons",
            "inputs_digest",
            "snapshot_id",
        )
        out: list[dict[str, Any]] = []
        for row in rows:
            item = dict(zip(keys, row, strict=True))
            item["cards"] = None if item["cards"] is None else json.loads(item["cards"])
            item["reasons"] = json.loads(item["reasons"])
            out.append(item)
        return out

    def _read(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        try:
            return self.connection.execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            raise _operational(self.path, exc) from exc
        except sqlite3.DatabaseError as exc:
            raise LedgerError(self.path, f"corrupt ({exc}); not changed") from exc

    def _build(self, rows: list[Any]) -> list[Snapshot]:
        if not rows:
            return []
        # Tens of thousands of small acyclic objects trip the cyclic collector again and again
        # (half of a week-long read's time); none of them can form a cycle, so pause it.
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._build_chunk(rows)
        finally:
            if collecting:
                gc.enable()

    def _build_chunk(self, rows: list[Any]) -> list[Snapshot]:
        ids = tuple(int(r[0]) for r in rows)
        marks = ",".join("?" * len(ids))
        # One read of the processes and one of the cards for the whole chunk: the range read of
        # a week (10,080 snapshots) stays a handful of queries, not tens of thousands.
        processes: dict[tuple[int, int], list[Process]] = {}
        for sid, idx, *values in self._read(
            "SELECT snapshot_id, card_idx, pid, used_bytes, cmdline, seat FROM processes"
            f" WHERE snapshot_id IN ({marks}) ORDER BY snapshot_id, card_idx, rowid",
            ids,
        ):
            processes.setdefault((sid, idx), []).append(
                _trusted(Process, dict(zip(_PROCESS_FIELDS, values, strict=True)))
            )
        # The rows were validated as Snapshots when they were written; building them again
        # without re-validating is what keeps a week's range read (80,640 cards) under 1 s.
        cards: dict[int, list[Card]] = {i: [] for i in ids}
        for sid, *values in self._read(
            f"SELECT snapshot_id, {', '.join(_CARD_COLUMNS)} FROM cards WHERE snapshot_id IN ({marks})"
            " ORDER BY snapshot_id, idx",
            ids,
        ):
            card = dict(zip(_CARD_FIELDS, values, strict=True))
            card["processes"] = tuple(processes.get((sid, values[0]), ()))
            cards[sid].append(_trusted(Card, card))
        out: list[Snapshot] = []
        for sid, host, taken_at_s, driver, nvml_version in rows:
            snapshot = {
                "schema_": SNAPSHOT_SCHEMA,
                "host": host,
                "taken_at": _from_seconds(taken_at_s),
                "driver": driver,
                "nvml_version": nvml_version,
                "cards": tuple(cards[sid]),
            }
            out.append(_trusted(Snapshot, snapshot))
        return out

    def close(self) -> None:
        """Close the connection."""
        self.connection.close()


M = TypeVar("M", bound=BaseModel)
_PROCESS_FIELDS = ("pid", "used_bytes", "cmdline", "seat")
_CARD_COLUMNS = (
    "idx",
    "uuid",
    "name",
    "total_bytes",
    "reserved_bytes",
    "used_bytes",
    "free_bytes",
    "utilization_percent",
    "error",
)
_CARD_FIELDS = ("index", *_CARD_COLUMNS[1:])


def _trusted(cls: type[M], values: dict[str, Any]) -> M:
    """A frozen model from values the ledger validated when it stored them, without validating again.

    What `model_construct` does, minus its per-field default and alias handling (every field is
    given here): 90,720 models a week-long range read cost 3.6 s through it and 0.2 s this way.
    """
    instance = cls.__new__(cls)
    object.__setattr__(instance, "__dict__", values)
    object.__setattr__(instance, "__pydantic_fields_set__", set(values))
    object.__setattr__(instance, "__pydantic_extra__", None)
    object.__setattr__(instance, "__pydantic_private__", None)
    return instance


def _operational(path: str, exc: sqlite3.OperationalError) -> LedgerError:
    text = str(exc)
    if "locked" in text or "busy" in text:
        return LedgerError(
            path, f"busy for over {BUSY_TIMEOUT_MS / 1000:g} s (another writer holds it)"
        )
    if "readonly" in text or "read-only" in text:
        return LedgerError(path, "cannot write: the file or its directory is read-only")
    if "unable to open" in text:
        return LedgerError(path, "cannot open: check the directory exists and is writable")
    return LedgerError(path, f"SQLite error: {text}")


def _check_header(path: Path) -> bool:
    """True for an SQLite file, False for an empty one; LedgerError for anything else."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(len(SQLITE_HEADER))
    except IsADirectoryError as exc:
        raise LedgerError(path, "is a directory, not a ledger file") from exc
    except PermissionError as exc:
        raise LedgerError(path, "cannot read: permission denied") from exc
    if not head:
        return False
    if head != SQLITE_HEADER:
        raise LedgerError(path, "not an SQLite file (not a gpuplan ledger); left unchanged")
    return True


def _connect(path: Path, readonly: bool) -> sqlite3.Connection:
    try:
        if readonly:
            connection = sqlite3.connect(
                f"file:{quote(str(path))}?mode=ro",
                uri=True,
                isolation_level=None,
                timeout=BUSY_TIMEOUT_MS / 1000,
            )
        else:
            connection = sqlite3.connect(
                str(path), isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000
            )
        connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    except sqlite3.OperationalError as exc:
        raise _operational(str(path), exc) from exc
    return connection


def _identify(connection: sqlite3.Connection, path: Path) -> tuple[bool, int]:
    """(is it ours, its user_version); (False, 0) for an empty database. Reads only."""
    try:
        tables = {
            r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        version = int(connection.execute("PRAGMA user_version").fetchone()[0])
        if not tables:
            return False, version
        if "meta" not in tables:
            raise LedgerError(
                path,
                "an SQLite file of another application (no gpuplan meta table); left unchanged",
            )
        row = connection.execute("SELECT value FROM meta WHERE key = 'application'").fetchone()
    except sqlite3.OperationalError as exc:
        raise _operational(str(path), exc) from exc
    except sqlite3.DatabaseError as exc:
        raise LedgerError(path, f"corrupt or not a database ({exc}); left unchanged") from exc
    if row is None or row[0] != APPLICATION:
        raise LedgerError(
            path, "an SQLite file of another application (meta says otherwise); left unchanged"
        )
    return True, version


def _migrate(connection: sqlite3.Connection, path: Path, version: int) -> None:
    # Each step runs in its own transaction with its version bump: an interrupted migration
    # leaves the file at the last whole step.
    for step in range(version, SCHEMA_VERSION):
        try:
            connection.execute("BEGIN IMMEDIATE")
            for statement in MIGRATIONS[step].split(";"):
                if statement.strip():
                    connection.execute(statement)
            connection.execute(f"PRAGMA user_version = {step + 1}")
            connection.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            connection.rollback()
            raise _operational(str(path), exc) from exc


@contextmanager
def open_ledger(path: str | Path, *, readonly: bool = False) -> Iterator[Ledger]:
    """Open (or, unless `readonly`, create) the ledger at `path`; LedgerError (exit 3) if unusable.

    A file that is not a gpuplan ledger is never written to. A writable open migrates an
    older schema; a read-only one reads older schemas as they are.
    """
    target = Path(path)
    exists = target.exists()
    if readonly and not exists:
        raise LedgerError(target, "no such file (fill it with `gpuplan snapshot --ledger`)")
    has_content = _check_header(target) if exists else False
    if not exists and not target.parent.exists():
        raise LedgerError(target, f"directory {target.parent} does not exist")
    if not readonly and not exists and not os.access(target.parent, os.W_OK):
        raise LedgerError(target, f"cannot create: directory {target.parent} is not writable")
    connection = _connect(target, readonly)
    try:
        ours, version = _identify(connection, target) if has_content else (False, 0)
        if has_content and not ours and version != 0:
            raise LedgerError(target, "an SQLite file of another application; left unchanged")
        if version > SCHEMA_VERSION:
            raise LedgerError(
                target,
                f"schema version {version} is newer than this gpuplan's {SCHEMA_VERSION}; upgrade gpuplan",
            )
        if readonly:
            if not ours:
                raise LedgerError(target, "empty: not a gpuplan ledger yet")
        else:
            try:
                connection.execute("PRAGMA journal_mode = WAL")
                # NORMAL in WAL mode loses no committed snapshot to a process crash (only,
                # at worst, the last ones to a power cut) and keeps each write cheap.
                connection.execute("PRAGMA synchronous = NORMAL")
            except sqlite3.OperationalError as exc:
                raise _operational(str(target), exc) from exc
            if version < SCHEMA_VERSION:
                _migrate(connection, target, version)
        ledger = Ledger(connection, str(target), readonly=readonly)
        yield ledger
    finally:
        connection.close()
