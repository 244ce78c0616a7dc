"""The week: a deploy judged against every stored moment of a host, not one snapshot.

How to call it (pure: no I/O, no clock; DESIGN.md "The week")::

    from placement.fit.week import NewSeat, WindowRules, replay

    rules = WindowRules(start=end - timedelta(days=7), end=end, percentile=Decimal(100))
    seats = [NewSeat("tts", (1,), need_bytes=6 * GiB, requested_bytes={1: 5 * GiB})]
    windows = replay(catalogue, snapshot, history.moments(host, rules.start, end_plus), seats, rules)

`snapshot` is the host's newest snapshot (attributed, active holds attached): the one the
verifier judged the seats on at the window's end; `need_bytes` and `requested_bytes` are what
it found (the verdict's need and each card's gate request; empty for a seat with no gate).
Each `SeatWindow` has the union of its cards' short moments, the worst moment, per-card
windows (least room and when, short moments by UTC hour, who squeezed the card then, the
trend forecast), restart risks, cold and rebased seats, and the reasons of rules `peak`,
`restart` (with `restart_safe`) and `trend` (with `horizon_days`) as data: every reason's
`text` is empty, its sentence is written in `placement.cli`. `SeatWindow.to_json()` is the
VERDICT's `window` block; `status` is refuse, unknown (history, coverage) or pass, in
DESIGN.md's order. `open_rooms` gives the same per-card windows for a seat nothing names
(need 0, or one per card; `open_windows`: with the host's figures), `ledger --window`'s;
`window_model` lowers a card's model to its window room at the percentile, `plan --window`'s
capacity.
"""

from __future__ import annotations

from placement.fit.week.capacity import lowered_bytes, window_model
from placement.fit.week.model import (
    CardWindow,
    Cold,
    Forecast,
    Gap,
    HostWindow,
    NewSeat,
    Rebased,
    RestartRisk,
    SeatWindow,
    Squeezer,
    WindowReason,
    WindowRules,
    WindowWarning,
)
from placement.fit.week.replay import open_rooms, open_windows, replay
from placement.fit.week.stats import allowed_short, pass_percentile

__all__ = [
    "CardWindow",
    "Cold",
    "Forecast",
    "Gap",
    "HostWindow",
    "NewSeat",
    "Rebased",
    "RestartRisk",
    "SeatWindow",
    "Squeezer",
    "WindowReason",
    "WindowRules",
    "WindowWarning",
    "allowed_short",
    "lowered_bytes",
    "open_rooms",
    "open_windows",
    "pass_percentile",
    "replay",
    "window_model",
]
