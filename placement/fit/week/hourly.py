"""A host's window judged on its hourly rollups alone: where `compact` removed the raw moments
(DESIGN.md "Scale and retention": such a window says it was judged on hourly rollups).

Per card, from the least free of each 24 h bucket of whole hours (`inventory.ledger.fleet_rooms`):
room now (the card model's at the end, as the replay finds it), the window's least room and
when, and the days until the least-squares line of the daily least rooms reaches zero, fitted
as `trend` fits it. Without moments every seat counts as observed: room(t) = room now + free(t)
− free now (no cold or rebased seat; a seat down now keeps its place at every hour); a bucket
counts in the trend when at least 12 of its hours were seen. Where every seat was warm and up
throughout and the end is a moment's last of its hour, these are the replay's figures
(tests/placement/week/test_hourly.py compares them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from inventory.snapshot import Snapshot, format_utc
from placement.fit.week.model import Forecast
from placement.fit.week.prune import rooms_now
from placement.fit.week.stats import forecast
from seats.model import Catalogue

# A bucket of 24 hours counts in the trend when at least this many of its hours were seen.
BUCKET_HOURS = 12


class DailyRoomRow(Protocol):
    """One card's bucket of rollups (`inventory.ledger.fleet_rooms.DailyRoom`)."""

    @property
    def card(self) -> int: ...
    @property
    def day(self) -> int: ...
    @property
    def min_free_bytes(self) -> int | None: ...
    @property
    def min_free_at_s(self) -> int | None: ...
    @property
    def hours(self) -> int: ...
    @property
    def samples(self) -> int: ...
    @property
    def dated(self) -> bool: ...


@dataclass(frozen=True)
class HourlyCard:
    """One card over the window's hours: room now, the least room and when, the trend."""

    card: int
    room_now_bytes: int
    window_room_bytes: int | None  # None: no hour seen
    min_room_at: datetime | None
    hours: int
    samples: int
    forecast: Forecast
    # False where only the hour of the least is known (Prometheus's recorded rollups):
    # `min_room_at` is then the end of that hour (the recording rule's evaluation).
    min_room_dated: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "card": self.card,
            "room_now_bytes": self.room_now_bytes,
            "window_room_bytes": self.window_room_bytes,
            "min_room_at": _utc(self.min_room_at),
            "min_room_dated": self.min_room_dated,
            "hours": self.hours,
            "samples": self.samples,
            "forecast": self.forecast.to_json(),
        }


@dataclass(frozen=True)
class HourlyWindow:
    """A host's window judged on its hourly rollups (its raw moments start at `raw_since`)."""

    host: str
    start: datetime
    end: datetime
    raw_since: datetime
    cards: tuple[HourlyCard, ...]
    # What kept the rollups: the ledger's ("hourly rollups"), or Prometheus's recording rules.
    judged_on: str = "hourly rollups"

    def to_json(self) -> dict[str, Any]:
        return {
            "start": _utc(self.start),
            "end": _utc(self.end),
            "seconds": int((self.end - self.start).total_seconds()),
            "judged_on": self.judged_on,
            "raw_since": _utc(self.raw_since),
            "cards": [card.to_json() for card in self.cards],
        }


def hourly_window(
    catalogue: Catalogue,
    snapshot: Snapshot,
    rows: Sequence[DailyRoomRow],
    start: datetime,
    raw_since: datetime,
    judged_on: str = "hourly rollups",
) -> HourlyWindow:
    """`snapshot` (the window's end, attributed) and its host's buckets of rollups (`rows`)."""
    now = rooms_now(catalogue, snapshot)
    free_now = {c.index: c.free_bytes for c in snapshot.cards}
    by_card: dict[int, list[DailyRoomRow]] = {}
    for row in rows:
        by_card.setdefault(row.card, []).append(row)
    cards: list[HourlyCard] = []
    for index, room_now in sorted(now.items()):
        free = free_now.get(index)
        found = by_card.get(index, [])
        seen = [r for r in found if r.min_free_bytes is not None and r.min_free_at_s is not None]
        if free is None or not seen:
            continue
        least = min(seen, key=lambda r: (r.min_free_bytes, r.min_free_at_s))
        points = sorted(
            (float(-r.day), room_now + (r.min_free_bytes or 0) - free)
            for r in seen
            if r.hours >= BUCKET_HOURS
        )
        cards.append(
            HourlyCard(
                card=index,
                room_now_bytes=room_now,
                window_room_bytes=room_now + (least.min_free_bytes or 0) - free,
                min_room_at=datetime.fromtimestamp(least.min_free_at_s or 0, UTC),
                hours=sum(r.hours for r in found),
                samples=sum(r.samples for r in found),
                forecast=forecast(points, max(0, room_now)),
                min_room_dated=least.dated,
            )
        )
    return HourlyWindow(snapshot.host, start, snapshot.taken_at, raw_since, tuple(cards), judged_on)


def _utc(moment: datetime | None) -> str | None:
    return None if moment is None else format_utc(moment)
