"""Reads of the ledger's own records: hosts, snapshots by time, decisions, meta labels, a digest.

The report's aggregates over a window are `report_queries`'; this module rebuilds stored rows.
"""

from __future__ import annotations

import gc
import hashlib
import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel

from inventory.ledger.schema import LedgerError, has_column, operational
from inventory.ledger.writes import parents_from_text, seconds
from inventory.snapshot import SCHEMA_VERSION as SNAPSHOT_SCHEMA
from inventory.snapshot import Card, Process, Snapshot

_UNBOUNDED = 2**62


def read(connection: sqlite3.Connection, path: str, sql: str, params: tuple[Any, ...]) -> list[Any]:
    """All rows of one query; SQLite's errors as LedgerError naming the file."""
    try:
        return connection.execute(sql, params).fetchall()
    except sqlite3.OperationalError as exc:
        raise operational(path, exc) from exc
    except sqlite3.DatabaseError as exc:
        raise LedgerError(path, f"corrupt ({exc}); not changed") from exc


def hosts(connection: sqlite3.Connection, path: str) -> list[str]:
    """Every host with at least one snapshot, sorted."""
    # A skip-scan over the (host, taken_at_s) index: one probe per host, not one per row
    # (DISTINCT walks all 525,600 entries of a year-long ledger).
    rows = read(
        connection,
        path,
        "WITH RECURSIVE h(host) AS (SELECT MIN(host) FROM snapshots UNION ALL"
        " SELECT (SELECT MIN(host) FROM snapshots WHERE host > h.host) FROM h"
        " WHERE h.host IS NOT NULL) SELECT host FROM h WHERE host IS NOT NULL",
        (),
    )
    return [row[0] for row in rows]


def latest(connection: sqlite3.Connection, path: str, host: str) -> Snapshot | None:
    """The newest snapshot of `host`, or None."""
    rows = read(
        connection,
        path,
        "SELECT id, host, taken_at_s, driver, nvml_version FROM snapshots"
        " WHERE host = ? ORDER BY taken_at_s DESC LIMIT 1",
        (host,),
    )
    return next(iter(_build(connection, path, rows)), None)


def card_uuids_before(
    connection: sqlite3.Connection, host: str, moment: datetime
) -> tuple[datetime, frozenset[str], int] | None:
    """When `host`'s newest snapshot taken before `moment` was taken, its cards' UUIDs, and how
    many of its cards have none (NVML could not read it)."""
    row = connection.execute(
        "SELECT id, taken_at_s FROM snapshots WHERE host = ? AND taken_at_s < ?"
        " ORDER BY taken_at_s DESC LIMIT 1",
        (host, seconds(moment)),
    ).fetchone()
    if row is None:
        return None
    uuids = [
        uuid
        for (uuid,) in connection.execute("SELECT uuid FROM cards WHERE snapshot_id = ?", (row[0],))
    ]
    known = frozenset(uuid for uuid in uuids if uuid)
    return datetime.fromtimestamp(row[1], UTC), known, len(uuids) - sum(1 for u in uuids if u)


def snapshots(
    connection: sqlite3.Connection,
    path: str,
    host: str,
    since: datetime | None = None,
    until: datetime | None = None,
) -> Iterator[Snapshot]:
    """Snapshots of `host` taken in [since, until), oldest first (None: unbounded)."""
    low = -_UNBOUNDED if since is None else seconds(since)
    high = _UNBOUNDED if until is None else seconds(until)
    rows = read(
        connection,
        path,
        "SELECT id, host, taken_at_s, driver, nvml_version FROM snapshots"
        " WHERE host = ? AND taken_at_s >= ? AND taken_at_s < ? ORDER BY taken_at_s",
        (host, low, high),
    )
    # Read in chunks so a year-long range does not hold every row in memory at once.
    for start in range(0, len(rows), 2000):
        yield from _build(connection, path, rows[start : start + 2000])


def count(connection: sqlite3.Connection, path: str) -> int:
    """How many snapshots the ledger holds."""
    return int(read(connection, path, "SELECT COUNT(*) FROM snapshots", ())[0][0])


def snapshot_id(connection: sqlite3.Connection, host: str, moment: datetime) -> int | None:
    """The id of `host`'s snapshot taken in `moment`'s second, None when there is none."""
    row = connection.execute(
        "SELECT id FROM snapshots WHERE host = ? AND taken_at_s = ?", (host, seconds(moment))
    ).fetchone()
    return None if row is None else int(row[0])


_DECISION_KEYS = (
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


def decisions(
    connection: sqlite3.Connection,
    path: str,
    since: datetime | None = None,
    until: datetime | None = None,
) -> list[dict[str, Any]]:
    """Decisions taken in [since, until), oldest first, with `cards` and `reasons` decoded."""
    low = -_UNBOUNDED if since is None else seconds(since)
    high = _UNBOUNDED if until is None else seconds(until)
    rows = read(
        connection,
        path,
        f"SELECT {', '.join(_DECISION_KEYS)} FROM decisions"
        " WHERE decided_at_s >= ? AND decided_at_s < ? ORDER BY decided_at_s, id",
        (low, high),
    )
    out: list[dict[str, Any]] = []
    for row in rows:
        item = dict(zip(_DECISION_KEYS, row, strict=True))
        item["cards"] = None if item["cards"] is None else json.loads(item["cards"])
        item["reasons"] = json.loads(item["reasons"])
        out.append(item)
    return out


def meta_value(connection: sqlite3.Connection, key: str) -> str | None:
    """One `meta` entry (e.g. `demo`), None when it is not set or the file has no meta table."""
    try:
        row = connection.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    except sqlite3.Error:
        return None
    return None if row is None else str(row[0])


_DIGEST_QUERIES = (
    "SELECT host, taken_at_s, taken_at, driver, nvml_version FROM snapshots ORDER BY host, taken_at_s",
    "SELECT s.host, s.taken_at_s, c.idx, c.uuid, c.total_bytes, c.reserved_bytes, c.used_bytes, "
    "c.free_bytes, c.utilization_percent, c.error FROM cards c JOIN snapshots s ON s.id = c.snapshot_id "
    "ORDER BY s.host, s.taken_at_s, c.idx",
    "SELECT s.host, s.taken_at_s, p.card_idx, p.pid, p.used_bytes, p.cmdline, p.seat FROM processes p "
    "JOIN snapshots s ON s.id = p.snapshot_id ORDER BY s.host, s.taken_at_s, p.card_idx, p.pid",
    "SELECT decided_at_s, kind, host, seat, cards, verdict, reasons, inputs_digest FROM decisions "
    "ORDER BY decided_at_s, id",
)


def ledger_digest(connection: sqlite3.Connection) -> str:
    """sha256 over the ledger's snapshot, card, process and decision rows in a fixed order."""
    digest = hashlib.sha256()
    for sql in _DIGEST_QUERIES:
        for row in connection.execute(sql):
            digest.update(repr(row).encode())
            digest.update(b"\n")
    return digest.hexdigest()


# --- snapshots from rows -----------------------------------------------------------------


def _build(connection: sqlite3.Connection, path: str, rows: list[Any]) -> list[Snapshot]:
    if not rows:
        return []
    # Tens of thousands of small acyclic objects trip the cyclic collector again and again
    # (half of a week-long read's time); none of them can form a cycle, so pause it.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _build_chunk(connection, path, rows)
    finally:
        if collecting:
            gc.enable()


def _build_chunk(connection: sqlite3.Connection, path: str, rows: list[Any]) -> list[Snapshot]:
    ids = tuple(int(r[0]) for r in rows)
    marks = ",".join("?" * len(ids))
    # One read of the processes and one of the cards for the whole chunk: the range read of
    # a week (10,080 snapshots) stays a handful of queries, not tens of thousands.
    processes: dict[tuple[int, int], list[Process]] = {}
    # NULL in a ledger opened read-only before version 6, which has no `parents` column.
    parents_column = "parents" if has_column(connection, "processes", "parents") else "NULL"
    for sid, idx, *values, parents in read(
        connection,
        path,
        f"SELECT snapshot_id, card_idx, pid, used_bytes, cmdline, seat, {parents_column}"
        f" FROM processes WHERE snapshot_id IN ({marks}) ORDER BY snapshot_id, card_idx, rowid",
        ids,
    ):
        process = dict(zip(_PROCESS_FIELDS, values, strict=True))
        process["parents"] = parents_from_text(parents)
        processes.setdefault((sid, idx), []).append(_trusted(Process, process))
    # The rows were validated as Snapshots when they were written; building them again
    # without re-validating is what keeps a week's range read (80,640 cards) under 1 s.
    cards: dict[int, list[Card]] = {i: [] for i in ids}
    for sid, *values in read(
        connection,
        path,
        f"SELECT snapshot_id, {', '.join(_CARD_COLUMNS)} FROM cards WHERE snapshot_id IN ({marks})"
        " ORDER BY snapshot_id, idx",
        ids,
    ):
        card = dict(zip(_CARD_FIELDS, values, strict=True))
        card["processes"] = tuple(processes.get((sid, values[0]), ()))
        card["holds"] = ()
        cards[sid].append(_trusted(Card, card))
    out: list[Snapshot] = []
    for sid, host, taken_at_s, driver, nvml_version in rows:
        snapshot = {
            "schema_": SNAPSHOT_SCHEMA,
            "host": host,
            "taken_at": datetime.fromtimestamp(taken_at_s, UTC),
            "driver": driver,
            "nvml_version": nvml_version,
            "cards": tuple(cards[sid]),
        }
        out.append(_trusted(Snapshot, snapshot))
    return out


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
