"""The one door from the compose check to the modules it does not own (fit, plan, check.seat).

Those are being reshaped; every name the compose check and its CLI use from them is taken
here, so a rename there is a fix in this file alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from placement.check.seat import (
    CheckResult,
    catalogue_seat,
    check_seat,
    check_service,
    did_you_mean,
    inputs_digest,
    pick_snapshot,
    result_json,
    worst_exit,
)
from placement.fit.beside import is_unbounded, unbounded_beside
from placement.fit.consistency import check_snapshots
from placement.fit.verdict import CardFigures, Reason, Verdict
from placement.fit.verify import Placement, host_catalogues, judge
from seats.model import Catalogue, Seat

if TYPE_CHECKING:
    from placement.plan.problem import NewSeat

__all__ = [
    "CardFigures",
    "CheckResult",
    "Placement",
    "Reason",
    "Verdict",
    "catalogue_seat",
    "check_seat",
    "check_service",
    "check_snapshots",
    "did_you_mean",
    "host_catalogues",
    "inputs_digest",
    "is_unbounded",
    "judge",
    "load_add_file",
    "new_seats",
    "pick_snapshot",
    "result_json",
    "unbounded_beside",
    "worst_exit",
]


# The planner's problem module is only needed for --add files: a compose or seat check that
# has none does not import it (~5 ms of start-up).
def load_add_file(path: str | Path) -> list[Seat]:
    """`placement.plan.problem.load_add_file`, imported when first called."""
    from placement.plan.problem import load_add_file as load

    return load(path)


def new_seats(catalogue: Catalogue, adds: Sequence[tuple[str, Seat]] = ()) -> list[NewSeat]:
    """`placement.plan.problem.new_seats`, imported when first called."""
    from placement.plan.problem import new_seats as seats

    return seats(catalogue, adds)
