"""`check --window D`: the check's verdicts judged again over every moment of the window.

The check at the window's end is the one `check` always makes (a deploy starts now); this reads
the host's moments through the history interface, replays them (`placement.fit.week`) with the
seats as that check judged them, and combines: a refusal at the end or over the window refuses;
else too little history or coverage is `unknown`; else the verdict stands.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Protocol

from placement.check.seat import CheckResult
from placement.fit.week import SeatWindow
from placement.fit.week.prune import replay_history
from placement.fit.week.windowed import WindowOptions, combined, judged_seat
from seats.model import Catalogue


class History(Protocol):
    """What the window reads of `inventory.history.History`: a host's moments (its `Moment`s;
    check reads them through the history's interface, never its modules)."""

    def moments(self, host: str, start: datetime, end: datetime) -> Iterable[Any]: ...


@dataclass(frozen=True)
class WindowedResult:
    """One check's result with its verdict judged over the window, and the window's figures."""

    result: CheckResult
    window: SeatWindow


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
        rules = options.rules(judged[0].snapshot.taken_at)
        seats = [judged_seat(r.seat, r.verdict) for r in judged]
        # The rollups first, raw moments only for the hours they cannot decide (a history
        # without rollups: every moment of [start, end]).
        replayed = replay_history(catalogue, judged[0].snapshot, history, seats, rules)
        for result, seat_window in zip(judged, replayed, strict=True):
            windows[id(result)] = seat_window
    return [
        WindowedResult(
            replace(result, verdict=combined(result.verdict, windows[id(result)])),
            windows[id(result)],
        )
        for result in results
        if id(result) in windows
    ]
