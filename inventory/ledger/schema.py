"""The ledger file's schema and its migrations, and how a file is opened, recognised and upgraded.

Every error a ledger file can raise is a `LedgerError` (exit 3) made here from SQLite's.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from inventory.ledger import rollups
from inventory.secrets import mask_cmdline
from seats.errors import CannotDecideError

APPLICATION = "gpuplan"
SQLITE_HEADER = b"SQLite format 3\x00"
BUSY_TIMEOUT_MS = 5000
# A check's approval waits longer: deploys queue behind each other rather than fail.
APPROVAL_BUSY_TIMEOUT_MS = 30000
# Creating or migrating a ledger, likewise: several first writers may race for it.
MIGRATION_BUSY_TIMEOUT_MS = APPROVAL_BUSY_TIMEOUT_MS

# MIGRATIONS[n] takes a file at `PRAGMA user_version` n to n + 1. Never edit a released step:
# add one. Version 1 is the schema the ledger, report and exporter agreed on; version 2 adds
# the indexes that range reads and the report's decision queries need; version 3 adds holds
# (approvals that count as held until their seat is seen, they expire, or they are released);
# version 4 masks secrets in the command lines stored before gpuplan masked them on capture
# (a Python step: SQLite has no regular expressions); version 5 records each hold's gate request
# (`requested_bytes`, 0 for the holds stored before: their gates are not known), so a later seat
# that would leave an approved seat's gate short is refused; version 6 keeps each process's
# ancestors' command lines (`parents`, a JSON list nearest first; NULL for the rows before), by
# which a process title such as `VLLM::EngineCore` is attributed to its server's seat. Version 7
# records when each snapshot arrived (`arrived_at_s`, NULL for an imported file and for the rows
# before) and adds the hourly rollups (`card_hours`, `command_hours`, written in each snapshot's
# own transaction) and `raw_kept` (from when `compact` kept a host's raw moments); version 8
# builds the rollups of the snapshots stored before, in place, with progress on stderr.
Step = str | Callable[[sqlite3.Connection], str | None]


def _mask_stored_cmdlines(connection: sqlite3.Connection) -> str | None:
    """Mask every stored command line (inventory.secrets); a note saying how many rows changed."""
    rows = connection.execute(
        "SELECT rowid, cmdline FROM processes WHERE cmdline IS NOT NULL"
    ).fetchall()
    changed = [(masked, rowid) for rowid, line in rows if (masked := mask_cmdline(line)) != line]
    connection.executemany("UPDATE processes SET cmdline = ? WHERE rowid = ?", changed)
    if not changed:
        return None
    return f"masked secrets in {len(changed)} stored command line(s) of {len(rows)}"


def _masked_parents(text: str) -> str:
    """A `parents` column's JSON list with each ancestor's line masked (a damaged one as text)."""
    try:
        lines = json.loads(text)
    except ValueError:
        return mask_cmdline(text)
    if not isinstance(lines, list) or not all(isinstance(line, str) for line in lines):
        return mask_cmdline(text)
    masked = [mask_cmdline(line) for line in lines]
    return text if masked == lines else json.dumps(masked)


def _memo(seen: dict[str, str], text: str, mask: Callable[[str], str]) -> str:
    found = seen.get(text)
    if found is None:
        found = seen[text] = mask(text)
    return found


def _mask_stored_lines(connection: sqlite3.Connection) -> str | None:
    """Mask every stored command line and every stored ancestor's line (`parents`, where the
    ledger has the column); a note saying how many rows changed."""
    parents = "parents" if has_column(connection, "processes", "parents") else "NULL"
    rows = connection.execute(
        f"SELECT rowid, cmdline, {parents} FROM processes"
        f" WHERE cmdline IS NOT NULL OR {parents} IS NOT NULL"
    )
    lines = ancestors = 0
    changed: list[tuple[str | None, str | None, int]] = []
    lines_changed = ancestors_changed = 0
    # A process is stored once per snapshot: its lines repeat, each is masked once.
    seen_lines: dict[str, str] = {}
    seen_above: dict[str, str] = {}
    for rowid, line, above in rows:
        if len(seen_lines) + len(seen_above) > 100_000:
            seen_lines.clear()
            seen_above.clear()
        masked_line = None if line is None else _memo(seen_lines, line, mask_cmdline)
        masked_above = None if above is None else _memo(seen_above, above, _masked_parents)
        lines += line is not None
        ancestors += above is not None
        lines_changed += masked_line != line
        ancestors_changed += masked_above != above
        if masked_line != line or masked_above != above:
            changed.append((masked_line, masked_above, rowid))
    if parents == "parents":
        update = "UPDATE processes SET cmdline = ?, parents = ? WHERE rowid = ?"
        connection.executemany(update, changed)
    else:
        update = "UPDATE processes SET cmdline = ? WHERE rowid = ?"
        connection.executemany(update, [(line, rowid) for line, _, rowid in changed])
    if not changed:
        return None
    note = f"masked secrets in {lines_changed} stored command line(s) of {lines}"
    if ancestors_changed:
        note += f" and in the ancestors' lines of {ancestors_changed} process(es) of {ancestors}"
    return note


def _build_rollups(connection: sqlite3.Connection) -> str | None:
    """Build the hourly rollups of every stored snapshot (a ledger from before them), saying how
    far it got on stderr every few thousand snapshots."""
    path = connection.execute("PRAGMA database_list").fetchone()[2] or "(memory)"
    return rollups.build(connection, rollups.stderr_progress(f"ledger {path}: schema 8: "))


MIGRATIONS: tuple[Step, ...] = (
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
    """
    CREATE TABLE holds(id INTEGER PRIMARY KEY, seat TEXT NOT NULL, host TEXT NOT NULL,
                       need_bytes INTEGER NOT NULL, created_at_s INTEGER NOT NULL,
                       expires_at_s INTEGER NOT NULL, user TEXT NOT NULL, decision_id INTEGER,
                       ended_at_s INTEGER, ended_by TEXT);
    CREATE TABLE hold_cards(hold_id INTEGER NOT NULL REFERENCES holds(id),
                            card_idx INTEGER NOT NULL, PRIMARY KEY(hold_id, card_idx)) WITHOUT ROWID;
    CREATE INDEX holds_open ON holds(ended_at_s, expires_at_s);
    CREATE INDEX holds_by_seat ON holds(seat, ended_at_s);
    """,
    _mask_stored_cmdlines,
    "ALTER TABLE holds ADD COLUMN requested_bytes INTEGER NOT NULL DEFAULT 0;",
    "ALTER TABLE processes ADD COLUMN parents TEXT;",
    """
    ALTER TABLE snapshots ADD COLUMN arrived_at_s INTEGER;
    CREATE TABLE card_hours(host TEXT NOT NULL, hour_s INTEGER NOT NULL, card_idx INTEGER NOT NULL,
                            samples INTEGER NOT NULL, error_samples INTEGER NOT NULL,
                            min_free_bytes INTEGER, min_free_at_s INTEGER, max_used_bytes INTEGER,
                            PRIMARY KEY(host, hour_s, card_idx)) WITHOUT ROWID;
    CREATE TABLE command_hours(host TEXT NOT NULL, hour_s INTEGER NOT NULL,
                               card_idx INTEGER NOT NULL, seat TEXT NOT NULL, cmdline TEXT NOT NULL,
                               samples INTEGER NOT NULL, min_bytes INTEGER NOT NULL,
                               min_at_s INTEGER NOT NULL, max_bytes INTEGER NOT NULL,
                               max_at_s INTEGER NOT NULL,
                               PRIMARY KEY(host, hour_s, card_idx, seat, cmdline)) WITHOUT ROWID;
    CREATE TABLE raw_kept(host TEXT PRIMARY KEY, since_s INTEGER NOT NULL) WITHOUT ROWID;
    """,
    _build_rollups,
)
SCHEMA_VERSION = len(MIGRATIONS)


class LedgerError(CannotDecideError):
    """A ledger file that cannot be used: missing, foreign, corrupt, newer, busy or not writable."""

    def __init__(self, path: str | Path, msg: str) -> None:
        self.path = str(path)
        super().__init__(f"ledger {path}: {msg}")


class ReadOnlyLedgerError(LedgerError):
    """A ledger that can be read but not written (a replica, a read-only mount, mode 0444)."""


def has_column(connection: sqlite3.Connection | sqlite3.Cursor, table: str, column: str) -> bool:
    """True when `table` has `column`: a ledger opened read-only is read at the version it was
    written at, which may be before the migration that added it."""
    return any(row[1] == column for row in connection.execute(f"PRAGMA table_info({table})"))


def operational(
    path: str, exc: sqlite3.OperationalError, busy_ms: int = BUSY_TIMEOUT_MS
) -> LedgerError:
    text = str(exc)
    if "locked" in text or "busy" in text:
        return LedgerError(path, f"busy for over {busy_ms / 1000:g} s (another writer holds it)")
    if "readonly" in text or "read-only" in text:
        return ReadOnlyLedgerError(path, "cannot write: the file or its directory is read-only")
    if "unable to open" in text:
        return LedgerError(path, "cannot open: check the directory exists and is writable")
    # SQLite says "full" when a write came up short (ENOSPC, or a file size limit met midway)
    # and "disk I/O error" when it failed outright (EFBIG, EIO); its transaction is rolled back.
    if "full" in text:
        return LedgerError(
            path,
            "cannot write: the disk is full (or the file reached its size limit); "
            "nothing of this write was stored",
        )
    if "disk I/O error" in text:
        return LedgerError(
            path,
            "cannot write: disk I/O error (a full disk, a file size limit or a failing device); "
            "nothing of this write was stored",
        )
    return LedgerError(path, f"SQLite error: {text}")


def _regular_file(path: Path) -> None:
    """LedgerError unless `path` is a regular file (or a directory, which check_header names).

    Reading a FIFO blocks until a writer comes, and a device (/dev/zero) reads forever
    (DESIGN.md "Never yes by accident": exit 3 without blocking). Decided by `stat`, which
    opens nothing.
    """
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise LedgerError(path, f"cannot read: {exc.strerror or exc}") from exc
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return
    kind = (
        "a FIFO (named pipe)"
        if stat.S_ISFIFO(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "a device"
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        else "not a regular file"
    )
    raise LedgerError(path, f"is {kind}, not a ledger file; left unchanged")


def check_header(path: Path) -> bool:
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


def read_only_reason(path: Path) -> str | None:
    """Why the existing ledger at `path` cannot be written, or None when it can.

    A file whose mode grants no write to anyone is read-only for root as well: root's writes
    go through file modes, and a ledger someone marked 0444 (a copy, a replica) stays as it is.
    """
    try:
        mode = path.stat().st_mode
        flags = os.statvfs(path).f_flag
    except OSError:
        return None  # missing or unreadable: opening it says why
    if flags & os.ST_RDONLY:
        return "it is on a read-only file system"
    if not mode & 0o222:
        return f"its mode is {mode & 0o777:04o} (no one may write it)"
    if not os.access(path, os.W_OK):
        return "this user may not write it"
    if not os.access(path.parent, os.W_OK):
        return f"its directory {path.parent} is not writable (SQLite keeps its journal there)"
    return None


def _read_connection(path: Path, *, immutable: bool) -> sqlite3.Connection:
    options = "mode=ro&immutable=1" if immutable else "mode=ro"
    return sqlite3.connect(
        f"file:{quote(str(path))}?{options}",
        uri=True,
        isolation_level=None,
        timeout=BUSY_TIMEOUT_MS / 1000,
    )


def _open_for_reading(path: Path) -> sqlite3.Connection:
    """A read-only connection; `immutable` where SQLite cannot open it otherwise.

    A WAL ledger opened read-only still needs its `-shm` file, which SQLite cannot create in a
    read-only directory or mount ("unable to open database file"). No one can write there
    either, so reading the file as immutable (no locks, no shared memory) is then safe.
    """
    connection = _read_connection(path, immutable=False)
    try:
        connection.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        if "unable to open" not in str(exc) or read_only_reason(path) is None:
            return connection  # opening it again would not help: identify() says why
        connection.close()
        return _read_connection(path, immutable=True)
    return connection


def connect(path: Path, readonly: bool) -> sqlite3.Connection:
    try:
        if readonly:
            connection = _open_for_reading(path)
        else:
            connection = sqlite3.connect(
                str(path), isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000
            )
        connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    except sqlite3.OperationalError as exc:
        raise operational(str(path), exc) from exc
    return connection


def identify(connection: sqlite3.Connection, path: Path) -> tuple[bool, int]:
    """(is it ours, its user_version); (False, 0) for an empty database. Reads only.

    The reads share one read transaction: a second process creating the ledger at the same
    moment is seen before its first migration or after it, never halfway (tables from before,
    the version from after).
    """
    try:
        connection.execute("BEGIN")
        try:
            tables = {
                r[0]
                for r in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
            version = int(connection.execute("PRAGMA user_version").fetchone()[0])
            row = (
                connection.execute("SELECT value FROM meta WHERE key = 'application'").fetchone()
                if "meta" in tables
                else None
            )
        finally:
            connection.execute("COMMIT")
        if not tables:
            return False, version
        if "meta" not in tables:
            raise LedgerError(
                path,
                "an SQLite file of another application (no gpuplan meta table); left unchanged",
            )
    except sqlite3.OperationalError as exc:
        raise operational(str(path), exc) from exc
    except sqlite3.DatabaseError as exc:
        raise LedgerError(path, f"corrupt or not a database ({exc}); left unchanged") from exc
    if row is None or row[0] != APPLICATION:
        raise LedgerError(
            path, "an SQLite file of another application (meta says otherwise); left unchanged"
        )
    missing = sorted(tables_at(version) - tables)
    if missing:
        # Dropped by hand or by a tool: every command would fail on its first read of it.
        raise LedgerError(
            path,
            f"schema {version} but its table{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)} {'are' if len(missing) > 1 else 'is'} missing "
            "(damaged or edited by hand); left unchanged",
        )
    return True, version


def tables_at(version: int) -> set[str]:
    """The tables a ledger at schema `version` has: those its migrations' CREATE TABLE made."""
    steps = MIGRATIONS[: min(version, SCHEMA_VERSION)]
    return {
        name
        for step in steps
        if isinstance(step, str)
        for name in re.findall(r"CREATE TABLE (\w+)", step)
    }


def migrate(
    connection: sqlite3.Connection, path: Path, version: int, busy_ms: int = BUSY_TIMEOUT_MS
) -> None:
    # Each step runs in its own transaction with its version bump: an interrupted migration
    # leaves the file at the last whole step.
    for step in range(version, SCHEMA_VERSION):
        try:
            connection.execute("BEGIN IMMEDIATE")
            # Another process may have migrated it while this one waited for the lock (two
            # first writers of a new ledger at once): re-read the version under the lock.
            if int(connection.execute("PRAGMA user_version").fetchone()[0]) > step:
                connection.execute("COMMIT")
                continue
            note = _run_step(connection, MIGRATIONS[step])
            connection.execute(f"PRAGMA user_version = {step + 1}")
            connection.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            connection.rollback()
            raise operational(str(path), exc, busy_ms) from exc
        if note:
            print(f"ledger {path}: schema {step + 1}: {note}", file=sys.stderr)


# The masking rule's revision (inventory.secrets). A ledger whose command lines an older rule
# masked (version 4 of the schema masked with the first) is masked again by its next writer:
# kept in `meta`, not in the schema version, as the rule grows with each spelling found.
# 2: the spellings of issue 24 (NAME=value in a word, camelCase, …); 3: those of issue 32 (a
# secret word anywhere in a name, `Authorization:Bearer X`, `-u user:PW`, `https://TOKEN@host`,
# quoted JSON keys …), and from 3 on the ancestors' lines (`parents`) are masked again too;
# 4: mysql's run-in password after `-u USER` that spells a secret word (`-pwd0000`, `-pSECRET`).
MASKING_REVISION = "4"


def remask(connection: sqlite3.Connection, path: Path, busy_ms: int = BUSY_TIMEOUT_MS) -> None:
    """Mask the stored command lines and ancestors' lines again when an older rule stored them."""
    query = "SELECT value FROM meta WHERE key = 'masking'"
    row = connection.execute(query).fetchone()
    if row is not None and row[0] == MASKING_REVISION:
        return
    try:
        connection.execute("BEGIN IMMEDIATE")
        row = connection.execute(query).fetchone()  # another writer may have done it meanwhile
        note = None
        if row is None or row[0] != MASKING_REVISION:
            note = _mask_stored_lines(connection)
            if note and rollups.has_rollups(connection):
                rollups.rebuild_commands(connection, mask_cmdline)
            connection.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('masking', ?)",
                (MASKING_REVISION,),
            )
        connection.execute("COMMIT")
    except sqlite3.OperationalError as exc:
        connection.rollback()
        raise operational(str(path), exc, busy_ms) from exc
    if note:
        print(f"ledger {path}: masking rule {MASKING_REVISION}: {note}", file=sys.stderr)


def _run_step(connection: sqlite3.Connection, step: Step) -> str | None:
    if callable(step):
        return step(connection)
    for statement in step.split(";"):
        if statement.strip():
            connection.execute(statement)
    return None


def open_connection(target: Path, *, readonly: bool) -> sqlite3.Connection:
    """A connection to the ledger at `target`, created and migrated unless `readonly`.

    A file that is not a gpuplan ledger is never written to. A writable open migrates an
    older schema; a read-only one reads older schemas as they are. LedgerError (exit 3) if unusable.
    """
    exists = target.exists()
    if exists:
        _regular_file(target)
    if readonly and not exists:
        raise LedgerError(target, "no such file (fill it with `gpuplan snapshot --ledger`)")
    has_content = check_header(target) if exists else False
    if not exists and not target.parent.exists():
        raise LedgerError(target, f"directory {target.parent} does not exist")
    if not readonly and not exists and not os.access(target.parent, os.W_OK):
        raise LedgerError(target, f"cannot create: directory {target.parent} is not writable")
    if not readonly and exists and (why := read_only_reason(target)) is not None:
        raise ReadOnlyLedgerError(target, f"cannot write: {why}")
    connection = connect(target, readonly)
    try:
        _prepare(connection, target, has_content, readonly=readonly)
    except BaseException:
        connection.close()
        raise
    return connection


def _switch_to_wal(connection: sqlite3.Connection, busy_ms: int) -> None:
    """PRAGMA journal_mode = WAL, retried for up to `busy_ms`.

    While another connection switches a new file to WAL, SQLite answers this pragma "database
    is locked" at once, without waiting in its busy handler (eight first writers at once,
    tests/inventory/ledger/test_holds.py).
    """
    deadline = time.monotonic() + busy_ms / 1000
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            text = str(exc).lower()
            if ("locked" not in text and "busy" not in text) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


# Files found whole by this process, each as (path, device, inode, size, mtime, ctime) of the file
# and of its WAL: a second open of the same unchanged file (a check reads its newest snapshot, its
# holds, then its window) is not read through again. Any write changes the identity.
_INTACT: set[tuple[object, ...]] = set()


def _identity(path: Path) -> tuple[object, ...] | None:
    """What changes when the file or its WAL is written; None when it cannot be read."""
    marks: list[object] = [str(path.resolve())]
    for name in (str(path), f"{path}-wal"):
        try:
            found = os.stat(name)
        except FileNotFoundError:
            marks.append(None)
            continue
        except OSError:
            return None
        marks.append(
            (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns)
        )
    return tuple(marks)


def check_intact(connection: sqlite3.Connection, path: Path) -> None:
    """LedgerError (exit 3) unless SQLite's `PRAGMA quick_check` finds the file whole.

    DESIGN.md "Never yes by accident": a damaged ledger is never written to, and nothing is
    decided on it. A page that is damaged but not read by a query would otherwise let a
    check record a pass and a hold into it (exit 0) while the report fails on the same file.
    It reads every page: about 0.1 s for a week of one 4-card host at one snapshot a minute;
    once per process for a file that has not changed since (`_INTACT`).
    """
    advice = (
        "nothing was read or written; restore it from a backup, or salvage what is left "
        "with `sqlite3 FILE .recover`"
    )
    identity = _identity(path)
    if identity is not None and identity in _INTACT:
        return
    try:
        rows = connection.execute("PRAGMA quick_check").fetchall()
    except sqlite3.DatabaseError as exc:
        damage = "malformed" in str(exc) or "corrupt" in str(exc)
        if isinstance(exc, sqlite3.OperationalError) and not damage:
            raise operational(str(path), exc) from exc  # busy, locked, read-only: not damage
        raise LedgerError(path, f"damaged: SQLite's quick_check fails ({exc}); {advice}") from exc
    if [tuple(row) for row in rows] != [("ok",)]:
        first = str(rows[0][0]) if rows else "no answer"
        more = f" (and {len(rows) - 1} more problems)" if len(rows) > 1 else ""
        raise LedgerError(path, f"damaged: SQLite's quick_check says {first!r}{more}; {advice}")
    if identity is not None:
        _INTACT.add(identity)


def _prepare(
    connection: sqlite3.Connection, target: Path, has_content: bool, *, readonly: bool
) -> None:
    ours, version = identify(connection, target) if has_content else (False, 0)
    if has_content and not ours and version != 0:
        raise LedgerError(target, "an SQLite file of another application; left unchanged")
    if ours:
        check_intact(connection, target)
    if version > SCHEMA_VERSION:
        raise LedgerError(
            target,
            f"schema version {version} is newer than this gpuplan's {SCHEMA_VERSION}; upgrade gpuplan",
        )
    if readonly:
        if not ours:
            raise LedgerError(target, "empty: not a gpuplan ledger yet")
        return
    busy_ms = MIGRATION_BUSY_TIMEOUT_MS if version < SCHEMA_VERSION else BUSY_TIMEOUT_MS
    try:
        connection.execute(f"PRAGMA busy_timeout = {busy_ms}")
        _switch_to_wal(connection, busy_ms)
        # NORMAL in WAL mode loses no committed snapshot to a process crash (only,
        # at worst, the last ones to a power cut) and keeps each write cheap.
        connection.execute("PRAGMA synchronous = NORMAL")
    except sqlite3.OperationalError as exc:
        raise operational(str(target), exc, busy_ms) from exc
    try:
        if version < SCHEMA_VERSION:
            migrate(connection, target, version, busy_ms)
        remask(connection, target, busy_ms)
    finally:
        connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
