"""The one door from the compose check to the modules it does not own (fit, plan, check.seat).

Those are being reshaped; every name the compose check and its CLI use from them is taken
here, so a rename there is a fix in this file alone.
"""

from __future__ import annotations

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
from placement.fit.verdict import CardFigures, Reason, Verdict
from placement.fit.verify import Placement, host_catalogues, judge
from placement.plan.problem import check_snapshots, load_add_file, new_seats

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
    "judge",
    "load_add_file",
    "new_seats",
    "pick_snapshot",
    "result_json",
    "worst_exit",
]
