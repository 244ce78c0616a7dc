"""A one-line notice before `plan` or `pack` starts work that may outlast a second.

Decided by the problem's size before any solving starts (no timer thread): the time limit the
command will respect is said on stderr, so a long wait is never a silent one.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from inventory.snapshot import Snapshot
    from seats.model import Catalogue

# Seat-card pairs from which `plan`'s integer program may take over a second: measured on the
# bench's fleets (20 seats on 16 cards: 0.7 s, 30 seats on 32 cards: 2 s, on 2 cores).
PLAN_PAIRS = 300
# Seats from which `pack`'s arc-flow program may take over a second when the bound and
# first-fit-decreasing differ (120 seats: up to 0.8 s, 200: up to 1.3 s).
PACK_SEATS = 150


def _say(text: str, time_limit: float) -> None:
    print(f"{text}: up to {time_limit:g} s (--time-limit)", file=sys.stderr)


def plan_notice(
    catalogue: Catalogue, snapshots: Sequence[Snapshot], adds: Sequence[Any], time_limit: float
) -> None:
    """`planning 2,000 seats on 512 cards: up to 30 s (--time-limit)` for a large plan."""
    seats = sum(seat.state == "planned" for seat in catalogue.seats) + len(adds)
    cards = sum(len(snapshot.cards) for snapshot in snapshots)
    if seats * cards >= PLAN_PAIRS and time_limit > 1:
        _say(f"planning {seats:,} seats on {cards:,} cards", time_limit)


def pack_notice(catalogue: Catalogue, time_limit: float) -> None:
    """`packing 300 seats: up to 60 s (--time-limit)` for a large catalogue."""
    seats = sum(seat.state != "retired" for seat in catalogue.seats)
    if seats >= PACK_SEATS and time_limit > 1:
        _say(f"packing {seats:,} seats", time_limit)
