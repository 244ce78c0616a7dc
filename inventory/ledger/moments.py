"""A host's stored moments as rows: what the history reads for a window's replay (the SQL).

Kept apart from `report_queries` so that `check --window` imports only what it reads.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from inventory.ledger.schema import has_column

Connection = sqlite3.Connection

# --- moments -----------------------------------------------------------------------------

# One card of a stored snapshot: (taken_at_s, idx, total, reserved, used, free, error).
CardRowValues = tuple[int, int, int | None, int | None, int | None, int | None, str | None]
# One process of it: (taken_at_s, card idx, pid, used, masked command line, recorded seat).
ProcessRowValues = tuple[int, int, int, int | None, str | None, str | None]


def moment_rows(
    conn: Connection,
    host: str,
    start_s: int,
    end_s: int,
    cards: Sequence[int] | None = None,
) -> tuple[list[CardRowValues], list[ProcessRowValues]]:
    """The card and process rows of `host`'s snapshots taken in [start_s, end_s), oldest first;
    with `cards`, only those cards' rows."""
    window = "FROM snapshots s JOIN {} ON x.snapshot_id = s.id WHERE s.host = ? AND s.taken_at_s >= ? AND s.taken_at_s < ? "
    only = ""
    if cards is not None:
        only = "AND x.{} IN ({}) ".format("{}", ", ".join(str(int(c)) for c in cards))
    cards_rows = conn.execute(
        "SELECT s.taken_at_s, x.idx, x.total_bytes, x.reserved_bytes, x.used_bytes, x.free_bytes, "
        "x.error " + window.format("cards x") + only.format("idx") + "ORDER BY s.taken_at_s, x.idx",
        (host, start_s, end_s),
    ).fetchall()
    processes = conn.execute(
        "SELECT s.taken_at_s, x.card_idx, x.pid, x.used_bytes, x.cmdline, x.seat "
        + window.format("processes x")
        + only.format("card_idx")
        + "ORDER BY s.taken_at_s, x.card_idx, x.rowid",
        (host, start_s, end_s),
    ).fetchall()
    return cards_rows, processes


def moment_times(
    conn: Connection, host: str, start_s: int, end_s: int
) -> list[tuple[int, int | None]]:
    """(taken_at_s, arrived_at_s or None) of `host`'s snapshots taken in [start_s, end_s), in time
    order (a ledger from before arrival times: None each)."""
    arrived = "arrived_at_s" if has_column(conn, "snapshots", "arrived_at_s") else "NULL"
    return conn.execute(
        f"SELECT taken_at_s, {arrived} FROM snapshots WHERE host = ? AND taken_at_s >= ?"
        " AND taken_at_s < ? ORDER BY taken_at_s",
        (host, start_s, end_s),
    ).fetchall()
