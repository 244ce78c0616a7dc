"""A fleet's window from the stored hourly rollups, every host at once (the SQL).

`ledger --window` over hosts whose raw moments no longer reach the window's start (`compact`)
judges them on their hourly rollups: per card and 24 h bucket ending at each host's own end, the
least free and when, the hours seen and the readable samples. One query answers every host; a
test holds it equal to the same figures read host by host (`LedgerHistory.rollups`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import NamedTuple

DAY_S = 86_400
# The least free and its second are folded into one integer so that SQLite's MIN keeps the
# earliest of equals: free << AT_BITS | (second − the window's first second). A window is at
# most 31 days (< 2**22 s) and free under 2**41 bytes (2 TiB), so it stays under 2**63.
AT_BITS = 22
# Hosts per query: three bound values each, under SQLite's limit of 32,766.
HOSTS_PER_QUERY = 8_000


class DailyRoom(NamedTuple):
    """One card's rollups over one 24 h bucket k of its host's window (k days before its end)."""

    host: str
    card: int
    day: int  # k: the hours whose first second lies in [end − (k + 1) days, end − k days)
    min_free_bytes: int | None  # None: no readable sample in the bucket
    min_free_at_s: int | None
    hours: int  # hours with a readable sample
    samples: int  # readable samples
    error_samples: int
    # False where the source keeps only the hour of the least (Prometheus's recorded rollups):
    # `min_free_at_s` is then the end of that hour (the rule's evaluation).
    dated: bool = True


def daily_rooms(
    connection: sqlite3.Connection, windows: Sequence[tuple[str, int, int]]
) -> list[DailyRoom]:
    """For each (host, first_s, end_s): its cards' stored hours starting in [first_s, end_s),
    by 24 h bucket ending at end_s; by host, card and bucket."""
    out: list[DailyRoom] = []
    for low in range(0, len(windows), HOSTS_PER_QUERY):
        part = windows[low : low + HOSTS_PER_QUERY]
        values = ", ".join("(?, ?, ?)" for _ in part)
        params = [value for window in part for value in window]
        rows = connection.execute(
            f"WITH w(host, first_s, end_s) AS (VALUES {values})"
            " SELECT c.host, c.card_idx, (w.end_s - 1 - c.hour_s) / 86400 AS k, w.first_s,"
            f" MIN((c.min_free_bytes << {AT_BITS}) + (c.min_free_at_s - w.first_s)),"
            " COUNT(c.min_free_bytes), SUM(c.samples), SUM(c.error_samples)"
            " FROM w JOIN card_hours c ON c.host = w.host AND c.hour_s >= w.first_s"
            " AND c.hour_s < w.end_s GROUP BY c.host, c.card_idx, k ORDER BY c.host, c.card_idx, k",
            params,
        )
        for host, card, k, first_s, folded, hours, samples, errors in rows:
            free = at = None
            if folded is not None:
                free, offset = folded >> AT_BITS, folded & ((1 << AT_BITS) - 1)
                at = int(first_s) + offset
            out.append(
                DailyRoom(
                    str(host), int(card), int(k), free, at, int(hours), int(samples), int(errors)
                )
            )
    return out


def raw_kept(connection: sqlite3.Connection) -> dict[str, int]:
    """host → the first second of its raw moments, for every host `compact` ever thinned."""
    found = connection.execute(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'raw_kept'"
    ).fetchone()[0]
    if not found:
        return {}
    return {str(h): int(s) for h, s in connection.execute("SELECT host, since_s FROM raw_kept")}
