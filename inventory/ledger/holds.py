"""The holds table: approvals recorded by `check`, read back as active holds, ended when seen.

A hold is active while `ended_at_s` is NULL, `expires_at_s` is in the future, and no snapshot
of its host taken at or after the hold shows a process of its seat on every one of its cards
(attribution stores the seat beside each process, so "seen" is a query, not a second matcher).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from inventory.holds import Hold
from inventory.ledger.schema import has_column
from inventory.snapshot import utc

ENDINGS = ("seen", "expired", "released", "replaced")

# True when some snapshot of the hold's host, taken at or after the hold, shows the hold's seat
# on every card of the hold.
_SEEN = """
EXISTS (
  SELECT 1 FROM snapshots s
  WHERE s.host = h.host AND s.taken_at_s >= h.created_at_s
    AND (SELECT COUNT(DISTINCT p.card_idx) FROM processes p
         JOIN hold_cards hc ON hc.hold_id = h.id AND hc.card_idx = p.card_idx
         WHERE p.snapshot_id = s.id AND p.seat = h.seat)
      = (SELECT COUNT(*) FROM hold_cards WHERE hold_id = h.id)
)"""

_COLUMNS = (
    "h.seat, h.host, h.need_bytes, {requested}, h.created_at_s, h.expires_at_s, h.user,"
    " h.decision_id,"
    " (SELECT group_concat(card_idx) FROM (SELECT card_idx FROM hold_cards"
    "  WHERE hold_id = h.id ORDER BY card_idx))"
)


def _columns(connection: sqlite3.Connection | sqlite3.Cursor) -> str:
    """`_COLUMNS`, reading 0 as the request of a ledger opened read-only before version 5."""
    requested = "h.requested_bytes" if has_column(connection, "holds", "requested_bytes") else "0"
    return _COLUMNS.format(requested=requested)


def _holds(
    connection: sqlite3.Connection | sqlite3.Cursor, sql: str, params: tuple[object, ...]
) -> list[Hold]:
    """Holds from rows of `_COLUMNS` (cards as one comma-joined column: one query in all)."""
    return [
        Hold(
            seat=seat,
            host=host,
            cards=tuple(int(c) for c in cards.split(",")) if cards else (),
            need_bytes=need,
            requested_bytes=requested,
            created_at=utc(created),
            expires_at=utc(expires),
            user=user,
            decision_id=decision,
        )
        for seat, host, need, requested, created, expires, user, decision, cards in connection.execute(
            sql, params
        )
    ]


def _has_holds(connection: sqlite3.Connection | sqlite3.Cursor) -> bool:
    # A ledger of an older schema opened read-only has no holds table, and so no holds.
    row = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'holds'"
    ).fetchone()
    return row is not None


def active(connection: sqlite3.Connection | sqlite3.Cursor, now_s: int) -> list[Hold]:
    """Holds active at `now_s`, oldest first."""
    if not _has_holds(connection):
        return []
    return _holds(
        connection,
        f"SELECT {_columns(connection)} FROM holds h WHERE h.ended_at_s IS NULL"
        " AND h.expires_at_s > ?"
        f" AND NOT {_SEEN} ORDER BY h.created_at_s, h.id",
        (now_s,),
    )


def expired_unseen(
    connection: sqlite3.Connection | sqlite3.Cursor, since_s: int, until_s: int, now_s: int
) -> list[Hold]:
    """Holds made in [since_s, until_s) that expired by `now_s` without their seat ever being seen."""
    if not _has_holds(connection):
        return []
    return _holds(
        connection,
        f"SELECT {_columns(connection)} FROM holds h WHERE h.created_at_s >= ?"
        " AND h.created_at_s < ?"
        " AND h.expires_at_s <= ? AND (h.ended_at_s IS NULL OR h.ended_by = 'expired')"
        f" AND NOT {_SEEN} ORDER BY h.expires_at_s, h.id",
        (since_s, until_s, now_s),
    )


def settle(cursor: sqlite3.Cursor, now_s: int) -> None:
    """Mark open holds that were seen, or have expired, as ended (inside a write transaction)."""
    cursor.execute(
        f"UPDATE holds AS h SET ended_at_s = ?, ended_by = 'seen'"
        f" WHERE h.ended_at_s IS NULL AND {_SEEN}",
        (now_s,),
    )
    cursor.execute(
        "UPDATE holds SET ended_at_s = expires_at_s, ended_by = 'expired'"
        " WHERE ended_at_s IS NULL AND expires_at_s <= ?",
        (now_s,),
    )


def end_seat(cursor: sqlite3.Cursor, seat: str, now_s: int, ended_by: str) -> int:
    """End every open hold of `seat` (`released` by hand, or `replaced` by a new check); how many."""
    if ended_by not in ENDINGS:
        raise ValueError(f"a hold ends as one of {ENDINGS}, not {ended_by!r}")
    cursor.execute(
        "UPDATE holds SET ended_at_s = ?, ended_by = ? WHERE seat = ? AND ended_at_s IS NULL"
        " AND expires_at_s > ?",
        (now_s, ended_by, seat, now_s),
    )
    return cursor.rowcount


def insert(cursor: sqlite3.Cursor, holds: Sequence[Hold]) -> list[int]:
    """Insert holds (each replacing the seat's open one); return their ids."""
    ids: list[int] = []
    for hold in holds:
        created_s = int(hold.created_at.timestamp())
        end_seat(cursor, hold.seat, created_s, "replaced")
        cursor.execute(
            "INSERT INTO holds(seat, host, need_bytes, requested_bytes, created_at_s,"
            " expires_at_s, user, decision_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                hold.seat,
                hold.host,
                hold.need_bytes,
                hold.requested_bytes,
                created_s,
                int(hold.expires_at.timestamp()),
                hold.user,
                hold.decision_id,
            ),
        )
        hold_id = int(cursor.lastrowid or 0)
        cursor.executemany(
            "INSERT INTO hold_cards(hold_id, card_idx) VALUES (?, ?)",
            [(hold_id, card) for card in sorted(set(hold.cards))],
        )
        ids.append(hold_id)
    return ids
