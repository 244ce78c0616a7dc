"""The weekly capacity report's data: what the ledger saw in a window, aggregated in SQL.

Rendering lives in `report_render` (Markdown, HTML) and `report_charts` (PNG); this module only reads.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from inventory.attribution import attribute, host_seats, match_seat
from inventory.snapshot import Snapshot, format_utc
from placement.fit.capacity import (
    absent_seats,
    cuda_total,
    held_parts,
    plannable_bytes,
    reserve_bytes,
    seats_declared_on,
)
from seats.errors import BadInputError, CannotDecideError
from seats.model import Catalogue, Engine, Seat
from seats.units import GiB, format_bytes, parse_bytes

# Percentiles are nearest-rank: the p-th percentile of N ascending samples is the sample
# at 1-based rank ceil(p × N / 100). It is always a value that was really observed, and in
# integer SQL ceil(p·N/100) is (p·N + 99) / 100.
PERCENTILE_DEFINITION = (
    "nearest-rank: the p-th percentile of N samples sorted ascending is the sample at rank "
    "ceil(p/100 × N), counting from 1 — always a value the ledger really recorded"
)

_WEEK = re.compile(r"^(\d{4})-?W(\d{1,2})$", re.IGNORECASE)
LOOKBACK_DAYS = 90  # how far before the window a missing seat's last sighting is searched
_CHART_STEPS_S = (60, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)
_CHART_POINTS = 400  # a week in 30-minute means


# --- the window -------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """The half-open span [start_s, end_s) of unix seconds the report covers."""

    start_s: int
    end_s: int
    label: str

    @property
    def start(self) -> datetime:
        """Start as a UTC datetime."""
        return datetime.fromtimestamp(self.start_s, UTC)

    @property
    def end(self) -> datetime:
        """End (exclusive) as a UTC datetime."""
        return datetime.fromtimestamp(self.end_s, UTC)


def parse_week(text: str) -> Window:
    """'2026-W38' → Monday 00:00 UTC to the next Monday; bad input (exit 2) otherwise."""
    match = _WEEK.match(text.strip())
    if match is None:
        raise BadInputError(f"--week {text!r}: write an ISO week like 2026-W38")
    year, week = int(match.group(1)), int(match.group(2))
    try:
        monday = datetime.fromisocalendar(year, week, 1).replace(tzinfo=UTC)
    except ValueError as exc:
        raise BadInputError(f"--week {text!r}: {year} has no ISO week {week}") from exc
    start_s = int(monday.timestamp())
    return Window(start_s, start_s + 7 * 86400, f"{year}-W{week:02d}")


def window_since(age: timedelta, until_s: int) -> Window:
    """The `age` up to and including `until_s` (the newest snapshot, by default)."""
    seconds = int(age.total_seconds())
    if seconds <= 0:
        raise BadInputError(f"--since must be a positive age, got {age}")
    end_s = until_s + 1  # the newest snapshot belongs to the window
    return Window(end_s - seconds, end_s, f"{_age_label(seconds)} to {format_utc(_utc(until_s))}")


def _age_label(seconds: int) -> str:
    if seconds % 86400 == 0:
        return f"{seconds // 86400} d"
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    return f"{seconds // 60} min"


def _utc(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


# --- the drift threshold ----------------------------------------------------------------


@dataclass(frozen=True)
class DriftThreshold:
    """A seat is flagged when |drift| reaches `percent` of its declared resident or `bytes`."""

    percent: float | None = 5.0
    bytes: int | None = GiB

    def flags(self, drift_bytes: int, declared_bytes: int) -> bool:
        """True when the drift passes either bound."""
        size = abs(drift_bytes)
        if size == 0:
            return False
        if self.bytes is not None and size >= self.bytes:
            return True
        return (
            self.percent is not None
            and declared_bytes > 0
            and size * 100 >= self.percent * declared_bytes
        )

    def text(self) -> str:
        """'5% or 1.00 GiB'."""
        parts = []
        if self.percent is not None:
            parts.append(f"{self.percent:g}%")
        if self.bytes is not None:
            parts.append(format_bytes(self.bytes))
        return " or ".join(parts)


def parse_threshold(text: str) -> DriftThreshold:
    """'5%,1GiB', '10%' or '2 GiB' → DriftThreshold; bad input (exit 2) otherwise."""
    percent: float | None = None
    size: int | None = None
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if part.endswith("%"):
            try:
                percent = float(part[:-1])
            except ValueError as exc:
                raise BadInputError(
                    f"--drift-threshold: cannot read {part!r} as a percentage"
                ) from exc
            if not 0 < percent <= 1000:
                raise BadInputError(f"--drift-threshold: {part!r} must be above 0%")
        else:
            try:
                size = parse_bytes(part, "--drift-threshold", allow_zero=False)
            except ValueError as exc:
                raise BadInputError(str(exc)) from exc
    if percent is None and size is None:
        raise BadInputError(f"--drift-threshold {text!r}: write e.g. 5%,1GiB")
    return DriftThreshold(percent, size)


# --- what the report holds --------------------------------------------------------------


@dataclass(frozen=True)
class CardFit:
    """The largest new seat the verifier lets onto one card now."""

    card: int
    largest_bytes: int  # a seat without a start-up gate (engine kind other)
    largest_vllm_bytes: int  # a vLLM seat whose util asks for its resident (gate included)
    vllm_util: str | None  # the util that seat would start with
    binding: str  # what stops the next byte: rule names from the verifier


@dataclass(frozen=True)
class Headline:
    """Per host: room now, whether reserves held, and the one thing most worth acting on."""

    host: str
    taken_at: str
    fits: tuple[CardFit, ...]
    reserves_honoured: bool
    reserves_text: str
    action: str
    other_actions: tuple[str, ...]


@dataclass(frozen=True)
class CardRow:
    """One card over the window, and its state at the newest snapshot."""

    host: str
    card: int
    uuid: str | None
    samples: int
    error_samples: int
    total_bytes: int | None
    reserved_bytes: int | None
    declared_bytes: int
    held_bytes: int
    used_p50_bytes: int | None
    used_p95_bytes: int | None
    used_max_bytes: int | None
    min_free_bytes: int | None
    min_free_at: str | None
    unexplained_now_bytes: int | None
    unexplained_max_bytes: int | None
    unexplained_max_at: str | None
    free_now_bytes: int | None
    plannable_now_bytes: int
    nvml_v1: bool


@dataclass(frozen=True)
class SeatRow:
    """One seat on one card: declared vs observed, drift and growth over the window."""

    seat: str
    host: str
    card: int
    declared_bytes: int | None  # None: a seat the catalogue does not know (renamed?)
    samples: int
    p50_bytes: int
    p95_bytes: int
    max_bytes: int
    drift_bytes: int | None  # p95 − declared
    drift_percent: float | None
    flagged: bool
    first_p50_bytes: int | None  # median over the first part of the window
    last_p50_bytes: int | None  # median over the last part
    growth_bytes: int | None
    grew: bool


@dataclass(frozen=True)
class MissingSeat:
    """A running seat with a `match` that no snapshot of the window shows (stopped?)."""

    seat: str
    host: str
    cards: tuple[int, ...]
    declared_bytes: int
    last_seen: str | None  # newest sighting before the window, if any


@dataclass(frozen=True)
class ForeignProcess:
    """A process no seat's `match` claims, by host, card and command line."""

    host: str
    card: int
    cmdline: str | None
    pids: int
    samples: int
    first_at: str
    last_at: str
    max_bytes: int


@dataclass(frozen=True)
class ReserveRow:
    """One reserve, its card, and the snapshots where something else ate into it."""

    name: str
    host: str
    card: int
    for_seats: tuple[str, ...]
    reserve_bytes: int | None
    violations: int
    first_at: str | None
    last_at: str | None
    worst_bytes: int | None  # most bytes others held on the card in one snapshot
    worst_at: str | None
    holders: tuple[str, ...]
    violated_now: bool


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
class LoraRow:
    """One LoRA carrier: its adapters and what serving them as adapters saves."""

    seat: str
    host: str | None
    max_loras: int
    persisted: tuple[str, ...]
    runtime_only: tuple[str, ...]
    carrier_bytes: int
    weights_bytes: int | None
    merged_bytes: int | None  # N × weights: merged copies' weights alone
    saved_bytes: int | None  # merged − carrier resident


@dataclass(frozen=True)
class ChartSeries:
    """One card's used bytes over the window, bucketed, stacked by seat (means per bucket)."""

    host: str
    card: int
    bucket_s: int
    times_s: tuple[int, ...]
    layers: tuple[tuple[str, tuple[float, ...]], ...]  # seat → mean bytes per bucket; "other" last
    cuda_total_bytes: int | None
    declared_bytes: int
    held_bytes: int


@dataclass(frozen=True)
class Report:
    """Everything the renderers print, in the order they print it."""

    window: Window
    ledger: str
    first_at: str
    last_at: str
    snapshots: int
    threshold: DriftThreshold
    headlines: tuple[Headline, ...]
    cards: tuple[CardRow, ...]
    seats: tuple[SeatRow, ...]
    missing: tuple[MissingSeat, ...]
    absent_now: tuple[tuple[str, str, int], ...]  # (seat, host, card) down at the newest snapshot
    foreign: tuple[ForeignProcess, ...]
    reserves: tuple[ReserveRow, ...]
    decisions: tuple[DecisionRow, ...]
    loras: tuple[LoraRow, ...]
    charts: tuple[ChartSeries, ...]
    notes: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        """The report as JSON data: `"schema": 1` and raw byte ints."""
        from dataclasses import asdict

        data = asdict(self)
        data.pop("charts")
        data["window"] = {
            "start": format_utc(self.window.start),
            "end": format_utc(self.window.end),
            "label": self.window.label,
        }
        data["threshold"] = {"percent": self.threshold.percent, "bytes": self.threshold.bytes}
        data["percentile"] = PERCENTILE_DEFINITION
        return {"schema": 1, **data}


# --- building it ------------------------------------------------------------------------

# A verifier probe: (catalogue, attributed snapshot, card, resident, vllm?) → (passes, binding rules, util).
Probe = Callable[[Catalogue, Snapshot, int, int, bool], tuple[bool, str, str | None]]


def ledger_span(conn: sqlite3.Connection) -> tuple[int, int, int] | None:
    """(first, last, count) of snapshot times in the ledger, None when it holds none."""
    row = conn.execute(
        "SELECT MIN(taken_at_s), MAX(taken_at_s), COUNT(*) FROM snapshots"
    ).fetchone()
    if row is None or row[2] == 0:
        return None
    return int(row[0]), int(row[1]), int(row[2])


def build_report(
    conn: sqlite3.Connection,
    catalogue: Catalogue,
    window: Window,
    latest: Sequence[Snapshot],
    *,
    ledger_name: str,
    now: datetime,
    threshold: DriftThreshold = DriftThreshold(),
    probe: Probe | None = None,
    on_charts: Callable[[tuple[ChartSeries, ...]], None] | None = None,
) -> Report:
    """Aggregate the window's rows in SQL and join them with the catalogue.

    `latest` are the newest snapshots per host inside the window (the "now" of the report);
    `probe` asks the verifier whether a seat of a given size fits a card (see `verifier_probe`);
    `on_charts` receives the chart series as soon as they are aggregated, before the rest.
    """
    span = conn.execute(
        "SELECT MIN(taken_at_s), MAX(taken_at_s), COUNT(*) FROM snapshots WHERE taken_at_s >= ? AND taken_at_s < ?",
        (window.start_s, window.end_s),
    ).fetchone()
    if span is None or span[2] == 0:
        raise CannotDecideError(f"ledger {ledger_name} holds no snapshot in {window.label}")
    first_s, last_s, count = int(span[0]), int(span[1]), int(span[2])
    _prepare(conn, catalogue, window)
    current = {s.host: attribute(s, catalogue) for s in latest}
    # Charts first: a caller can draw them while the rest is aggregated.
    charts = _charts(conn, catalogue, current, first_s, last_s)
    if on_charts is not None:
        on_charts(charts)
    notes: list[str] = []
    age = now - _utc(last_s)
    if age > timedelta(hours=1):
        notes.append(
            f"the newest snapshot in the window is from {format_utc(_utc(last_s))}, "
            f"{age.days} d {age.seconds // 3600} h before this report was made; 'now' means that snapshot"
        )
    cards = _cards(conn, catalogue, current)
    if any(c.nvml_v1 for c in cards):
        notes.append(
            "some cards were read through NVML v1 only: their used bytes include the driver reserve"
        )
    for host in sorted(set(current) - set(catalogue.hosts)):
        notes.append(
            f"host {host} is not in the catalogue: nothing is declared, held or reserved there, "
            "and every process on it counts as matching no seat"
        )
    seats = _seats(conn, catalogue, threshold, first_s, last_s)
    missing = _missing(conn, catalogue, window, {(s.seat, s.host) for s in seats})
    absent_now = tuple(
        (seat.name, host, card.index)
        for host, snapshot in current.items()
        for card in snapshot.cards
        if card.ok
        for seat in absent_seats(catalogue, host, card)
    )
    foreign = _foreign(conn)
    reserves = _reserves(conn, catalogue, current)
    decisions = _decisions(conn, window)
    loras = _loras(catalogue)
    headlines = tuple(
        _headline(
            catalogue,
            snapshot,
            cards,
            seats,
            missing,
            absent_now,
            foreign,
            reserves,
            decisions,
            loras,
            probe,
        )
        for snapshot in current.values()
    )
    return Report(
        window=window,
        ledger=ledger_name,
        first_at=format_utc(_utc(first_s)),
        last_at=format_utc(_utc(last_s)),
        snapshots=count,
        threshold=threshold,
        headlines=headlines,
        cards=cards,
        seats=seats,
        missing=missing,
        absent_now=absent_now,
        foreign=foreign,
        reserves=reserves,
        decisions=decisions,
        loras=loras,
        charts=charts,
        notes=tuple(notes),
    )


def _prepare(conn: sqlite3.Connection, catalogue: Catalogue, window: Window) -> None:
    """Temporary tables the queries share: the window's snapshots, seat keys, seat sums, card rows.

    A process whose seat was not recorded at capture is attributed here by the catalogue's
    `match` regexes — once per distinct command line, not once per row.
    """
    # Temporary tables live in memory: they are rebuilt per report and never worth a disk write.
    conn.execute("PRAGMA temp_store = MEMORY")
    tables = (
        "gp_win",
        "gp_attr",
        "gp_key",
        "gp_seat",
        "gp_sorted",
        "gp_foreign",
        "gp_card",
        "gp_part",
    )
    for table in tables:
        conn.execute(f"DROP TABLE IF EXISTS temp.{table}")
    # The snapshot id is the rowid: every join below finds its snapshot by a rowid lookup.
    conn.execute("CREATE TEMP TABLE gp_win(id INTEGER PRIMARY KEY, host TEXT, taken_at_s INTEGER)")
    conn.execute(
        "INSERT INTO gp_win SELECT id, host, taken_at_s FROM snapshots "
        "WHERE taken_at_s >= ? AND taken_at_s < ?",
        (window.start_s, window.end_s),
    )
    conn.execute(
        "CREATE TEMP TABLE gp_attr(host TEXT, cmdline TEXT, seat TEXT, PRIMARY KEY(host, cmdline))"
    )
    # One pass finds every (host, card, recorded seat) and every command line with no seat
    # recorded; DISTINCT keeps a tiny b-tree instead of sorting every row.
    found = conn.execute(
        "SELECT DISTINCT w.host, p.card_idx, p.seat, CASE WHEN p.seat IS NULL THEN p.cmdline END "
        "FROM processes p JOIN gp_win w ON w.id = p.snapshot_id"
    ).fetchall()
    seats_of: dict[str, list[Seat]] = {}
    attributed: dict[tuple[str, str], str | None] = {}
    keys: set[tuple[str, int, str]] = set()
    for host, idx, seat, cmdline in found:
        if seat is None and cmdline is not None:
            if (host, cmdline) not in attributed:
                seats = seats_of.setdefault(host, host_seats(catalogue, host))
                attributed[(host, cmdline)] = match_seat(cmdline, seats)
            seat = attributed[(host, cmdline)]
        if seat is not None:
            keys.add((host, int(idx), seat))
    rows = [(host, cmdline, seat) for (host, cmdline), seat in attributed.items() if seat]
    conn.executemany("INSERT INTO gp_attr VALUES (?, ?, ?)", rows)
    if rows:
        seat_of = "COALESCE(p.seat, a.seat)"
        joined = (
            "FROM processes p JOIN gp_win w ON w.id = p.snapshot_id "
            "LEFT JOIN gp_attr a ON p.seat IS NULL AND a.host = w.host AND a.cmdline = p.cmdline "
        )
    else:  # every seat was recorded at capture (the usual case): no per-row probe
        seat_of = "p.seat"
        joined = "FROM processes p JOIN gp_win w ON w.id = p.snapshot_id "
    # One small integer key per (host, card, seat): sorting and grouping on it is much cheaper
    # than on two strings and an int.
    conn.execute(
        "CREATE TEMP TABLE gp_key(kid INTEGER PRIMARY KEY, host TEXT, card_idx INTEGER, seat TEXT, "
        "UNIQUE(host, card_idx, seat))"
    )
    conn.executemany("INSERT INTO gp_key(host, card_idx, seat) VALUES (?, ?, ?)", sorted(keys))
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
        "SELECT w.host, w.taken_at_s, p.snapshot_id, p.card_idx, p.pid, p.used_bytes, p.cmdline "
        f"{joined} WHERE {seat_of} IS NULL"
    )
    # Card rows clustered by card and used bytes: percentiles walk the primary key, and every
    # per-card query reads one contiguous run of rows instead of looking each up by rowid.
    conn.execute(
        "CREATE TEMP TABLE gp_card(host TEXT, idx INTEGER, used_bytes INTEGER, snapshot_id INTEGER, "
        "taken_at_s INTEGER, free_bytes INTEGER, total_bytes INTEGER, reserved_bytes INTEGER, "
        "unexplained INTEGER, PRIMARY KEY(host, idx, used_bytes, snapshot_id)) WITHOUT ROWID"
    )
    # Unexplained = used − bytes of processes matched to seats: a primary-key seek per card row.
    conn.execute(
        "INSERT INTO gp_card "
        "SELECT w.host, c.idx, c.used_bytes, c.snapshot_id, w.taken_at_s, c.free_bytes, c.total_bytes, "
        "       c.reserved_bytes, c.used_bytes - COALESCE((SELECT SUM(s.bytes) FROM gp_seat s "
        "         WHERE s.snapshot_id = c.snapshot_id AND s.card_idx = c.idx), 0) AS unexplained "
        "FROM cards c JOIN gp_win w ON w.id = c.snapshot_id "
        "WHERE c.error IS NULL AND c.used_bytes IS NOT NULL"
    )
    # The same rows clustered by seat and bytes, for the percentiles' offset walks. Filling a
    # table keyed this way costs a fraction of CREATE INDEX on the WITHOUT ROWID gp_seat.
    conn.execute(
        "CREATE TEMP TABLE gp_sorted(kid INTEGER, bytes INTEGER, snapshot_id INTEGER, "
        "PRIMARY KEY(kid, bytes, snapshot_id)) WITHOUT ROWID"
    )
    conn.execute("INSERT INTO gp_sorted SELECT kid, bytes, snapshot_id FROM gp_seat")


def _keys(conn: sqlite3.Connection) -> dict[int, tuple[str, int, str]]:
    """kid → (host, card, seat) of gp_key."""
    return {
        int(kid): (host, int(idx), seat)
        for kid, host, idx, seat in conn.execute("SELECT kid, host, card_idx, seat FROM gp_key")
    }


def percentiles(
    conn: sqlite3.Connection,
    table: str,
    keys: Sequence[str],
    value: str,
    where: str = "",
    params: Sequence[Any] = (),
) -> dict[tuple[Any, ...], tuple[int, int, int, int]]:
    """key → (samples, p50, p95, max) of `value` in `table`, nearest-rank, in SQL.

    One grouped count, then per key and percentile one `ORDER BY value LIMIT 1 OFFSET rank − 1`
    walked along an index on (keys…, value): no row ever reaches Python.
    """
    k = ", ".join(keys)
    extra = f" AND ({where})" if where else ""
    counts = conn.execute(
        f"SELECT {k}, COUNT(*), MAX({value}) FROM {table} WHERE {value} IS NOT NULL{extra} GROUP BY {k}",
        tuple(params),
    ).fetchall()
    match = " AND ".join(f"{key} = ?" for key in keys)
    pick = f"SELECT {value} FROM {table} WHERE {match} AND {value} IS NOT NULL{extra} ORDER BY {value} LIMIT 1 OFFSET ?"
    width = len(keys)
    out: dict[tuple[Any, ...], tuple[int, int, int, int]] = {}
    for row in counts:
        key = tuple(row[:width])
        n, top = int(row[width]), int(row[width + 1])
        ranks = [(p * n + 99) // 100 for p in (50, 95)]
        values = [
            int(conn.execute(pick, (*key, *params, rank - 1)).fetchone()[0]) for rank in ranks
        ]
        out[key] = (n, values[0], values[1], top)
    return out


def _declared(catalogue: Catalogue, host: str, index: int) -> int:
    return sum(seat.resident_bytes for seat in seats_declared_on(catalogue, host, index))


def _cards(
    conn: sqlite3.Connection, catalogue: Catalogue, current: dict[str, Snapshot]
) -> tuple[CardRow, ...]:
    used = percentiles(conn, "gp_card", ("host", "idx"), "used_bytes")
    # One pass for the extremes; then, per card, the earliest time each was reached.
    summary = {
        (host, idx): (low, high, int(v1_rows or 0))
        for host, idx, low, high, v1_rows in conn.execute(
            "SELECT host, idx, MIN(free_bytes), MAX(unexplained), SUM(reserved_bytes IS NULL) "
            "FROM gp_card GROUP BY host, idx"
        )
    }

    # One join per extreme finds every card's earliest time at once (not one scan per card).
    conn.execute("DROP TABLE IF EXISTS temp.gp_ext")
    conn.execute("CREATE TEMP TABLE gp_ext(host TEXT, idx INTEGER, low INTEGER, high INTEGER)")
    conn.executemany(
        "INSERT INTO gp_ext VALUES (?, ?, ?, ?)",
        [(host, idx, low, high) for (host, idx), (low, high, _) in summary.items()],
    )

    def first_times(column: str, extreme: str) -> dict[tuple[Any, ...], tuple[int, int]]:
        return {
            (host, idx): (int(value), int(at))
            for host, idx, value, at in conn.execute(
                f"SELECT e.host, e.idx, e.{extreme}, MIN(g.taken_at_s) FROM gp_ext e "
                f"JOIN gp_card g ON g.host = e.host AND g.idx = e.idx AND g.{column} = e.{extreme} "
                "GROUP BY e.host, e.idx"
            )
        }

    min_free = first_times("free_bytes", "low")
    worst = first_times("unexplained", "high")
    v1 = {key for key, (_, _, v1_rows) in summary.items() if v1_rows}
    errors = {
        (host, idx): int(n)
        for host, idx, n in conn.execute(
            "SELECT w.host, c.idx, COUNT(*) FROM cards c JOIN gp_win w ON w.id = c.snapshot_id "
            "WHERE c.error IS NOT NULL GROUP BY w.host, c.idx"
        )
    }
    # Unexplained now: the same rule (used − bytes of processes matched to seats) on the
    # attributed newest snapshot, which is at hand already.
    now_unexplained = {
        (host, card.index): (card.used_bytes or 0)
        - sum(p.used_bytes or 0 for p in card.processes if p.seat is not None)
        for host, snapshot in current.items()
        for card in snapshot.cards
        if card.ok
    }
    keys = sorted(set(used) | set(errors))
    rows: list[CardRow] = []
    for host, idx in keys:
        snapshot = current.get(host)
        card = None
        if snapshot is not None:
            try:
                card = snapshot.card(idx)
            except KeyError:
                card = None
        samples, p50, p95, top = used.get((host, idx), (0, None, None, None))  # type: ignore[assignment]
        low = min_free.get((host, idx))
        high = worst.get((host, idx))
        rows.append(
            CardRow(
                host=host,
                card=idx,
                uuid=card.uuid if card is not None else None,
                samples=samples,
                error_samples=errors.get((host, idx), 0),
                total_bytes=card.total_bytes if card is not None else None,
                reserved_bytes=card.reserved_bytes if card is not None else None,
                declared_bytes=_declared(catalogue, host, idx),
                held_bytes=sum(p.bytes for p in held_parts(catalogue, host, card))
                if card is not None and card.ok
                else 0,
                used_p50_bytes=p50,
                used_p95_bytes=p95,
                used_max_bytes=top,
                min_free_bytes=low[0] if low else None,
                min_free_at=format_utc(_utc(low[1])) if low else None,
                unexplained_now_bytes=now_unexplained.get((host, idx)),
                unexplained_max_bytes=high[0] if high else None,
                unexplained_max_at=format_utc(_utc(high[1])) if high else None,
                free_now_bytes=card.free_bytes if card is not None else None,
                plannable_now_bytes=plannable_bytes(catalogue, snapshot, card)
                if snapshot is not None and card is not None
                else 0,
                nvml_v1=(host, idx) in v1,
            )
        )
    return tuple(rows)


def _segment(first_s: int, last_s: int) -> int:
    """Length of the 'first' and 'last' parts compared for growth: a day, or a quarter of a short window."""
    return max(1, min(86400, (last_s - first_s) // 4))


def _seats(
    conn: sqlite3.Connection,
    catalogue: Catalogue,
    threshold: DriftThreshold,
    first_s: int,
    last_s: int,
) -> tuple[SeatRow, ...]:
    names = _keys(conn)
    stats = {
        names[kid]: value
        for (kid,), value in percentiles(conn, "gp_sorted", ("kid",), "bytes").items()
    }
    seg = _segment(first_s, last_s)
    # The first and last parts get their own small indexed table, so their medians are
    # offset walks too rather than filtered scans of the whole window.
    conn.execute(
        "CREATE TEMP TABLE gp_part AS SELECT kid, taken_at_s > ? AS part, bytes "
        "FROM gp_seat WHERE taken_at_s < ? OR taken_at_s > ?",
        (last_s - seg, first_s + seg, last_s - seg),
    )
    conn.execute("CREATE INDEX temp.gp_part_bytes ON gp_part(kid, part, bytes)")
    parts = {
        (*names[kid], part): value
        for (kid, part), value in percentiles(conn, "gp_part", ("kid", "part"), "bytes").items()
    }
    known = {seat.name: seat for seat in catalogue.seats}
    rows: list[SeatRow] = []
    for (host, idx, name), (samples, p50, p95, top) in sorted(
        stats.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][1])
    ):
        seat = known.get(name)
        declared = seat.resident_bytes if seat is not None else None
        drift = p95 - declared if declared is not None else None
        first = parts.get((host, idx, name, 0))
        last = parts.get((host, idx, name, 1))
        growth = last[1] - first[1] if first is not None and last is not None else None
        rows.append(
            SeatRow(
                seat=name,
                host=host,
                card=idx,
                declared_bytes=declared,
                samples=samples,
                p50_bytes=p50,
                p95_bytes=p95,
                max_bytes=top,
                drift_bytes=drift,
                drift_percent=round(100 * drift / declared, 2)
                if drift is not None and declared
                else None,
                flagged=drift is not None
                and declared is not None
                and threshold.flags(drift, declared),
                first_p50_bytes=first[1] if first is not None else None,
                last_p50_bytes=last[1] if last is not None else None,
                growth_bytes=growth,
                grew=growth is not None and growth > 0 and threshold.flags(growth, declared or p50),
            )
        )
    return tuple(rows)


def _missing(
    conn: sqlite3.Connection, catalogue: Catalogue, window: Window, seen: set[tuple[str, str]]
) -> tuple[MissingSeat, ...]:
    hosts = {host for (host,) in conn.execute("SELECT DISTINCT host FROM gp_win")}
    out: list[MissingSeat] = []
    for seat in catalogue.seats:
        if (
            seat.state != "running"
            or seat.match is None
            or seat.host is None
            or seat.host not in hosts
        ):
            continue
        if (seat.name, seat.host) in seen:
            continue
        # Walk back from the window's start, newest first, and stop at the first sighting; only
        # seats recorded at capture are searched, and no further back than LOOKBACK_DAYS.
        row = conn.execute(
            "SELECT s.taken_at_s FROM snapshots s JOIN processes p ON p.snapshot_id = s.id "
            "WHERE s.host = ? AND s.taken_at_s < ? AND s.taken_at_s >= ? AND p.seat = ? "
            "ORDER BY s.taken_at_s DESC LIMIT 1",
            (seat.host, window.start_s, window.start_s - LOOKBACK_DAYS * 86400, seat.name),
        ).fetchone()
        last = format_utc(_utc(int(row[0]))) if row and row[0] is not None else None
        out.append(
            MissingSeat(seat.name, seat.host, seat.pinned_cards or (), seat.resident_bytes, last)
        )
    return tuple(out)


def _foreign(conn: sqlite3.Connection) -> tuple[ForeignProcess, ...]:
    rows = conn.execute(
        "SELECT host, card_idx, cmdline, COUNT(DISTINCT pid), COUNT(*), MIN(taken_at_s), MAX(taken_at_s), "
        "       MAX(COALESCE(used_bytes, 0)) "
        "FROM gp_foreign GROUP BY host, card_idx, cmdline "
        "ORDER BY host, card_idx, MIN(taken_at_s)"
    ).fetchall()
    return tuple(
        ForeignProcess(
            host=host,
            card=int(idx),
            cmdline=cmdline,
            pids=int(pids),
            samples=int(n),
            first_at=format_utc(_utc(int(first))),
            last_at=format_utc(_utc(int(last))),
            max_bytes=int(top),
        )
        for host, idx, cmdline, pids, n, first, last, top in rows
    )


def _reserves(
    conn: sqlite3.Connection, catalogue: Catalogue, current: dict[str, Snapshot]
) -> tuple[ReserveRow, ...]:
    rows: list[ReserveRow] = []
    for reserve in catalogue.reserves:
        snapshot = current.get(reserve.host)
        card = None
        if snapshot is not None:
            try:
                card = snapshot.card(reserve.gpu)
            except KeyError:
                card = None
        held = (
            reserve_bytes(reserve, card)
            if card is not None and card.ok
            else (None if reserve.amount_bytes == "card" else int(reserve.amount_bytes))
        )
        own = ",".join("?" for _ in reserve.for_)
        # Others may use what the reserve leaves of the card: cuda_total − reserve bytes
        # (nothing, for a whole-card reserve). More than that in one snapshot is a violation.
        fixed = None if reserve.amount_bytes == "card" else int(reserve.amount_bytes)
        allowed = (
            "0" if fixed is None else "MAX(0, g.total_bytes - COALESCE(g.reserved_bytes, 0) - ?)"
        )
        # Placeholders in the order they appear: the reserve's seats, the allowance, its card.
        params: list[Any] = [*reserve.for_]
        params += [] if fixed is None else [fixed]
        params += [reserve.host, reserve.gpu]
        sql = (
            "SELECT g.taken_at_s, g.snapshot_id, g.used_bytes - COALESCE((SELECT SUM(s.bytes) "
            "  FROM gp_seat s JOIN gp_key k ON k.kid = s.kid WHERE s.snapshot_id = g.snapshot_id "
            f"  AND s.card_idx = g.idx AND k.seat IN ({own})), 0) AS others, {allowed} AS allowed "
            "FROM gp_card g WHERE g.host = ? AND g.idx = ?"
        )
        summary = conn.execute(
            "SELECT COUNT(*), MIN(taken_at_s), MAX(taken_at_s) FROM ("
            + sql
            + ") WHERE others > allowed",
            params,
        ).fetchone()
        worst = conn.execute(
            "SELECT others, taken_at_s FROM (" + sql + ") WHERE others > allowed "
            "ORDER BY others DESC, taken_at_s ASC LIMIT 1",
            params,
        ).fetchone()
        holders: list[str] = []
        violated_now = False
        if summary[0]:
            holder_rows = conn.execute(
                "SELECT name, MAX(bytes) FROM ("
                "  SELECT k.seat AS name, s.bytes FROM gp_key k JOIN gp_sorted s ON s.kid = k.kid "
                f"  WHERE k.host = ? AND k.card_idx = ? AND k.seat NOT IN ({own}) "
                "  UNION ALL SELECT COALESCE(cmdline, 'pid ' || pid), COALESCE(used_bytes, 0) "
                "  FROM gp_foreign WHERE host = ? AND card_idx = ?) "
                "GROUP BY name ORDER BY 2 DESC LIMIT 5",
                (reserve.host, reserve.gpu, *reserve.for_, reserve.host, reserve.gpu),
            ).fetchall()
            holders = [f"{name} ({format_bytes(int(top))})" for name, top in holder_rows]
            if card is not None and card.ok and snapshot is not None:
                violated_now = int(summary[2]) == int(snapshot.taken_at.timestamp())
        rows.append(
            ReserveRow(
                name=reserve.name,
                host=reserve.host,
                card=reserve.gpu,
                for_seats=reserve.for_,
                reserve_bytes=held,
                violations=int(summary[0]),
                first_at=format_utc(_utc(int(summary[1]))) if summary[0] else None,
                last_at=format_utc(_utc(int(summary[2]))) if summary[0] else None,
                worst_bytes=int(worst[0]) if worst else None,
                worst_at=format_utc(_utc(int(worst[1]))) if worst else None,
                holders=tuple(holders),
                violated_now=violated_now,
            )
        )
    return tuple(rows)


def _decisions(conn: sqlite3.Connection, window: Window) -> tuple[DecisionRow, ...]:
    rows = conn.execute(
        "SELECT decided_at, kind, host, seat, cards, verdict, reasons FROM decisions "
        "WHERE decided_at_s >= ? AND decided_at_s < ? ORDER BY decided_at_s, id",
        (window.start_s, window.end_s),
    ).fetchall()
    out: list[DecisionRow] = []
    for decided_at, kind, host, seat, cards, verdict, reasons in rows:
        out.append(
            DecisionRow(
                decided_at=decided_at,
                kind=kind,
                host=host,
                seat=seat,
                cards=tuple(int(c) for c in _json_list(cards)),
                verdict=verdict,
                reasons=tuple(r for r in _json_list(reasons) if isinstance(r, dict)),
            )
        )
    return tuple(out)


def _json_list(text: str | None) -> list[Any]:
    # A row written by another tool with bad JSON should not sink the whole report.
    if not text:
        return []
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return []
    return value if isinstance(value, list) else []


def _loras(catalogue: Catalogue) -> tuple[LoraRow, ...]:
    rows: list[LoraRow] = []
    for seat in catalogue.seats:
        if seat.lora is None or seat.state == "retired":
            continue
        adapters = seat.lora.adapters
        merged = len(adapters) * seat.weights_bytes if seat.weights_bytes is not None else None
        rows.append(
            LoraRow(
                seat=seat.name,
                host=seat.host,
                max_loras=seat.lora.max_loras,
                persisted=tuple(a.name for a in adapters if a.persisted),
                runtime_only=tuple(a.name for a in adapters if not a.persisted),
                carrier_bytes=seat.resident_bytes,
                weights_bytes=seat.weights_bytes,
                merged_bytes=merged,
                saved_bytes=merged - seat.resident_bytes if merged is not None else None,
            )
        )
    return tuple(rows)


def _chart_step(span_s: int) -> int:
    for step in _CHART_STEPS_S:
        if span_s / step <= _CHART_POINTS:
            return step
    return _CHART_STEPS_S[-1]


def _charts(
    conn: sqlite3.Connection,
    catalogue: Catalogue,
    current: dict[str, Snapshot],
    first_s: int,
    last_s: int,
) -> tuple[ChartSeries, ...]:
    step = _chart_step(last_s - first_s)
    samples: dict[tuple[str, int], dict[int, int]] = defaultdict(dict)
    other: dict[tuple[str, int], dict[int, float]] = defaultdict(dict)
    for host, idx, bucket, n, unexplained in conn.execute(
        "SELECT host, idx, taken_at_s / ? AS b, COUNT(*), SUM(MAX(unexplained, 0)) FROM gp_card "
        "GROUP BY b, host, idx",
        (step,),
    ):
        samples[(host, idx)][int(bucket)] = int(n)
        other[(host, idx)][int(bucket)] = float(unexplained)
    by_seat: dict[tuple[str, int], dict[str, dict[int, float]]] = defaultdict(
        lambda: defaultdict(dict)
    )
    key_of = _keys(conn)
    for kid, bucket, total in conn.execute(
        "SELECT kid, taken_at_s / ? AS b, SUM(bytes) FROM gp_seat GROUP BY b, kid", (step,)
    ):
        host, idx, seat = key_of[int(kid)]
        by_seat[(host, idx)][seat][int(bucket)] = float(total)
    out: list[ChartSeries] = []
    for key in sorted(samples):
        host, idx = key
        buckets = sorted(samples[key])
        counts = [samples[key][b] for b in buckets]
        # Seats declared on the card first (stable colours across cards), then the rest.
        declared = [s.name for s in seats_declared_on(catalogue, host, idx)]
        names = [n for n in declared if n in by_seat[key]] + sorted(
            n for n in by_seat[key] if n not in declared
        )
        layers = [
            (
                name,
                tuple(
                    by_seat[key][name].get(b, 0.0) / n for b, n in zip(buckets, counts, strict=True)
                ),
            )
            for name in names
        ]
        layers.append(
            ("other", tuple(other[key][b] / n for b, n in zip(buckets, counts, strict=True)))
        )
        snapshot = current.get(host)
        card = None
        if snapshot is not None:
            try:
                card = snapshot.card(idx)
            except KeyError:
                card = None
        out.append(
            ChartSeries(
                host=host,
                card=idx,
                bucket_s=step,
                times_s=tuple(b * step for b in buckets),
                layers=tuple(layers),
                cuda_total_bytes=cuda_total(card) if card is not None and card.ok else None,
                declared_bytes=_declared(catalogue, host, idx),
                held_bytes=sum(p.bytes for p in held_parts(catalogue, host, card))
                if card is not None and card.ok
                else 0,
            )
        )
    return tuple(out)


# --- the headline -----------------------------------------------------------------------


def verifier_probe(
    catalogue: Catalogue, snapshot: Snapshot, card: int, resident: int, vllm: bool
) -> tuple[bool, str, str | None]:
    """Ask the shared verifier whether a new seat of `resident` bytes may start on `card` now.

    The vLLM probe pins its KV cache and asks for the smallest 3-decimal util that covers its
    resident (the seed's practice), so vLLM's own gate checks the whole seat: gates included.
    """
    from placement.fit.engines import smallest_util_covering
    from placement.fit.verify import judge

    host = snapshot.host
    name = "(largest new seat)"
    if not vllm:
        seat = Seat(name=name, host=host, gpus=(card,), resident=resident)
        verdict = judge(catalogue, snapshot, seat, [card], mode="plan")
        return verdict.passed, _rules(verdict.reasons), None
    total = cuda_total(snapshot.card(card))
    util = smallest_util_covering(resident, total)
    if util is None:
        return False, "gate", None
    seat = Seat(
        name=name,
        host=host,
        gpus=(card,),
        resident=resident,
        engine=Engine(
            kind="vllm",
            version=_vllm_version(catalogue, host),
            kv_cache_memory=max(1, resident // 4),
        ),
    )
    verdict = judge(catalogue, snapshot, seat, [card], mode="check", util=util)
    return verdict.passed, _rules(verdict.reasons), str(util)


def _rules(reasons: Sequence[Any]) -> str:
    return ", ".join(sorted({str(reason.rule) for reason in reasons}))


def _vllm_version(catalogue: Catalogue, host: str) -> str:
    """The vLLM version most of the host's seats run (the next seat likely runs it too)."""
    versions = [
        s.engine.version
        for s in catalogue.seats
        if s.host == host and s.engine.kind == "vllm" and s.engine.version is not None
    ]
    if not versions:
        return "0.11.0"
    return max(sorted(set(versions)), key=versions.count)


def largest_fit(
    probe: Probe, catalogue: Catalogue, snapshot: Snapshot, card: int, vllm: bool
) -> tuple[int, str, str | None]:
    """Largest whole MiB a new seat may hold on `card` per the verifier; binary search on bytes.

    Fitting is monotone in the seat's size (a bigger seat needs more room and, for vLLM,
    a bigger util), so the search is exact to the MiB.
    """
    mib = 1024 * 1024
    top = (snapshot.card(card).free_bytes or 0) // mib
    ok, binding, util = probe(catalogue, snapshot, card, mib, vllm)
    if not ok:
        return 0, binding, None
    low, high = 1, top + 1  # low fits, high does not
    best_util = util
    ok_top, binding_top, util_top = (
        probe(catalogue, snapshot, card, top * mib, vllm) if top > 1 else (True, "", util)
    )
    if ok_top:
        return top * mib, "free", util_top
    binding = binding_top
    high = top
    while high - low > 1:
        mid = (low + high) // 2
        ok, why, util = probe(catalogue, snapshot, card, mid * mib, vllm)
        if ok:
            low, best_util = mid, util
        else:
            high, binding = mid, why
    return low * mib, binding, best_util


def _headline(
    catalogue: Catalogue,
    snapshot: Snapshot,
    cards: Sequence[CardRow],
    seats: Sequence[SeatRow],
    missing: Sequence[MissingSeat],
    absent_now: Sequence[tuple[str, str, int]],
    foreign: Sequence[ForeignProcess],
    reserves: Sequence[ReserveRow],
    decisions: Sequence[DecisionRow],
    loras: Sequence[LoraRow],
    probe: Probe | None,
) -> Headline:
    host = snapshot.host
    fits: list[CardFit] = []
    if probe is not None:
        for card in snapshot.cards:
            if not card.ok:
                fits.append(CardFit(card.index, 0, 0, None, "error"))
                continue
            plain, why_plain, _ = largest_fit(probe, catalogue, snapshot, card.index, False)
            vllm, why_vllm, util = largest_fit(probe, catalogue, snapshot, card.index, True)
            binding = why_plain if why_plain == why_vllm else f"{why_plain}; vLLM: {why_vllm}"
            fits.append(CardFit(card.index, plain, vllm, util, binding))
    host_reserves = [r for r in reserves if r.host == host]
    broken = [r for r in host_reserves if r.violations]
    if not host_reserves:
        reserves_text = "no reserves on this host"
    elif not broken:
        reserves_text = "every reserve was honoured in every snapshot"
    else:
        reserves_text = "; ".join(
            f"{r.name} (card {r.card}) broken in {r.violations} snapshot(s), "
            f"{r.first_at} – {r.last_at}{', and now' if r.violated_now else ''}"
            for r in broken
        )
    actions: list[str] = []
    for r in broken:
        if r.violated_now:
            actions.append(
                f"free card {r.card}: {', '.join(r.holders) or 'something'} holds memory held for "
                f"{', '.join(r.for_seats)} ({r.name})"
            )
    for c in cards:
        if c.host == host and c.unexplained_now_bytes and c.unexplained_now_bytes > 0:
            actions.append(
                f"card {c.card} has {format_bytes(c.unexplained_now_bytes)} in processes matching no seat: "
                "name them in the catalogue or stop them"
            )
    flagged = sorted(
        (s for s in seats if s.host == host and s.flagged and s.drift_bytes is not None),
        key=lambda s: -abs(s.drift_bytes or 0),
    )
    for s in flagged:
        verb = "holds more" if (s.drift_bytes or 0) > 0 else "holds less"
        actions.append(
            f"{s.seat} (card {s.card}) {verb} than declared: p95 {format_bytes(s.p95_bytes)} vs "
            f"{format_bytes(s.declared_bytes)} ({_signed(s.drift_bytes)}); "
            + _drift_advice(catalogue, s)
        )
    for s in seats:
        if s.host == host and s.grew and not s.flagged:
            actions.append(
                f"{s.seat} (card {s.card}) grew {_signed(s.growth_bytes)} over the window: watch it"
            )
    for r in broken:
        if not r.violated_now:
            actions.append(
                f"{r.name} (card {r.card}) was broken in {r.violations} snapshot(s) from {r.first_at} "
                f"by {', '.join(r.holders) or 'something else'}: find who used the held card"
            )
    for m in missing:
        if m.host == host:
            actions.append(f"{m.seat} ran nowhere in the window: retire it or bring it back")
    for seat, seat_host, card_index in absent_now:
        if seat_host == host and not any(m.seat == seat for m in missing):
            actions.append(f"{seat} is down on card {card_index} now and still keeps its place")
    for lora in loras:
        if lora.host == host and lora.runtime_only:
            actions.append(
                f"{lora.seat}: {', '.join(lora.runtime_only)} loaded at runtime only — gone on the next "
                "recreate unless added to --lora-modules"
            )
    refused = [d for d in decisions if d.host == host and d.verdict == "refuse"]
    if refused:
        actions.append(
            f"{len(refused)} refused plan/check decision(s) in the window: see Decisions"
        )
    if fits and all(f.largest_bytes < GiB for f in fits):
        actions.append("no card takes another 1 GiB seat: the next seat needs a placement decision")
    return Headline(
        host=host,
        taken_at=format_utc(snapshot.taken_at),
        fits=tuple(fits),
        reserves_honoured=not broken,
        reserves_text=reserves_text,
        action=actions[0] if actions else "nothing needs acting on",
        other_actions=tuple(actions[1:]),
    )


def _drift_advice(catalogue: Catalogue, row: SeatRow) -> str:
    if (row.drift_bytes or 0) < 0:
        return "lower its declared resident to free plannable room"
    try:
        seat = catalogue.seat(row.seat)
    except KeyError:
        return "declare it in the catalogue"
    if seat.engine.kind == "vllm" and seat.engine.kv_cache_bytes is None:
        # The seed: a vLLM seat without a pinned KV cache grows to its util's request.
        return "pin its KV cache (--kv-cache-memory-bytes) or set its resident to the p95"
    if row.grew:
        return f"it grew {_signed(row.growth_bytes)} in the window: look for a leak, or set its resident to the p95"
    return "set its resident to the p95"


def _signed(n: int | None) -> str:
    if n is None:
        return "-"
    return ("+" if n > 0 else "") + format_bytes(n)
