"""The moments `plan --window` and `ledger --window` replay: each host's, read once from the
ledger's history, over the window that ends at its newest snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from inventory.snapshot import Snapshot


def host_moments(
    ledger_path: str, snapshots: Sequence[Snapshot], length: timedelta
) -> dict[str, list[Any]]:
    """host → its moments in [snapshot − length, snapshot], oldest first."""
    from inventory.history.ledger import LedgerHistory
    from inventory.ledger.store import open_ledger

    moments: dict[str, list[Any]] = {}
    with open_ledger(ledger_path, readonly=True) as ledger:
        history = LedgerHistory(ledger.connection)
        for snapshot in snapshots:
            end = snapshot.taken_at
            # History.moments is [start, end): one second past the end takes the end's own moment.
            found = history.moments(snapshot.host, end - length, end + timedelta(seconds=1))
            moments[snapshot.host] = list(found)
    return moments
