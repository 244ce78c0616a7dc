"""Seats a ledger already approved: shown on their held cards as approved, not placed again.

An active hold is an approved new seat that has not started (DESIGN.md "Holds"). `plan` reads
holds as `check` does: every hold stays on its cards, where `placement.fit.card` counts it in
room and in every gate and judges its own gate again beside each new seat (rule `hold`). A new
seat of the plan that holds one is therefore not placed again: it is judged where it was
approved, beside the plan's placements, as if it started last (its own hold freed for it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from inventory.holds import Hold
from inventory.snapshot import Snapshot
from placement.fit.verdict import Verdict
from placement.fit.verify import Placement, judge
from placement.plan.problem import NewSeat
from seats.model import Catalogue


def approved_holds(snapshots: Sequence[Snapshot], seats: Sequence[NewSeat]) -> dict[str, Hold]:
    """The active hold of each new seat that has one, by seat name."""
    names = {new.name for new in seats}
    return {
        hold.seat: hold
        for snapshot in snapshots
        for card in snapshot.cards
        for hold in card.holds
        if hold.seat in names
    }


def approved_verdicts(
    catalogue: Catalogue,
    snapshots: Sequence[Snapshot],
    seats: Sequence[NewSeat],
    holds: dict[str, Hold],
    placements: Sequence[Placement],
) -> list[Verdict]:
    """Each approved seat judged on its held cards beside the plan's placements, said as approved."""
    by_host = {snapshot.host: snapshot for snapshot in snapshots}
    out: list[Verdict] = []
    for new in seats:
        hold = holds.get(new.name)
        if hold is None or hold.host not in by_host:
            continue
        others = [p for p in placements if p.host == hold.host]
        verdict = judge(catalogue, by_host[hold.host], new.seat, hold.cards, others=others)
        note = f"approved, not placed again: {hold.note()}"
        out.append(replace(verdict, warnings=(note, *verdict.warnings)))
    return out
