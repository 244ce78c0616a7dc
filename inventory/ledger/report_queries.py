"""The ledger's SQL behind `inventory.history`: a host's stored snapshots as rows, and the weekly
report's aggregates over a window, computed in SQL, returned as typed rows.

`prepare_window` fills the temporary tables once per report; every aggregate here uses them.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from inventory.ledger.moments import CardRowValues as CardRowValues
from inventory.ledger.moments import ProcessRowValues as ProcessRowValues
from inventory.ledger.moments import moment_rows as moment_rows  # read by the history
from inventory.ledger.moments import moment_times as moment_times
from inventory.ledger.schema import has_column
from inventory.ledger.writes import parents_from_text

# The handle the report's readers take: the ledger's connection (temporary tables live on it,
# so a read-only ledger serves the report too).
Connection = sqlite3.Connection
# (host, command line, its ancestors' lines nearest first) → the seat whose `match` claims it, or None.
SeatOf = Callable[[str, str, tuple[str, ...]], str | None]

_TEMP_TABLES = (
    "gp_win",
    "gp_attr",
    "gp_key",
    "gp_seat",
    "gp_sorted",
    "gp_foreign",
    "gp_card",
    "gp_part",
    "gp_ext",
)


# --- rows --------------------------------------------------------------------------------


class Span(NamedTuple):
    """First and last snapshot time (unix seconds) and how many snapshots lie between."""

    first_s: int
    last_s: int
    snapshots: int


@dataclass(frozen=True)
class CardUsage:
    """One card over the window: used-byte percentiles (nearest-rank), extremes and when first reached."""

    host: str
    card: int
    samples: int
    error_samples: int
    used_p50_bytes: int | None
    used_p95_bytes: int | None
    used_max_bytes: int | None
    min_free_bytes: int | None
    min_free_at_s: int | None
    unexplained_max_bytes: int | None
    unexplained_max_at_s: int | None
    nvml_v1: bool  # some reading had no driver reserve (NVML v1 only)


class CardPart(NamedTuple):
    """One card over one part [start_s, end_s) of the window: its readable samples, those in
    error, the most used and the least free (None where nothing was read, or the part does not
    bound it). A card's counts sum over its parts, so each sample counts in one part only; its
    extremes are over parts covering the window (a source may count over the window and give
    the least free in a part of the hour first holding it, which dates it cheaply)."""

    host: str
    card: int
    start_s: int
    end_s: int
    samples: int
    error_samples: int
    max_used_bytes: int | None
    min_free_bytes: int | None


@dataclass(frozen=True)
class SeatUsage:
    """One seat on one card over the window, and the medians of the window's first and last part."""

    host: str
    card: int
    seat: str
    samples: int
    p50_bytes: int
    p95_bytes: int
    max_bytes: int
    first_p50_bytes: int | None
    last_p50_bytes: int | None


@dataclass(frozen=True)
class ForeignUsage:
    """Processes of one command line on one card that no seat's `match` claims."""

    host: str
    card: int
    cmdline: str | None
    pids: int
    samples: int
    first_s: int
    last_s: int
    max_bytes: int
    # The server's line above a bare process title (`VLLM::EngineCore`), else None.
    parent: str | None = None


@dataclass(frozen=True)
class Holder:
    """Someone who held memory on a reserved card: a seat name or a foreign command line."""

    name: str
    max_bytes: int


@dataclass(frozen=True)
class ReserveBreaches:
    """The snapshots where others held more of a reserved card than the reserve leaves them."""

    snapshots: int
    first_s: int | None
    last_s: int | None
    worst_bytes: int | None
    worst_at_s: int | None
    holders: tuple[Holder, ...]  # the five largest, largest first


@dataclass(frozen=True)
class DecisionRow:
    """One plan or check recorded in the ledger."""

    decided_at: str
    kind: str
    host: str | None
    seat: str | None
    cards: tuple[int, ...]
    verdict: str
    reasons: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class CardBuckets:
    """One card's samples per time bucket (bucket = taken_at_s // step) and the bytes summed in each."""

    host: str
    card: int
    samples: Mapping[int, int]
    unexplained_bytes: Mapping[int, float]  # Σ max(0, unexplained) per bucket
    seat_bytes: Mapping[str, Mapping[int, float]]  # seat → Σ its bytes per bucket
    free_min_bytes: Mapping[int, float] = field(default_factory=dict)  # lowest free per bucket


class ReserveReading(NamedTuple):
    """A reserved card at one moment, as a source reads it: its used bytes, the bytes of the
    reserve's own seats' processes there (0: none ran), its total and driver reserve (None where
    not read)."""

    at_s: int
    used_bytes: int
    own_bytes: int
    total_bytes: int | None
    reserved_bytes: int | None


class ForeignProcess(NamedTuple):
    """One process no seat claims, on one card over the window, as a source tells it apart: its
    samples, first and last sight and most bytes. `cmdline` and `parents` (its ancestors' lines,
    nearest first) are None and () where the source keeps no command lines (Prometheus)."""

    host: str
    card: int
    pid: int | str
    cmdline: str | None
    parents: tuple[str, ...]
    samples: int
    first_s: int
    last_s: int
    max_bytes: int


class ChartSums(NamedTuple):
    """One card's chart buckets (bucket b covers [b·step, (b+1)·step)) as a source sums them:
    samples, Σ used, Σ each seat's bytes and the lowest free per bucket. `unexplained_bytes` is
    Σ max(0, used − its seats' bytes) over the bucket's moments where the source reads each
    moment; None where it answers per bucket only (Prometheus: each bucket one sample of its
    means), so the bucket's own sums decide it."""

    host: str
    card: int
    samples: Mapping[int, int]
    used_bytes: Mapping[int, float]
    seat_bytes: Mapping[str, Mapping[int, float]]
    free_min_bytes: Mapping[int, float]
    unexplained_bytes: Mapping[int, float] | None = None


# --- spans -------------------------------------------------------------------------------


def ledger_span(conn: Connection) -> Span | None:
    """First and last snapshot time and count of the whole ledger, None when it holds none."""
    return _span(conn.execute("SELECT MIN(taken_at_s), MAX(taken_at_s), COUNT(*) FROM snapshots"))


def newest_decision_s(conn: Connection) -> int | None:
    """When the newest decision was recorded, None when there is none."""
    row = conn.execute("SELECT MAX(decided_at_s) FROM decisions").fetchone()
    return None if row is None or row[0] is None else int(row[0])


def window_span(conn: Connection, start_s: int, end_s: int) -> Span | None:
    """The same over snapshots taken in [start_s, end_s), None when there are none."""
    return _span(
        conn.execute(
            "SELECT MIN(taken_at_s), MAX(taken_at_s), COUNT(*) FROM snapshots "
            "WHERE taken_at_s >= ? AND taken_at_s < ?",
            (start_s, end_s),
        )
    )


def _span(cursor: sqlite3.Cursor) -> Span | None:
    row = cursor.fetchone()
    if row is None or row[2] == 0:
        return None
    return Span(int(row[0]), int(row[1]), int(row[2]))


def newest_per_host(conn: Connection, start_s: int, end_s: int) -> list[tuple[str, int]]:
    """(host, time of its newest snapshot in [start_s, end_s)), by host."""
    return [
        (str(host), int(seconds))
        for host, seconds in conn.execute(
            "SELECT host, MAX(taken_at_s) FROM snapshots WHERE taken_at_s >= ? AND taken_at_s < ? "
            "GROUP BY host ORDER BY host",
            (start_s, end_s),
        )
    ]


# --- the window's temporary tables -------------------------------------------------------


def prepare_window(conn: Connection, start_s: int, end_s: int, seat_of: SeatOf) -> None:
    """Temporary tables the readers share: the window's snapshots, seat keys, seat sums, card rows.

    A process whose seat was not recorded at capture is attributed here by `seat_of` — once
    per distinct (host, command line, ancestors' lines), not once per row.
    """
    # Temporary tables live in memory: they are rebuilt per report and never worth a disk write.
    conn.execute("PRAGMA temp_store = MEMORY")
    for table in _TEMP_TABLES:
        conn.execute(f"DROP TABLE IF EXISTS temp.{table}")
    # The snapshot id is the rowid: every join below finds its snapshot by a rowid lookup.
    conn.execute("CREATE TEMP TABLE gp_win(id INTEGER PRIMARY KEY, host TEXT, taken_at_s INTEGER)")
    conn.execute(
        "INSERT INTO gp_win SELECT id, host, taken_at_s FROM snapshots "
        "WHERE taken_at_s >= ? AND taken_at_s < ?",
        (start_s, end_s),
    )
    # `parents` is '' where a row has none (and in a ledger read as it is before version 6, which
    # has no such column), so the keys and joins below never compare NULLs.
    parents = "COALESCE(p.parents, '')" if has_column(conn, "processes", "parents") else "''"
    joined, seat_sql = _attribute(conn, seat_of, parents)
    _fill_seat_tables(conn, joined, seat_sql, parents)
    _fill_card_table(conn)


def _attribute(conn: Connection, seat_of: SeatOf, parents: str) -> tuple[str, str]:
    """Fill gp_attr (command lines attributed now) and gp_key; return the join and seat SQL.

    `parents` is the SQL of a row's ancestors' lines as text, '' for none.
    """
    conn.execute(
        "CREATE TEMP TABLE gp_attr(host TEXT, cmdline TEXT, parents TEXT, seat TEXT, "
        "PRIMARY KEY(host, cmdline, parents))"
    )
    # One pass finds every (host, card, recorded seat) and every command line with no seat
    # recorded; DISTINCT keeps a tiny b-tree instead of sorting every row.
    found = conn.execute(
        "SELECT DISTINCT w.host, p.card_idx, p.seat, CASE WHEN p.seat IS NULL THEN p.cmdline END, "
        f"CASE WHEN p.seat IS NULL THEN {parents} END "
        "FROM processes p JOIN gp_win w ON w.id = p.snapshot_id"
    ).fetchall()
    attributed: dict[tuple[str, str, str], str | None] = {}
    keys: set[tuple[str, int, str]] = set()
    for host, idx, seat, cmdline, lines in found:
        if seat is None and cmdline is not None:
            key = (host, cmdline, lines)
            if key not in attributed:
                attributed[key] = seat_of(host, cmdline, parents_from_text(lines))
            seat = attributed[key]
        if seat is not None:
            keys.add((host, int(idx), seat))
    rows = [(*key, seat) for key, seat in attributed.items() if seat]
    conn.executemany("INSERT INTO gp_attr VALUES (?, ?, ?, ?)", rows)
    # One small integer key per (host, card, seat): sorting and grouping on it is much cheaper
    # than on two strings and an int.
    conn.execute(
        "CREATE TEMP TABLE gp_key(kid INTEGER PRIMARY KEY, host TEXT, card_idx INTEGER, seat TEXT, "
        "UNIQUE(host, card_idx, seat))"
    )
    conn.executemany("INSERT INTO gp_key(host, card_idx, seat) VALUES (?, ?, ?)", sorted(keys))
    if not rows:  # every seat was recorded at capture (the usual case): no per-row probe
        return "FROM processes p JOIN gp_win w ON w.id = p.snapshot_id ", "p.seat"
    return (
        "FROM processes p JOIN gp_win w ON w.id = p.snapshot_id "
        "LEFT JOIN gp_attr a ON p.seat IS NULL AND a.host = w.host AND a.cmdline = p.cmdline "
        f"AND a.parents = {parents} ",
        "COALESCE(p.seat, a.seat)",
    )


def _fill_seat_tables(conn: Connection, joined: str, seat_of: str, parents: str) -> None:
    """gp_seat (bytes per seat, card and snapshot), gp_foreign (unclaimed processes), gp_sorted."""
    # Bytes per seat, card and snapshot. Rows arrive in snapshot order, so the upsert appends to
    # the b-tree (and sums a seat's several processes) where a GROUP BY would sort every row.
    conn.execute(
        "CREATE TEMP TABLE gp_seat(snapshot_id INTEGER, card_idx INTEGER, kid INTEGER, "
        "taken_at_s INTEGER, bytes INTEGER, PRIMARY KEY(snapshot_id, card_idx, kid)) WITHOUT ROWID"
    )
    conn.execute(
        "INSERT INTO gp_seat "
        "SELECT p.snapshot_id, p.card_idx, k.kid, w.taken_at_s, COALESCE(p.used_bytes, 0) "
        f"{joined} JOIN gp_key k ON k.host = w.host AND k.card_idx = p.card_idx AND k.seat = {seat_of} "
        # `WHERE true` tells the parser that ON CONFLICT belongs to the INSERT, not to the join.
        "WHERE true ON CONFLICT DO UPDATE SET bytes = bytes + excluded.bytes"
    )
    conn.execute(
        "CREATE TEMP TABLE gp_foreign AS "
        "SELECT w.host, w.taken_at_s, p.snapshot_id, p.card_idx, p.pid, p.used_bytes, p.cmdline, "
        f"{parents} AS parents {joined} WHERE {seat_of} IS NULL"
    )
    # The same rows clustered by seat and bytes, for the percentiles' offset walks. Filling a
    # table keyed this way costs a fraction of CREATE INDEX on the WITHOUT ROWID gp_seat.
    conn.execute(
        "CREATE TEMP TABLE gp_sorted(kid INTEGER, bytes INTEGER, snapshot_id INTEGER, "
        "PRIMARY KEY(kid, bytes, snapshot_id)) WITHOUT ROWID"
    )
    conn.execute("INSERT INTO gp_sorted SELECT kid, bytes, snapshot_id FROM gp_seat")


def _fill_card_table(conn: Connection) -> None:
    """gp_card: the window's readable card rows, with unexplained = used − bytes matched to seats."""
    # Card rows clustered by card and used bytes: percentiles walk the primary key, and every
    # per-card query reads one contiguous run of rows instead of looking each up by rowid.
    conn.execute(
        "CREATE TEMP TABLE gp_card(host TEXT, idx INTEGER, used_bytes INTEGER, snapshot_id INTEGER, "
        "taken_at_s INTEGER, free_bytes INTEGER, total_bytes INTEGER, reserved_bytes INTEGER, "
        "unexplained INTEGER, PRIMARY KEY(host, idx, used_bytes, snapshot_id)) WITHOUT ROWID"
    )
    # A primary-key seek into gp_seat per card row.
    conn.execute(
        "INSERT INTO gp_card "
        "SELECT w.host, c.idx, c.used_bytes, c.snapshot_id, w.taken_at_s, c.free_bytes, c.total_bytes, "
        "       c.reserved_bytes, c.used_bytes - COALESCE((SELECT SUM(s.bytes) FROM gp_seat s "
        "         WHERE s.snapshot_id = c.snapshot_id AND s.card_idx = c.idx), 0) AS unexplained "
        "FROM cards c JOIN gp_win w ON w.id = c.snapshot_id "
        "WHERE c.error IS NULL AND c.used_bytes IS NOT NULL"
    )


def _keys(conn: Connection) -> dict[int, tuple[str, int, str]]:
    """kid → (host, card, seat) of gp_key."""
    return {
        int(kid): (host, int(idx), seat)
        for kid, host, idx, seat in conn.execute("SELECT kid, host, card_idx, seat FROM gp_key")
    }


# --- cards: the bounds and the narrow questions `inventory.history.figures.card_usage` asks ---


def card_parts(conn: Connection) -> list[CardPart]:
    """Each card's bounds over the window as one part: the ledger answers a whole window in one
    grouped pass, and finds its first lowest in one join (`first_lowest_free`)."""
    found: dict[tuple[str, int], list[Any]] = {
        (host, int(idx)): [int(n), 0, top, low]
        for host, idx, n, top, low in conn.execute(
            "SELECT host, idx, COUNT(*), MAX(used_bytes), MIN(free_bytes) FROM gp_card "
            "GROUP BY host, idx"
        )
    }
    for host, idx, n in conn.execute(
        "SELECT w.host, c.idx, COUNT(*) FROM cards c JOIN gp_win w ON w.id = c.snapshot_id "
        "WHERE c.error IS NOT NULL GROUP BY w.host, c.idx"
    ):
        found.setdefault((host, int(idx)), [0, 0, None, None])[1] = int(n)
    first, last = conn.execute("SELECT MIN(taken_at_s), MAX(taken_at_s) FROM gp_win").fetchone()
    return [
        CardPart(host, idx, int(first), int(last) + 1, *bounds)
        for (host, idx), bounds in found.items()
    ]


def first_lowest_free(
    conn: Connection, wanted: Mapping[tuple[str, int], tuple[int, int, int]]
) -> dict[tuple[str, int], int]:
    """Per card of `wanted` (start, end, lowest free bytes of [start, end)), the first moment in
    [start, end) with that free: one join of every card at once (not one scan per card)."""
    conn.execute("DROP TABLE IF EXISTS temp.gp_ext")
    conn.execute(
        "CREATE TEMP TABLE gp_ext(host TEXT, idx INTEGER, start_s INTEGER, end_s INTEGER, low INTEGER)"
    )
    conn.executemany(
        "INSERT INTO gp_ext VALUES (?, ?, ?, ?, ?)",
        [(host, idx, *part) for (host, idx), part in wanted.items()],
    )
    return {
        (host, int(idx)): int(at)
        for host, idx, at in conn.execute(
            "SELECT e.host, e.idx, MIN(g.taken_at_s) FROM gp_ext e JOIN gp_card g "
            "ON g.host = e.host AND g.idx = e.idx AND g.free_bytes = e.low "
            "AND g.taken_at_s >= e.start_s AND g.taken_at_s < e.end_s GROUP BY e.host, e.idx"
        )
    }


def used_at_ranks(
    conn: Connection, wanted: Mapping[tuple[str, int], tuple[int, Sequence[int]]]
) -> dict[tuple[str, int], tuple[int, ...]]:
    """Per card of `wanted` (its samples, the ranks asked), its used bytes at each rank, counted
    from 1 in ascending order: an offset walk along gp_card's key, no row read into Python."""
    pick = (
        "SELECT used_bytes FROM gp_card WHERE host = ? AND idx = ? "
        "ORDER BY used_bytes LIMIT 1 OFFSET ?"
    )
    return {
        key: tuple(int(conn.execute(pick, (*key, rank - 1)).fetchone()[0]) for rank in ranks)
        for key, (_, ranks) in wanted.items()
    }


def nvml_v1_cards(conn: Connection) -> set[tuple[str, int]]:
    """The cards some reading of which had no driver reserve (NVML v1 only)."""
    return {
        (host, int(idx))
        for host, idx in conn.execute(
            "SELECT DISTINCT host, idx FROM gp_card WHERE reserved_bytes IS NULL"
        )
    }


def unexplained_max(conn: Connection) -> dict[tuple[str, int], tuple[int, int]]:
    """Per card, the most memory no seat explained (used − its seats' bytes) and when first."""
    return {
        (host, int(idx)): (int(top), int(at))
        for host, idx, top, at in conn.execute(
            "SELECT g.host, g.idx, m.top, MIN(g.taken_at_s) FROM "
            "(SELECT host, idx, MAX(unexplained) AS top FROM gp_card GROUP BY host, idx) m "
            "JOIN gp_card g ON g.host = m.host AND g.idx = m.idx AND g.unexplained = m.top "
            "GROUP BY g.host, g.idx"
        )
    }


# --- seats -------------------------------------------------------------------------------


SeatKey = tuple[str, int, str]


# Where the seats' parts are read: a part's number in gp_part, or gp_sorted for the whole window.
SeatPart = tuple[int, int] | None


def seat_counts(
    conn: Connection, parts: Sequence[SeatPart]
) -> list[dict[SeatKey, tuple[int, int]]]:
    """Per part ([start, end), None for the window): each (host, card, seat) → (samples, most
    bytes). The parts are copied into gp_part first, each its own run of its index, so the
    ranks' offset walks read a part as they read the whole window."""
    names = _keys(conn)
    conn.execute("DROP TABLE IF EXISTS temp.gp_part")
    conn.execute("CREATE TEMP TABLE gp_part(a INTEGER, b INTEGER, kid INTEGER, bytes INTEGER)")
    for bounds in {p for p in parts if p is not None}:
        conn.execute(
            "INSERT INTO gp_part SELECT ?, ?, kid, bytes FROM gp_seat "
            "WHERE taken_at_s >= ? AND taken_at_s < ?",
            (*bounds, *bounds),
        )
    conn.execute("CREATE INDEX temp.gp_part_bytes ON gp_part(a, b, kid, bytes)")
    out: list[dict[SeatKey, tuple[int, int]]] = []
    for part in parts:
        table, where, params = _seat_table(part)
        rows = conn.execute(
            f"SELECT kid, COUNT(*), MAX(bytes) FROM {table} {where} GROUP BY kid", params
        )
        out.append({names[kid]: (int(n), int(top)) for kid, n, top in rows})
    return out


def seat_at_ranks(
    conn: Connection, asks: Sequence[tuple[SeatPart, Mapping[SeatKey, tuple[int, Sequence[int]]]]]
) -> list[dict[SeatKey, tuple[int, ...]]]:
    """Per (part, wanted), each seat's bytes at the ranks asked, counted from 1: offset walks
    along the index (after `seat_counts` of those parts), no row read into Python."""
    kids = {key: kid for kid, key in _keys(conn).items()}
    out: list[dict[SeatKey, tuple[int, ...]]] = []
    for part, wanted in asks:
        table, where, params = _seat_table(part)
        joined = f"{where} AND" if where else "WHERE"
        pick = f"SELECT bytes FROM {table} {joined} kid = ? ORDER BY bytes LIMIT 1 OFFSET ?"
        out.append(
            {
                key: tuple(
                    int(conn.execute(pick, (*params, kids[key], rank - 1)).fetchone()[0])
                    for rank in ranks
                )
                for key, (_, ranks) in wanted.items()
            }
        )
    return out


def _seat_table(part: SeatPart) -> tuple[str, str, tuple[int, ...]]:
    """The table, condition and parameters of a part's rows."""
    return ("gp_sorted", "", ()) if part is None else ("gp_part", "WHERE a = ? AND b = ?", part)


def window_hosts(conn: Connection) -> set[str]:
    """The hosts with a snapshot in the window."""
    return {host for (host,) in conn.execute("SELECT DISTINCT host FROM gp_win")}


def last_sighting(
    conn: Connection, host: str, seat: str, before_s: int, after_s: int
) -> int | None:
    """The newest time in [after_s, before_s) a snapshot of `host` recorded `seat`, None if none.

    Walks back from `before_s`, newest first, and stops at the first sighting; only seats
    recorded at capture are searched.
    """
    row = conn.execute(
        "SELECT s.taken_at_s FROM snapshots s JOIN processes p ON p.snapshot_id = s.id "
        "WHERE s.host = ? AND s.taken_at_s < ? AND s.taken_at_s >= ? AND p.seat = ? "
        "ORDER BY s.taken_at_s DESC LIMIT 1",
        (host, before_s, after_s, seat),
    ).fetchone()
    return int(row[0]) if row and row[0] is not None else None


def foreign_processes(conn: Connection) -> list[ForeignProcess]:
    """Each unclaimed process by host, card, command line, ancestors' lines and pid: its samples,
    first and last sight and most bytes."""
    rows = conn.execute(
        "SELECT host, card_idx, pid, cmdline, parents, COUNT(*), MIN(taken_at_s), "
        "       MAX(taken_at_s), MAX(COALESCE(used_bytes, 0)) "
        "FROM gp_foreign GROUP BY host, card_idx, cmdline, parents, pid"
    ).fetchall()
    return [
        ForeignProcess(
            str(host),
            int(idx),
            int(pid),
            cmdline,
            parents_from_text(parents),
            int(n),
            int(first),
            int(last),
            int(top),
        )
        for host, idx, pid, cmdline, parents, n, first, last, top in rows
    ]


# --- reserves ----------------------------------------------------------------------------


def reserve_readings(
    conn: Connection, host: str, card: int, own: Sequence[str]
) -> list[ReserveReading]:
    """A reserved card at each readable snapshot of the window: used, the bytes of its `own`
    seats' processes, total and driver reserve, oldest first."""
    marks = ",".join("?" for _ in own)
    rows = conn.execute(
        "SELECT g.taken_at_s, g.used_bytes, COALESCE((SELECT SUM(s.bytes) "
        "  FROM gp_seat s JOIN gp_key k ON k.kid = s.kid WHERE s.snapshot_id = g.snapshot_id "
        f"  AND s.card_idx = g.idx AND k.seat IN ({marks})), 0), g.total_bytes, g.reserved_bytes "
        "FROM gp_card g WHERE g.host = ? AND g.idx = ? ORDER BY g.taken_at_s",
        [*own, host, card],
    )
    return [
        ReserveReading(int(at), int(used), int(mine), total, reserved)
        for at, used, mine, total, reserved in rows
    ]


def holders_on(conn: Connection, host: str, card: int) -> list[tuple[str, int]]:
    """(name, most bytes) of everyone who held memory on the card in the window: seats by name,
    unclaimed processes by command line (or pid)."""
    rows = conn.execute(
        "SELECT name, MAX(bytes) FROM ("
        "  SELECT k.seat AS name, s.bytes FROM gp_key k JOIN gp_sorted s ON s.kid = k.kid "
        "  WHERE k.host = ? AND k.card_idx = ? "
        "  UNION ALL SELECT COALESCE(cmdline, 'pid ' || pid), COALESCE(used_bytes, 0) "
        "  FROM gp_foreign WHERE host = ? AND card_idx = ?) GROUP BY name",
        (host, card, host, card),
    ).fetchall()
    return [(str(name), int(top)) for name, top in rows]


# --- decisions ---------------------------------------------------------------------------


def decisions_in(conn: Connection, start_s: int, end_s: int) -> list[DecisionRow]:
    """Decisions taken in [start_s, end_s), oldest first; unreadable JSON reads as empty."""
    rows = conn.execute(
        "SELECT decided_at, kind, host, seat, cards, verdict, reasons FROM decisions "
        "WHERE decided_at_s >= ? AND decided_at_s < ? ORDER BY decided_at_s, id",
        (start_s, end_s),
    ).fetchall()
    return [
        DecisionRow(
            decided_at=decided_at,
            kind=kind,
            host=host,
            seat=seat,
            cards=tuple(int(c) for c in _json_list(cards)),
            verdict=verdict,
            reasons=tuple(r for r in _json_list(reasons) if isinstance(r, dict)),
        )
        for decided_at, kind, host, seat, cards, verdict, reasons in rows
    ]


def _json_list(text: str | None) -> list[Any]:
    # A row written by another tool with bad JSON should not sink the whole report.
    if not text:
        return []
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return []
    return value if isinstance(value, list) else []


# --- charts ------------------------------------------------------------------------------


def chart_sums(conn: Connection, step_s: int) -> list[ChartSums]:
    """Per card of the window, per `step_s`-second bucket: samples, Σ used, Σ max(0, unexplained)
    of each snapshot, the lowest free, and Σ each seat's bytes."""
    samples: dict[tuple[str, int], dict[int, int]] = defaultdict(dict)
    used: dict[tuple[str, int], dict[int, float]] = defaultdict(dict)
    other: dict[tuple[str, int], dict[int, float]] = defaultdict(dict)
    free: dict[tuple[str, int], dict[int, float]] = defaultdict(dict)
    for host, idx, bucket, n, total, unexplained, low in conn.execute(
        "SELECT host, idx, taken_at_s / ? AS b, COUNT(*), SUM(used_bytes), "
        "SUM(MAX(unexplained, 0)), MIN(free_bytes) FROM gp_card GROUP BY b, host, idx",
        (step_s,),
    ):
        samples[(host, idx)][int(bucket)] = int(n)
        used[(host, idx)][int(bucket)] = float(total)
        other[(host, idx)][int(bucket)] = float(unexplained)
        if low is not None:
            free[(host, idx)][int(bucket)] = float(low)
    by_seat: dict[tuple[str, int], dict[str, dict[int, float]]] = defaultdict(
        lambda: defaultdict(dict)
    )
    key_of = _keys(conn)
    for kid, bucket, held in conn.execute(
        "SELECT kid, taken_at_s / ? AS b, SUM(bytes) FROM gp_seat GROUP BY b, kid", (step_s,)
    ):
        host, idx, seat = key_of[int(kid)]
        by_seat[(host, idx)][seat][int(bucket)] = float(held)
    return [
        ChartSums(*key, samples[key], used[key], by_seat.get(key, {}), free[key], other[key])
        for key in samples
    ]
