"""The ledger: an SQLite history of snapshots and of every plan/check decision.

WAL mode so a poller and readers never block each other beyond a short retry; one
transaction per snapshot so a crash leaves the whole snapshot or none of it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from inventory.holds import Hold
from inventory.ledger import holds as hold_rows
from inventory.ledger import queries, rollups, writes
from inventory.ledger.schema import (
    APPLICATION,
    APPROVAL_BUSY_TIMEOUT_MS,
    BUSY_TIMEOUT_MS,
    MIGRATIONS,
    SCHEMA_VERSION,
    SQLITE_HEADER,
    LedgerError,
    ReadOnlyLedgerError,
    open_connection,
    operational,
)
from inventory.ledger.writes import DECISION_KINDS, VERDICTS, SnapshotValues
from inventory.snapshot import Snapshot

__all__ = [
    "APPLICATION",
    "BUSY_TIMEOUT_MS",
    "DECISION_KINDS",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "SQLITE_HEADER",
    "VERDICTS",
    "Approval",
    "Ledger",
    "LedgerError",
    "ReadOnlyLedgerError",
    "open_ledger",
]


class Approval:
    """One check's write transaction: the holds active when it began, and what it records.

    Reading the snapshots and holds, judging, and writing the decisions and new holds happen
    inside one BEGIN IMMEDIATE transaction, so two checks on one ledger are judged one after
    the other, each on what the ledger held when it got the lock.
    """

    def __init__(self, cursor: sqlite3.Cursor, path: str, holds: list[Hold]) -> None:
        self._cursor = cursor
        self._path = path
        self.holds = holds

    def latest(self, host: str) -> Snapshot | None:
        """The newest snapshot of `host` as this transaction sees it (after any that were
        stored while it waited for the lock), or None."""
        return queries.latest(self._cursor.connection, self._path, host)

    def record_decision(self, **decision: Any) -> int:
        """Store one verdict (the keywords of `Ledger.record_decision`); return its id."""
        return writes.insert_decision(self._cursor, **decision)

    def append(self, snapshot: Snapshot) -> int:
        """Store the snapshot a verdict was judged on (once); return its id."""
        found = writes.existing_snapshot(self._cursor, snapshot)
        if found is not None:
            return found
        return writes.insert_snapshot(self._cursor, snapshot)

    def hold(self, holds: Sequence[Hold]) -> list[int]:
        """Record holds, each replacing its seat's open hold; return their ids."""
        return hold_rows.insert(self._cursor, holds)


class Ledger:
    """An open ledger file. Use `open_ledger`, not this constructor."""

    def __init__(self, connection: sqlite3.Connection, path: str, *, readonly: bool) -> None:
        self.connection = connection
        self.path = path
        self.readonly = readonly

    # --- writing -------------------------------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Cursor]:
        if self.readonly:
            raise LedgerError(self.path, "opened read-only; cannot write")
        with writes.transaction(self.connection, self.path) as cursor:
            yield cursor

    def append(self, snapshot: Snapshot) -> int:
        """Store one snapshot in one transaction; return its id (the existing id if already stored)."""
        return self.store(snapshot)[0]

    def store(self, snapshot: Snapshot, arrived_at: datetime | None = None) -> tuple[int, bool]:
        """Like `append`, and say whether the snapshot was new (False: same host and second stored).

        `arrived_at`: when a live reading (NVML, stdin, Prometheus) reached the ledger; None for
        an imported file."""
        with self._transaction() as cursor:
            found = writes.existing_snapshot(cursor, snapshot)
            if found is not None:
                return found, False
            return writes.insert_snapshot(cursor, snapshot, arrived_at), True

    def import_rows(self, readings: Sequence[SnapshotValues]) -> int:
        """Store a batch of snapshots (an imported file's, a thousand at a time) in one
        transaction, with their rollups and no arrival time; those already stored (same host and
        second) are skipped. Returns how many were new."""
        with self._transaction() as cursor:
            return writes.insert_new(cursor, readings)

    def append_many(self, snapshots: Iterable[Snapshot]) -> int:
        """Store many snapshots in one transaction (for generators); return how many were new."""
        stored = 0
        with self._transaction() as cursor:
            for snapshot in snapshots:
                if writes.existing_snapshot(cursor, snapshot) is None:
                    writes.insert_snapshot(cursor, snapshot)
                    stored += 1
        return stored

    def append_rows(self, readings: Iterable[SnapshotValues]) -> int:
        """Store many generated snapshots as plain rows in one transaction (see `writes.insert_bulk`)."""
        with self._transaction() as cursor:
            return writes.insert_bulk(cursor, readings)

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
        with self._transaction() as cursor:
            return writes.insert_decision(
                cursor,
                kind=kind,
                host=host,
                seat=seat,
                cards=cards,
                verdict=verdict,
                reasons=reasons,
                inputs_digest=inputs_digest,
                snapshot_id=snapshot_id,
                decided_at=decided_at,
            )

    @contextmanager
    def approving(self, now: datetime) -> Iterator[Approval]:
        """A write transaction that settles ended holds, then reads the active ones at `now`.

        Waits up to 30 s for another check's approval (deploys queue rather than fail); a
        ledger busy for longer is a LedgerError (exit 3) saying so.
        """
        now_s = writes.seconds(now)
        if self.readonly:
            raise LedgerError(self.path, "opened read-only; cannot write")
        with writes.transaction(self.connection, self.path, APPROVAL_BUSY_TIMEOUT_MS) as cursor:
            hold_rows.settle(cursor, now_s)
            yield Approval(cursor, self.path, hold_rows.active(cursor, now_s))

    def release(self, seat: str, now: datetime) -> int:
        """End `seat`'s active hold by hand; how many ended (0: it had none)."""
        now_s = writes.seconds(now)
        with self._transaction() as cursor:
            hold_rows.settle(cursor, now_s)
            return hold_rows.end_seat(cursor, seat, now_s, "released")

    def set_meta(self, key: str, value: str) -> None:
        """Set one `meta` entry, e.g. `demo`: the label of a ledger of invented data."""
        if self.readonly:
            raise LedgerError(self.path, "opened read-only; cannot write")
        writes.set_meta(self.connection, key, value)

    def compact(
        self, cutoff: datetime, progress: rollups.Progress | None = None
    ) -> list[rollups.Compacted]:
        """Remove the raw moments taken before `cutoff` (rounded down to its hour), keeping them as
        hourly rollups; one transaction per batch; the file is then vacuumed. One row per host
        that had any."""
        if self.readonly:
            raise LedgerError(self.path, "opened read-only; cannot write")
        cutoff_s = rollups.hour_s(writes.seconds(cutoff))
        try:
            done = [
                rollups.compact_host(self.connection, host, cutoff_s, progress)
                for host in rollups.hosts_before(self.connection, cutoff_s)
            ]
        except sqlite3.OperationalError as exc:
            raise operational(self.path, exc) from exc
        if done:
            if progress is not None:
                progress("giving the freed pages back to the file system (VACUUM)")
            try:
                rollups.vacuum(self.connection)
            except sqlite3.OperationalError as exc:
                # The moments are removed already; only the file's size waits for a quieter time.
                if progress is not None:
                    progress(
                        f"the file was not shrunk ({exc}); it keeps its size until a later compact"
                    )
        return done

    def fold_wal(self) -> None:
        """Fold the write-ahead log into the file and leave WAL mode (before moving the file)."""
        writes.fold_wal(self.connection)

    # --- reading -------------------------------------------------------------------------

    def hosts(self) -> list[str]:
        """Every host with at least one snapshot, sorted."""
        return queries.hosts(self.connection, self.path)

    def latest(self, host: str) -> Snapshot | None:
        """The newest snapshot of `host`, or None."""
        return queries.latest(self.connection, self.path, host)

    def latest_per_host(self) -> list[Snapshot]:
        """The newest snapshot of every host, sorted by host."""
        out: list[Snapshot] = []
        for host in self.hosts():
            snapshot = self.latest(host)
            if snapshot is not None:
                out.append(snapshot)
        return out

    def card_uuids_before(
        self, host: str, moment: datetime
    ) -> tuple[datetime, frozenset[str], int] | None:
        """When `host`'s newest snapshot before `moment` was taken, its card UUIDs and how many
        of its cards have none; None when it has no snapshot before."""
        return queries.card_uuids_before(self.connection, host, moment)

    def snapshots(
        self, host: str, since: datetime | None = None, until: datetime | None = None
    ) -> Iterator[Snapshot]:
        """Snapshots of `host` taken in [since, until), oldest first (None: unbounded)."""
        return queries.snapshots(self.connection, self.path, host, since, until)

    def snapshot_id(self, host: str, moment: datetime) -> int | None:
        """The id of `host`'s snapshot taken in `moment`'s second, None when there is none."""
        return queries.snapshot_id(self.connection, host, moment)

    def count(self) -> int:
        """How many snapshots the ledger holds."""
        return queries.count(self.connection, self.path)

    def decisions(
        self, since: datetime | None = None, until: datetime | None = None
    ) -> list[dict[str, Any]]:
        """Decisions taken in [since, until), oldest first, with `cards` and `reasons` decoded."""
        return queries.decisions(self.connection, self.path, since, until)

    def holds(self, now: datetime) -> list[Hold]:
        """Holds active at `now` (not expired, not ended, seat not yet seen), oldest first."""
        return hold_rows.active(self.connection, writes.seconds(now))

    def holds_expired_unseen(self, since: datetime, until: datetime, now: datetime) -> list[Hold]:
        """Holds made in [since, until) that expired by `now` without their seat ever being seen."""
        return hold_rows.expired_unseen(
            self.connection, writes.seconds(since), writes.seconds(until), writes.seconds(now)
        )

    def raw_spans(self) -> list[rollups.RawSpan]:
        """Every host's raw moments: how many, first and last, and from when they are kept."""
        return rollups.raw_spans(self.connection)

    def raw_since(self, host: str) -> datetime | None:
        """From when `host`'s raw moments are kept (older ones are hourly rollups only, after a
        `compact`); None when none was ever removed."""
        found = rollups.raw_since(self.connection, host)
        return None if found is None else datetime.fromtimestamp(found, UTC)

    def digest(self) -> str:
        """sha256 over the snapshot, card, process and decision rows in a fixed order."""
        return queries.ledger_digest(self.connection)

    def close(self) -> None:
        """Close the connection."""
        self.connection.close()


@contextmanager
def open_ledger(path: str | Path, *, readonly: bool = False) -> Iterator[Ledger]:
    """Open (or, unless `readonly`, create) the ledger at `path`; LedgerError (exit 3) if unusable.

    A file that is not a gpuplan ledger is never written to. A writable open migrates an
    older schema; a read-only one reads older schemas as they are.
    """
    target = Path(path)
    connection = open_connection(target, readonly=readonly)
    try:
        yield Ledger(connection, str(target), readonly=readonly)
    finally:
        connection.close()
