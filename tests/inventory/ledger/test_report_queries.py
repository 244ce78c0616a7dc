"""The report's aggregate queries on real SQLite files: spans, percentiles, attribution, reserve breaches."""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

from inventory.history.figures import ReserveBreaches, breach_points, breaches_of, foreign_usage
from inventory.history.ledger import LedgerHistory, LedgerWindow
from inventory.ledger import report_queries as q
from inventory.ledger.store import open_ledger
from inventory.snapshot import Card, Process, Snapshot
from tests.inventory.helpers import GIB, T0, make_snapshot


def reserve_breaches(
    conn: q.Connection, host: str, card: int, own: list[str] | tuple[str, ...], fixed: int | None
) -> ReserveBreaches:
    """The ledger's breaches of a reserve, as the report's ledger source reduces them."""
    points = breach_points(q.reserve_readings(conn, host, card, own), fixed)
    return breaches_of(points, lambda: q.holders_on(conn, host, card), own)


def nearest_rank(values: list[int], p: int) -> int:
    """Independent nearest-rank percentile: the value at rank ceil(p·N/100), from 1."""
    ordered = sorted(values)
    rank = -(-p * len(ordered) // 100)
    return ordered[rank - 1]


def test_seat_percentiles_are_the_independent_nearest_ranks(tmp_path: Path) -> None:
    # 101 moments of one seat holding scrambled bytes: the window's p50/p95/max, and the medians
    # of its first and last 25 minutes, are the samples at ceil(p·N/100) of each part.
    rng = random.Random(3)
    held = [rng.randrange(GIB, 90 * GIB) for _ in range(101)]
    with open_ledger(tmp_path / "l.sqlite") as ledger:
        for minute, used in enumerate(held):
            card = _card({"own": used}, 0)
            ledger.append(
                Snapshot(host="h", taken_at=T0 + timedelta(minutes=minute), cards=(card,))
            )
        start = int(T0.timestamp())
        window = LedgerHistory(ledger.connection).window(start, start + 101 * 60, lambda *_: "own")
        assert window is not None
        (row,) = window.seat_usage(start, start + 100 * 60, 25 * 60)
    assert (row.samples, row.max_bytes) == (101, max(held))
    assert (row.p50_bytes, row.p95_bytes) == (nearest_rank(held, 50), nearest_rank(held, 95))
    # First part [start, start + 25 min): minutes 0 … 24; last (end − 25 min, end]: 76 … 100.
    assert row.first_p50_bytes == nearest_rank(held[:25], 50)
    assert row.last_p50_bytes == nearest_rank(held[76:], 50)


def test_spans_and_newest_per_host(tmp_path: Path) -> None:
    start = int(T0.timestamp())
    with open_ledger(tmp_path / "l.sqlite") as ledger:
        assert q.ledger_span(ledger.connection) is None
        for minute in range(5):
            ledger.append(make_snapshot("b", minute, cards=1, processes=1))
        ledger.append(make_snapshot("a", 2, cards=1, processes=1))
        conn = ledger.connection
        assert q.ledger_span(conn) == q.Span(start, start + 240, 6)
        # Half-open windows: the snapshot at the end is left out.
        assert q.window_span(conn, start + 60, start + 180) == q.Span(start + 60, start + 120, 3)
        assert q.window_span(conn, start + 600, start + 700) is None
        assert q.newest_per_host(conn, start, start + 180) == [
            ("a", start + 120),
            ("b", start + 120),
        ]


def _card(used_by: dict[str, int], foreign: int = 0) -> Card:
    total, reserved = 100 * GIB, GIB
    processes = [
        Process(pid=100 + i, used_bytes=size, cmdline=f"serve {name}")
        for i, (name, size) in enumerate(used_by.items())
    ]
    if foreign:
        processes.append(Process(pid=999, used_bytes=foreign, cmdline="python notebook.py"))
    used = sum(p.used_bytes or 0 for p in processes)
    return Card(
        index=0,
        total_bytes=total,
        reserved_bytes=reserved,
        used_bytes=used,
        free_bytes=total - reserved - used,
        processes=tuple(processes),
    )


def test_seats_are_attributed_once_per_command_line_and_breaches_found(tmp_path: Path) -> None:
    # Ten minutes of one card: seats "own" and "other" unrecorded at capture (attributed by the
    # callback), and a foreign process for minutes 4 and 5 only.
    with open_ledger(tmp_path / "l.sqlite") as ledger:
        for minute in range(10):
            foreign = 3 * GIB if minute in (4, 5) else 0
            card = _card({"own": 10 * GIB, "other": 2 * GIB + minute}, foreign)
            ledger.append(
                Snapshot(host="h", taken_at=T0 + timedelta(minutes=minute), cards=(card,))
            )
        conn = ledger.connection
        asked: list[tuple[str, str]] = []

        def seat_of(host: str, cmdline: str, parents: tuple[str, ...]) -> str | None:
            assert parents == ()  # none read for these processes
            asked.append((host, cmdline))
            return cmdline.removeprefix("serve ") if cmdline.startswith("serve ") else None

        start = int(T0.timestamp())
        q.prepare_window(conn, start, start + 3600, seat_of)
        assert sorted(asked) == [
            ("h", "python notebook.py"),
            ("h", "serve other"),
            ("h", "serve own"),
        ]
        window = LedgerWindow(conn, q.Span(start, start + 540, 10))
        seats = {u.seat: u for u in window.seat_usage(start, start + 540, 60)}
        assert (seats["own"].samples, seats["own"].p95_bytes) == (10, 10 * GIB)
        assert seats["other"].max_bytes == 2 * GIB + 9
        (foreign,) = foreign_usage(q.foreign_processes(conn), by_command_line=True)
        assert (foreign.cmdline, foreign.samples, foreign.max_bytes) == (
            "python notebook.py",
            2,
            3 * GIB,
        )
        assert (foreign.first_s, foreign.last_s) == (start + 240, start + 300)
        # A whole-card reserve for "own": anything else on the card breaks it, every minute.
        whole = reserve_breaches(conn, "h", 0, ["own"], None)
        assert (whole.snapshots, whole.first_s, whole.last_s) == (10, start, start + 540)
        assert (whole.worst_bytes, whole.worst_at_s) == (5 * GIB + 5, start + 300)
        assert whole.holders == (
            q.Holder("python notebook.py", 3 * GIB),
            q.Holder("other", 2 * GIB + 9),
        )
        # A 95 GiB reserve leaves others cuda_total − 95 GiB = 4 GiB: only the foreign minutes break it.
        fixed = reserve_breaches(conn, "h", 0, ["own"], 95 * GIB)
        assert (fixed.snapshots, fixed.first_s, fixed.last_s) == (2, start + 240, start + 300)
        (usage,) = LedgerWindow(conn, q.Span(start, start + 540, 10)).card_usage()
        assert usage.samples == 10
        # The foreign process is the unexplained part; both extremes are dated by first reach.
        assert (usage.unexplained_max_bytes, usage.unexplained_max_at_s) == (3 * GIB, start + 240)
        assert (usage.min_free_bytes, usage.min_free_at_s) == (99 * GIB - 15 * GIB - 5, start + 300)
