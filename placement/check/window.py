"""`check --window D`: the check's verdicts judged again over every moment of the window.

The check at the window's end is the one `check` always makes (a deploy starts now); this reads
the host's moments through the history interface, replays them (`placement.fit.week`) with the
seats as that check judged them, and combines: a refusal at the end or over the window refuses;
else too little history or coverage is `unknown`; else the verdict stands.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Protocol

from placement.check.seat import CheckResult
from placement.fit.week import NewSeat, SeatWindow, WindowRules
from placement.fit.week.prune import replay_history
from seats.model import Catalogue

# The most a window may reach back (DESIGN.md "The week").
MAX_WINDOW = timedelta(days=31)


class History(Protocol):
    """What the window reads of `inventory.history.History`: a host's moments (its `Moment`s;
    check reads them through the history's interface, never its modules)."""

    def moments(self, host: str, start: datetime, end: datetime) -> Iterable[Any]: ...


@dataclass(frozen=True)
class WindowOptions:
    """The `--window` family of flags, as read."""

    length: timedelta
    percentile: Decimal = Decimal(100)
    min_history: timedelta = timedelta(hours=24)
    min_coverage: Decimal = Decimal("0.9")
    horizon_days: Decimal | None = None
    restart_safe: bool = False
    rebase: bool = True


@dataclass(frozen=True)
class WindowedResult:
    """One check's result with its verdict judged over the window, and the window's figures."""

    result: CheckResult
    window: SeatWindow


def new_seat(result: CheckResult) -> NewSeat:
    """The seat as the end's check judged it: its need, its gate request per card."""
    verdict = result.verdict
    return NewSeat(
        name=verdict.seat,
        cards=tuple(verdict.cards),
        need_bytes=verdict.need_bytes or 0,
        requested_bytes={f.card: f.requested_bytes for f in verdict.figures if f.requested_bytes},
        resident_bytes=result.seat.resident_bytes,
        exclusive=result.seat.exclusive,
    )


def window_rules(options: WindowOptions, result: CheckResult) -> WindowRules:
    """The window that ends at the snapshot the check judged on."""
    end = result.snapshot.taken_at
    return WindowRules(
        start=end - options.length,
        end=end,
        percentile=options.percentile,
        min_history_s=int(options.min_history.total_seconds()),
        min_coverage=options.min_coverage,
        horizon_days=options.horizon_days,
        restart_safe=options.restart_safe,
        rebase=options.rebase,
    )


def judge_window(
    catalogue: Catalogue,
    history: History,
    results: Sequence[CheckResult],
    options: WindowOptions,
) -> list[WindowedResult]:
    """Every result judged over the window of its host (the seats of one host judged together,
    as one deploy: each meets the others placed at every moment)."""
    by_host: dict[str, list[CheckResult]] = {}
    for result in results:
        by_host.setdefault(result.snapshot.host, []).append(result)
    windows: dict[int, SeatWindow] = {}
    for mine in by_host.values():
        judged = [r for r in mine if r.verdict.cards and r.verdict.need_bytes is not None]
        if not judged:
            continue
        rules = window_rules(options, judged[0])
        seats = [new_seat(r) for r in judged]
        # The rollups first, raw moments only for the hours they cannot decide (a history
        # without rollups: every moment of [start, end]).
        replayed = replay_history(catalogue, judged[0].snapshot, history, seats, rules)
        for result, seat_window in zip(judged, replayed, strict=True):
            windows[id(result)] = seat_window
    return [
        WindowedResult(combined(result, windows[id(result)]), windows[id(result)])
        for result in results
        if id(result) in windows
    ]


def combined(result: CheckResult, window: SeatWindow) -> CheckResult:
    """The end's verdict with the window's reasons: refuse if either refuses; else unknown if
    either is; else pass."""
    verdict = result.verdict
    kind = verdict.verdict
    if kind != "refuse":
        if window.status == "refuse":
            kind = "refuse"
        elif window.status == "unknown":
            kind = "unknown"
    reasons = (*verdict.reasons, *window.reasons)
    return replace(result, verdict=replace(verdict, verdict=kind, reasons=reasons))
