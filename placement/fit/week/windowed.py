"""A verdict at a window's end judged again over the window: the `--window` options, the seat as
the end judged it, and the two verdicts combined; one copy for `check` and `plan` alike.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal

from placement.fit.verdict import Verdict
from placement.fit.week.model import NewSeat, SeatWindow, WindowRules
from seats.model import Seat


@dataclass(frozen=True)
class WindowOptions:
    """The `--window` family of flags, as read; each host's window ends at its snapshot."""

    length: timedelta
    percentile: Decimal = Decimal(100)
    min_history: timedelta = timedelta(hours=24)
    min_coverage: Decimal = Decimal("0.9")
    horizon_days: Decimal | None = None
    restart_safe: bool = False
    rebase: bool = True

    def rules(self, end: datetime) -> WindowRules:
        """The window that ends at `end` (the snapshot the end's verdict was judged on)."""
        return WindowRules(
            start=end - self.length,
            end=end,
            percentile=self.percentile,
            min_history_s=int(self.min_history.total_seconds()),
            min_coverage=self.min_coverage,
            horizon_days=self.horizon_days,
            restart_safe=self.restart_safe,
            rebase=self.rebase,
        )


def judged_seat(seat: Seat, verdict: Verdict) -> NewSeat:
    """The seat as the end's verdict judged it: its need, its gate request per card."""
    return NewSeat(
        name=verdict.seat,
        cards=tuple(verdict.cards),
        need_bytes=verdict.need_bytes or 0,
        requested_bytes={f.card: f.requested_bytes for f in verdict.figures if f.requested_bytes},
        resident_bytes=seat.resident_bytes,
        exclusive=seat.exclusive,
    )


def combined(verdict: Verdict, window: SeatWindow) -> Verdict:
    """The end's verdict with the window's reasons: refuse if either refuses; else unknown if
    either is; else pass."""
    kind = verdict.verdict
    if kind != "refuse":
        if window.status == "refuse":
            kind = "refuse"
        elif window.status == "unknown":
            kind = "unknown"
    return replace(verdict, verdict=kind, reasons=(*verdict.reasons, *window.reasons))
