"""The ledger's hourly rollups, kept beside the raw moments and written in each snapshot's own
transaction; what `compact` leaves of the moments it removes. The SQL of both lives here.

Per (host, card, UTC hour): samples, error samples, the lowest free and when, the highest used.
Per (host, card, hour, seat, masked command line): samples, the lowest and highest bytes its
processes held together at one moment, and when. A tie keeps the earliest moment, so rows merge
in any order: a batch's partial rollups are folded into the stored ones by one upsert each, and
what is stored always equals `inventory.history.rollup.hourly` of the moments (a test holds it).
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

HOUR_S = 3600
# Raw rows are read back (a migration, a re-mask, a compaction's check) this many snapshots at a time.
CHUNK_SNAPSHOTS = 5000

# One card's reading as the rollups need it: (idx, used_bytes, free_bytes, error).
CardFigures = tuple[int, int | None, int | None, str | None]
# One process's: (card idx, used_bytes, masked command line, recorded seat).
ProcessFigures = tuple[int, int | None, str | None, str | None]
# Where progress goes: one line at a time (stderr, or nothing).
Progress = Callable[[str], None]


class CardHourRow(NamedTuple):
    """A stored card rollup: times are unix seconds, `hour_s` the hour's first second."""

    host: str
    card: int
    hour_s: int
    samples: int
    error_samples: int
    min_free_bytes: int | None
    min_free_at_s: int | None
    max_used_bytes: int | None


class CommandHourRow(NamedTuple):
    """A stored command rollup; `seat` and `cmdline` are '' where a process had none."""

    host: str
    card: int
    hour_s: int
    seat: str
    cmdline: str
    samples: int
    min_bytes: int
    min_at_s: int
    max_bytes: int
    max_at_s: int


def hour_s(taken_s: int) -> int:
    """The first second of the UTC hour holding `taken_s`."""
    return taken_s - taken_s % HOUR_S


@dataclass
class HourRollups:
    """Partial rollups of some snapshots, merged into the stored ones by `write`."""

    # (host, hour, card) → [samples, errors, min free, its time, max used]
    cards: dict[tuple[str, int, int], list[int | None]]
    # (host, hour, card, seat, cmdline) → [samples, min, its time, max, its time]
    commands: dict[tuple[str, int, int, str, str], list[int]]

    @classmethod
    def empty(cls) -> HourRollups:
        return cls({}, {})

    def __len__(self) -> int:
        return len(self.cards) + len(self.commands)

    def add(
        self,
        host: str,
        taken_s: int,
        cards: Iterable[CardFigures],
        processes: Iterable[ProcessFigures],
    ) -> None:
        """Fold one snapshot in: its readable cards' figures and, per card, each (seat, command
        line)'s processes summed."""
        hour = hour_s(taken_s)
        readable = self._add_cards(host, hour, taken_s, cards)
        summed: dict[tuple[int, str, str], int] = {}
        for idx, used, cmdline, seat in processes:
            if idx in readable:
                key = (idx, seat or "", cmdline or "")
                summed[key] = summed.get(key, 0) + (used or 0)
        for (idx, seat, cmdline), held in summed.items():
            key5 = (host, hour, idx, seat, cmdline)
            group = self.commands.get(key5)
            if group is None:
                self.commands[key5] = [1, held, taken_s, held, taken_s]
                continue
            group[0] += 1
            if held < group[1] or (held == group[1] and taken_s < group[2]):
                group[1], group[2] = held, taken_s
            if held > group[3] or (held == group[3] and taken_s < group[4]):
                group[3], group[4] = held, taken_s

    def _add_cards(
        self, host: str, hour: int, taken_s: int, cards: Iterable[CardFigures]
    ) -> set[int]:
        """Fold in one snapshot's cards; the indices of those that were readable."""
        readable: set[int] = set()
        for idx, used, free, error in cards:
            row = self.cards.get((host, hour, idx))
            if row is None:
                row = self.cards[(host, hour, idx)] = [0, 0, None, None, None]
            if error is not None or used is None:
                row[1] = _int(row[1]) + 1
                continue
            readable.add(idx)
            row[0] = _int(row[0]) + 1
            low = row[2]
            if free is not None and (
                low is None or free < low or (free == low and taken_s < _int(row[3]))
            ):
                row[2], row[3] = free, taken_s
            high = row[4]
            if high is None or used > high:
                row[4] = used
        return readable

    def write(self, cursor: sqlite3.Cursor) -> None:
        """Merge these partial rollups into the stored ones (inside the caller's transaction)."""
        cursor.executemany(
            _CARD_UPSERT,
            [(host, hour, idx, *row) for (host, hour, idx), row in self.cards.items()],
        )
        cursor.executemany(
            _COMMAND_UPSERT,
            [(*key, *group) for key, group in self.commands.items()],
        )
        self.cards.clear()
        self.commands.clear()


def _int(value: int | None) -> int:
    return 0 if value is None else value


# A tie keeps the earlier time; NULL (no readable sample) yields to any figure.
_CARD_UPSERT = """
INSERT INTO card_hours(host, hour_s, card_idx, samples, error_samples, min_free_bytes,
                       min_free_at_s, max_used_bytes)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT(host, hour_s, card_idx) DO UPDATE SET
  samples = samples + excluded.samples,
  error_samples = error_samples + excluded.error_samples,
  min_free_at_s = CASE
    WHEN excluded.min_free_bytes IS NULL THEN min_free_at_s
    WHEN min_free_bytes IS NULL OR excluded.min_free_bytes < min_free_bytes
      OR (excluded.min_free_bytes = min_free_bytes AND excluded.min_free_at_s < min_free_at_s)
      THEN excluded.min_free_at_s
    ELSE min_free_at_s END,
  min_free_bytes = COALESCE(MIN(min_free_bytes, excluded.min_free_bytes), min_free_bytes,
                            excluded.min_free_bytes),
  max_used_bytes = COALESCE(MAX(max_used_bytes, excluded.max_used_bytes), max_used_bytes,
                            excluded.max_used_bytes)
"""
_COMMAND_UPSERT = """
INSERT INTO command_hours(host, hour_s, card_idx, seat, cmdline, samples, min_bytes, min_at_s,
                          max_bytes, max_at_s)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT(host, hour_s, card_idx, seat, cmdline) DO UPDATE SET
  samples = samples + excluded.samples,
  min_at_s = CASE
    WHEN excluded.min_bytes < min_bytes
      OR (excluded.min_bytes = min_bytes AND excluded.min_at_s < min_at_s) THEN excluded.min_at_s
    ELSE min_at_s END,
  min_bytes = MIN(min_bytes, excluded.min_bytes),
  max_at_s = CASE
    WHEN excluded.max_bytes > max_bytes
      OR (excluded.max_bytes = max_bytes AND excluded.max_at_s < max_at_s) THEN excluded.max_at_s
    ELSE max_at_s END,
  max_bytes = MAX(max_bytes, excluded.max_bytes)
"""


# --- reading -----------------------------------------------------------------------------


def has_rollups(connection: sqlite3.Connection) -> bool:
    """True when the ledger keeps rollups (schema 7 on; a read-only older one does not)."""
    row = connection.execute(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'card_hours'"
    ).fetchone()
    return bool(row[0])


def card_hours(
    connection: sqlite3.Connection, host: str, first_hour_s: int, end_s: int
) -> list[CardHourRow]:
    """`host`'s stored card rollups of the hours starting in [first_hour_s, end_s), by hour, card."""
    return [
        CardHourRow._make(row)
        for row in connection.execute(
            "SELECT host, card_idx, hour_s, samples, error_samples, min_free_bytes, min_free_at_s,"
            " max_used_bytes FROM card_hours WHERE host = ? AND hour_s >= ? AND hour_s < ?"
            " ORDER BY hour_s, card_idx",
            (host, first_hour_s, end_s),
        )
    ]


def command_hours(
    connection: sqlite3.Connection, host: str, first_hour_s: int, end_s: int
) -> list[CommandHourRow]:
    """The same of its command rollups, by hour, card, seat and command line."""
    return [
        CommandHourRow._make(row)
        for row in connection.execute(
            "SELECT host, card_idx, hour_s, seat, cmdline, samples, min_bytes, min_at_s, max_bytes,"
            " max_at_s FROM command_hours WHERE host = ? AND hour_s >= ? AND hour_s < ?"
            " ORDER BY hour_s, card_idx, seat, cmdline",
            (host, first_hour_s, end_s),
        )
    ]


def raw_since(connection: sqlite3.Connection, host: str) -> int | None:
    """The first second of `host`'s raw moments after a `compact` (older ones are rollups only);
    None when none of its moments was ever removed."""
    if not _has_table(connection, "raw_kept"):
        return None
    row = connection.execute("SELECT since_s FROM raw_kept WHERE host = ?", (host,)).fetchone()
    return None if row is None else int(row[0])


def arrivals(connection: sqlite3.Connection, host: str, start_s: int, end_s: int) -> dict[int, int]:
    """taken_at_s → arrived_at_s of `host`'s snapshots in [start_s, end_s) that recorded one."""
    if not _has_column(connection, "snapshots", "arrived_at_s"):
        return {}
    return {
        int(taken): int(arrived)
        for taken, arrived in connection.execute(
            "SELECT taken_at_s, arrived_at_s FROM snapshots WHERE host = ? AND taken_at_s >= ?"
            " AND taken_at_s < ? AND arrived_at_s IS NOT NULL",
            (host, start_s, end_s),
        )
    }


def _has_table(connection: sqlite3.Connection, name: str) -> bool:
    row = connection.execute(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
    ).fetchone()
    return bool(row[0])


def _has_column(connection: sqlite3.Connection, table: str, column: str) -> bool:
    return any(row[1] == column for row in connection.execute(f"PRAGMA table_info({table})"))


# --- building from the raw rows ------------------------------------------------------------


def _raw_chunks(
    connection: sqlite3.Connection, where: str, params: Sequence[object]
) -> Iterator[tuple[int, HourRollups]]:
    """The raw snapshots that `where` (on `s`, the snapshots table) selects, folded into partial
    rollups `CHUNK_SNAPSHOTS` at a time: (how many snapshots so far, that chunk's rollups)."""
    ids = [
        (int(i), str(h), int(t))
        for i, h, t in connection.execute(
            f"SELECT s.id, s.host, s.taken_at_s FROM snapshots s WHERE {where} ORDER BY s.id",
            tuple(params),
        )
    ]
    done = 0
    for start in range(0, len(ids), CHUNK_SNAPSHOTS):
        chunk = ids[start : start + CHUNK_SNAPSHOTS]
        low, high = chunk[0][0], chunk[-1][0]
        cards: dict[int, list[CardFigures]] = {}
        for sid, idx, used, free, error in connection.execute(
            "SELECT snapshot_id, idx, used_bytes, free_bytes, error FROM cards"
            " WHERE snapshot_id BETWEEN ? AND ?",
            (low, high),
        ):
            cards.setdefault(sid, []).append((idx, used, free, error))
        processes: dict[int, list[ProcessFigures]] = {}
        for sid, idx, used, cmdline, seat in connection.execute(
            "SELECT snapshot_id, card_idx, used_bytes, cmdline, seat FROM processes"
            " WHERE snapshot_id BETWEEN ? AND ?",
            (low, high),
        ):
            processes.setdefault(sid, []).append((idx, used, cmdline, seat))
        rollups = HourRollups.empty()
        for sid, host, taken_s in chunk:
            rollups.add(host, taken_s, cards.get(sid, ()), processes.get(sid, ()))
        done += len(chunk)
        yield done, rollups


def build(connection: sqlite3.Connection, progress: Progress | None = None) -> str | None:
    """Build every rollup from the raw rows (a ledger from before rollups, migrated in place);
    a note saying how many, None when the ledger held no snapshot."""
    total = int(connection.execute("SELECT COUNT(*) FROM snapshots").fetchone()[0])
    if not total:
        return None
    connection.execute("DELETE FROM card_hours")
    connection.execute("DELETE FROM command_hours")
    cursor = connection.cursor()
    for done, rollups in _raw_chunks(connection, "1", ()):
        rollups.write(cursor)
        if progress is not None and done < total:
            progress(f"building hourly rollups: {done:,} of {total:,} snapshots")
    hours = int(connection.execute("SELECT COUNT(*) FROM card_hours").fetchone()[0])
    commands = int(connection.execute("SELECT COUNT(*) FROM command_hours").fetchone()[0])
    return (
        f"built the hourly rollups of {total:,} stored snapshot(s): "
        f"{hours:,} card-hour(s), {commands:,} command-hour(s)"
    )


def rebuild_commands(connection: sqlite3.Connection, mask: Callable[[str], str]) -> None:
    """The command rollups again after the stored command lines were masked anew: recomputed from
    the raw rows where they are kept; in hours `compact` left as rollups only, each line is masked
    in place, and lines that become one are merged into bounds (samples the most of theirs, the
    lowest bytes the highest of their lows, the highest the sum of their highs)."""
    for host, since in connection.execute("SELECT host, since_s FROM raw_kept").fetchall():
        _remask_compacted(connection, str(host), int(since), mask)
    connection.execute(
        "DELETE FROM command_hours WHERE NOT EXISTS (SELECT 1 FROM raw_kept k"
        " WHERE k.host = command_hours.host AND command_hours.hour_s < k.since_s)"
    )
    cursor = connection.cursor()
    raw = "NOT EXISTS (SELECT 1 FROM raw_kept k WHERE k.host = s.host AND s.taken_at_s < k.since_s)"
    for _, rollups in _raw_chunks(connection, raw, ()):
        rollups.cards.clear()  # the card rollups hold no command line: left as they are
        rollups.write(cursor)


def _remask_compacted(
    connection: sqlite3.Connection, host: str, since_s: int, mask: Callable[[str], str]
) -> None:
    rows = connection.execute(
        "SELECT hour_s, card_idx, seat, cmdline, samples, min_bytes, min_at_s, max_bytes, max_at_s"
        " FROM command_hours WHERE host = ? AND hour_s < ?",
        (host, since_s),
    ).fetchall()
    merged: dict[tuple[int, int, str, str], list[int]] = {}
    changed = False
    for hour, idx, seat, line, samples, low, low_at, high, high_at in rows:
        masked = mask(line) if line else line
        changed |= masked != line
        key = (hour, idx, seat, masked)
        found = merged.get(key)
        if found is None:
            merged[key] = [samples, low, low_at, high, high_at]
            continue
        found[0] = max(found[0], samples)
        if low > found[1]:
            found[1], found[2] = low, low_at
        found[3] += high
        found[4] = min(found[4], high_at)
    if not changed:
        return
    connection.execute("DELETE FROM command_hours WHERE host = ? AND hour_s < ?", (host, since_s))
    connection.executemany(
        "INSERT INTO command_hours(host, hour_s, card_idx, seat, cmdline, samples, min_bytes,"
        " min_at_s, max_bytes, max_at_s) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(host, *key, *values) for key, values in merged.items()],
    )


# --- compaction ----------------------------------------------------------------------------


class Compacted(NamedTuple):
    """What one host's compaction did."""

    host: str
    removed: int  # raw snapshots removed (kept as rollups)
    kept: int  # raw snapshots left
    since_s: int  # raw moments are kept from this second on


def compact_host(
    connection: sqlite3.Connection,
    host: str,
    cutoff_s: int,
    progress: Progress | None = None,
) -> Compacted:
    """Remove `host`'s raw snapshots taken before `cutoff_s` (an hour's first second), each batch
    in its own transaction, after checking that their rollups are whole (rebuilt where not)."""
    previous = raw_since(connection, host)
    since = max(cutoff_s, previous or cutoff_s)
    ids = [
        int(i)
        for (i,) in connection.execute(
            "SELECT id FROM snapshots WHERE host = ? AND taken_at_s < ? ORDER BY taken_at_s",
            (host, cutoff_s),
        )
    ]
    kept = int(
        connection.execute(
            "SELECT COUNT(*) FROM snapshots WHERE host = ? AND taken_at_s >= ?", (host, cutoff_s)
        ).fetchone()[0]
    )
    connection.execute("BEGIN IMMEDIATE")
    try:
        _ensure_whole(connection, host, previous, cutoff_s)
        connection.execute(
            "INSERT INTO raw_kept(host, since_s) VALUES (?, ?)"
            " ON CONFLICT(host) DO UPDATE SET since_s = MAX(since_s, excluded.since_s)",
            (host, since),
        )
        connection.execute("COMMIT")
    except BaseException:
        connection.rollback()
        raise
    removed = 0
    for start in range(0, len(ids), CHUNK_SNAPSHOTS):
        chunk = ids[start : start + CHUNK_SNAPSHOTS]
        marks = ", ".join("?" for _ in chunk)
        connection.execute("BEGIN IMMEDIATE")
        try:
            for table, column in (("processes", "snapshot_id"), ("cards", "snapshot_id")):
                connection.execute(f"DELETE FROM {table} WHERE {column} IN ({marks})", chunk)
            connection.execute(f"DELETE FROM snapshots WHERE id IN ({marks})", chunk)
            connection.execute("COMMIT")
        except BaseException:
            connection.rollback()
            raise
        removed += len(chunk)
        if progress is not None and removed < len(ids):
            progress(f"{host}: removed {removed:,} of {len(ids):,} raw moments")
    return Compacted(host, removed, kept, since)


def _ensure_whole(
    connection: sqlite3.Connection, host: str, previous: int | None, cutoff_s: int
) -> None:
    """Rebuild the rollups of the hours about to lose their raw moments when they do not count
    every stored card reading (rows written without rollups, e.g. by hand or by another tool)."""
    low = previous if previous is not None else -(2**62)
    readings = connection.execute(
        "SELECT COUNT(*) FROM cards c JOIN snapshots s ON s.id = c.snapshot_id"
        " WHERE s.host = ? AND s.taken_at_s >= ? AND s.taken_at_s < ?",
        (host, low, cutoff_s),
    ).fetchone()[0]
    counted = connection.execute(
        "SELECT COALESCE(SUM(samples + error_samples), 0) FROM card_hours"
        " WHERE host = ? AND hour_s >= ? AND hour_s < ?",
        (host, low, cutoff_s),
    ).fetchone()[0]
    if readings == counted:
        return
    for table in ("card_hours", "command_hours"):
        connection.execute(
            f"DELETE FROM {table} WHERE host = ? AND hour_s >= ? AND hour_s < ?",
            (host, low, cutoff_s),
        )
    cursor = connection.cursor()
    for _, rollups in _raw_chunks(
        connection, "s.host = ? AND s.taken_at_s >= ? AND s.taken_at_s < ?", (host, low, cutoff_s)
    ):
        rollups.write(cursor)


def hosts_before(connection: sqlite3.Connection, cutoff_s: int) -> list[str]:
    """The hosts with a raw snapshot taken before `cutoff_s`, sorted."""
    return [
        str(h)
        for (h,) in connection.execute(
            "SELECT DISTINCT host FROM snapshots WHERE taken_at_s < ? ORDER BY host", (cutoff_s,)
        )
    ]


def vacuum(connection: sqlite3.Connection) -> None:
    """Give the removed rows' pages back to the file system (the file shrinks)."""
    connection.execute("VACUUM")


def stderr_progress(prefix: str) -> Progress:
    """Progress lines on stderr, each starting with `prefix`."""

    def say(line: str) -> None:
        print(f"{prefix}{line}", file=sys.stderr, flush=True)

    return say


class RawSpan(NamedTuple):
    """One host's raw moments: how many, the first and last taken, and from when they are kept."""

    host: str
    moments: int
    first_s: int
    last_s: int
    since_s: int | None


def raw_spans(connection: sqlite3.Connection) -> list[RawSpan]:
    """Every host's raw moments, by host."""
    kept = (
        dict(connection.execute("SELECT host, since_s FROM raw_kept").fetchall())
        if _has_table(connection, "raw_kept")
        else {}
    )
    return [
        RawSpan(str(host), int(n), int(first), int(last), kept.get(host))
        for host, n, first, last in connection.execute(
            "SELECT host, COUNT(*), MIN(taken_at_s), MAX(taken_at_s) FROM snapshots"
            " GROUP BY host ORDER BY host"
        )
    ]
